// Package client is the Go client of agentplane: typed access to every agentplane.v1
// service over one gRPC connection, with bearer-token and TLS options. ctl and the
// tests use it; so can any Go program.
//
//	c, err := client.Dial(ctx, "127.0.0.1:7233", client.WithToken(tok))
//	defer c.Close()
//	caps, err := c.Capabilities.GetCapabilities(ctx, &agentplanev1.GetCapabilitiesRequest{})
//
// On top of the stubs: Start and Task return a TaskHandle (Wait, Watch, Continue,
// ContinueToolOutputs, Cancel, Interrupts), and Approve, Reject and Edit decide an
// interrupt against its argument digest (task.go; docs/clients.md, "Tasks and decisions").
package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Client holds one connection and a typed stub per service.
type Client struct {
	conn  *grpc.ClientConn
	retry Retry // the backoff of Watch's reconnections (the default for New)

	Spec         agentplanev1.SpecServiceClient
	Tasks        agentplanev1.TaskServiceClient
	Hitl         agentplanev1.HitlServiceClient
	Capabilities agentplanev1.CapabilityServiceClient
	Runtime      agentplanev1.RuntimeServiceClient
	Admin        agentplanev1.AdminServiceClient
	Schedules    agentplanev1.ScheduleServiceClient
	Health       healthpb.HealthClient
}

type options struct {
	token            string
	tlsConfig        *tls.Config
	plaintextTokenOK bool
	dialOptions      []grpc.DialOption
	maxRecvMsgBytes  int
	retry            Retry
}

// Option configures Dial.
type Option func(*options) error

// WithToken sends a bearer token on every call. Over a plaintext connection Dial
// accepts it only to a loopback address, unless WithPlaintextToken is given too.
func WithToken(token string) Option {
	return func(o *options) error { o.token = token; return nil }
}

// WithPlaintextToken allows a token over a plaintext connection to a non-loopback
// address (for example behind a TLS-terminating proxy on a private network).
func WithPlaintextToken() Option {
	return func(o *options) error { o.plaintextTokenOK = true; return nil }
}

// WithTLS uses TLS with the given configuration.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) error { o.tlsConfig = cfg; return nil }
}

// WithTLSFiles uses TLS trusting caFile (system roots when empty) and, when certFile
// and keyFile are set, presenting that client certificate (mTLS).
func WithTLSFiles(caFile, certFile, keyFile string) Option {
	return func(o *options) error {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if caFile != "" {
			pem, err := os.ReadFile(caFile)
			if err != nil {
				return fmt.Errorf("tls ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return fmt.Errorf("tls ca %s: no certificate found", caFile)
			}
			cfg.RootCAs = pool
		}
		if certFile != "" || keyFile != "" {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return fmt.Errorf("tls client certificate: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		o.tlsConfig = cfg
		return nil
	}
}

// WithDialOptions adds raw gRPC dial options (interceptors, a custom dialer, ...).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) error { o.dialOptions = append(o.dialOptions, opts...); return nil }
}

// Dial creates a client for addr (host:port). The connection is established lazily on
// the first call; ctx is reserved for future eager checks and must not be nil.
//
// Every call whose request has a request_id field is sent with one (a random one,
// generated once per logical call, when the request leaves it empty; the caller's
// message is not modified), and calls the API marks NO_SIDE_EFFECTS or IDEMPOTENT are
// repeated after UNAVAILABLE, DEADLINE_EXCEEDED or a retryable reason, with backoff,
// while their context lasts (see Retry, WithRetry and Retryable; Watch reconnects).
// Every agentplane SDK follows this policy (docs/clients.md, "Retries, request ids and
// reconnection").
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	if ctx == nil {
		return nil, errors.New("client: nil context")
	}
	o := options{maxRecvMsgBytes: 64 << 20, retry: Retry{}.withDefaults()}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	dial := []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(o.maxRecvMsgBytes))}
	if o.tlsConfig != nil {
		dial = append(dial, grpc.WithTransportCredentials(credentials.NewTLS(o.tlsConfig)))
	} else {
		dial = append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if o.token != "" {
		secure := o.tlsConfig != nil
		if !secure && !o.plaintextTokenOK && !isLoopback(addr) {
			return nil, fmt.Errorf("client: refusing to send a token in plaintext to %s; use TLS, or WithPlaintextToken if something in between encrypts", addr)
		}
		dial = append(dial, grpc.WithPerRPCCredentials(bearer{token: o.token, secure: secure}))
	}
	dial = append(dial, grpc.WithChainUnaryInterceptor(RetryInterceptor(o.retry)))
	dial = append(dial, o.dialOptions...)
	conn, err := grpc.NewClient(addr, dial...)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	c := New(conn)
	c.retry = o.retry
	return c, nil
}

// New wraps an existing connection (for example a bufconn one in tests). It adds no
// request ids or call retries: dial conn with
// grpc.WithChainUnaryInterceptor(RetryInterceptor(...)) for that. Watch still reconnects,
// with the default backoff.
func New(conn *grpc.ClientConn) *Client {
	return &Client{
		conn:         conn,
		Spec:         agentplanev1.NewSpecServiceClient(conn),
		Tasks:        agentplanev1.NewTaskServiceClient(conn),
		Hitl:         agentplanev1.NewHitlServiceClient(conn),
		Capabilities: agentplanev1.NewCapabilityServiceClient(conn),
		Runtime:      agentplanev1.NewRuntimeServiceClient(conn),
		Admin:        agentplanev1.NewAdminServiceClient(conn),
		Schedules:    agentplanev1.NewScheduleServiceClient(conn),
		Health:       healthpb.NewHealthClient(conn),
	}
}

// Conn returns the underlying connection.
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// bearer is a token sent as "authorization: Bearer <token>".
type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity is false only where Dial already decided plaintext is acceptable.
func (b bearer) RequireTransportSecurity() bool { return b.secure }

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
