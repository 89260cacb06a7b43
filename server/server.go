package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/test/bufconn"

	"github.com/agentplane/agentplane/gates"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/a2a"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/hitl/channels"
	"github.com/agentplane/agentplane/server/tracing"
	"github.com/agentplane/agentplane/server/version"
)

// ShutdownTimeout bounds how long Serve waits for in-flight calls and streams to end
// after its context is canceled, before it closes the remaining connections.
const ShutdownTimeout = 10 * time.Second

// Server is one control-plane process.
type Server struct {
	cfg     config.Config
	log     *slog.Logger
	metrics *metrics
	start   time.Time
	// tracing exports a server span per call when an OTLP endpoint is configured.
	tracing *tracing.Provider

	domain *domain
	guard  *auth.Guard
	gates  *gates.Policy
	limits *principalLimits

	grpc   *grpc.Server
	health *health.Server
	// healthNames are the names health reports on: every service, and "".
	healthNames []string
	grpcLis     net.Listener
	// gwGRPC serves the HTTP gateway over inproc, an in-memory listener: the same
	// services and interceptors as grpc, without transport security (nothing outside the
	// process can reach it), and with the HTTPS caller's verified client certificate
	// handed over by the gateway (see tlsHandoff).
	gwGRPC  *grpc.Server
	inproc  *bufconn.Listener
	gwConn  *grpc.ClientConn
	http    *http.Server
	httpLis net.Listener
	// channels serves the Slack and link approval channels (nil when off).
	channels *channels.Handler
	// mcp is the MCP face at /mcp, nil when off.
	mcp *mcpFace
	// a2a is the A2A face at /a2a/, nil when off.
	a2a *a2a.Handler
	// tls is the server TLS configuration, nil for plaintext.
	tls      *tls.Config
	tls2peer tlsHandoff

	// codec decodes requests for every gRPC server of this process (see readErrors), and
	// encodes responses (sending pre-encoded ones as they are).
	codec requestCodec

	// stopping is canceled when shutdown begins; long-lived streams end on it
	// (untilShutdown, and the A2A and console faces' streams).
	stopping context.Context
	stop     context.CancelFunc
}

// Option configures New.
type Option func(*Server)

// WithLogger sets the logger; the default writes to stderr per cfg.Log.
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// New validates cfg, opens the store (failing fast when another process holds it),
// binds the listeners and registers every service. Nothing is served until Serve.
func New(cfg config.Config, opts ...Option) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, metrics: newMetrics(), start: time.Now(), codec: newRequestCodec()}
	s.stopping, s.stop = context.WithCancel(context.Background())
	for _, o := range opts {
		o(s)
	}
	if s.log == nil {
		s.log = NewLogger(os.Stderr, cfg.Log)
	}
	defer func() {
		if err != nil {
			s.closeAll()
		}
	}()

	if s.guard, err = auth.New(&s.cfg); err != nil {
		return nil, err
	}
	if s.gates, err = gates.NewPolicy(s.cfg.GatesConfig()); err != nil {
		return nil, err
	}
	s.limits = newPrincipalLimits(s.cfg, s.metrics.registry)
	if s.tracing, err = tracing.New(context.Background(), s.cfg.Tracing, "agentplane-controlplane", os.LookupEnv); err != nil {
		return nil, err
	}
	if s.tracing.Enabled() {
		s.log.Info("tracing on", "otlp_endpoint", s.tracing.Endpoint())
	}
	if err = s.openDomain(); err != nil {
		return nil, err
	}

	serverOpts := s.serverOptions(nil, nil)
	if cfg.TLS.CertFile != "" {
		if s.tls, err = auth.ServerTLSConfig(cfg.TLS); err != nil {
			return nil, err
		}
		serverOpts = append(serverOpts, grpc.Creds(credentials.NewTLS(s.tls)))
	}
	s.grpc = grpc.NewServer(serverOpts...)
	s.registerServices(s.grpc)

	if s.grpcLis, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
		return nil, fmt.Errorf("grpc listen on %s: %w", cfg.GRPCAddr, err)
	}
	if cfg.HTTPAddr != "off" {
		if err = s.buildHTTP(); err != nil {
			return nil, err
		}
		if s.httpLis, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			return nil, fmt.Errorf("http listen on %s: %w", cfg.HTTPAddr, err)
		}
	}
	return s, nil
}

// serverOptions are the options every gRPC server of this process shares: error
// mapping, metrics and panic recovery wrapping authorization and the per-principal
// limits (so refusals are counted and logged like any other answer), with extra
// interceptors placed just before authorization, and the message size limit.
func (s *Server) serverOptions(unary grpc.UnaryServerInterceptor, stream grpc.StreamServerInterceptor) []grpc.ServerOption {
	unaries := []grpc.UnaryServerInterceptor{s.unaryInterceptor}
	streams := []grpc.StreamServerInterceptor{s.streamInterceptor}
	if s.tracing.Enabled() {
		// Outermost, so a span sees the status the client sees, refusals included.
		unaries = append([]grpc.UnaryServerInterceptor{tracing.UnaryServerInterceptor(s.tracing)}, unaries...)
		streams = append([]grpc.StreamServerInterceptor{tracing.StreamServerInterceptor(s.tracing)}, streams...)
	}
	if unary != nil {
		unaries = append(unaries, unary)
	}
	if stream != nil {
		streams = append(streams, stream)
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(append(unaries, s.guard.UnaryInterceptor, s.limits.unary)...),
		grpc.ChainStreamInterceptor(append(streams, s.guard.StreamInterceptor, s.limits.stream)...),
		// Over this size grpc-go answers RESOURCE_EXHAUSTED itself, before the codec
		// and the interceptors (docs/errors.md).
		grpc.MaxRecvMsgSize(int(s.cfg.Limits.MaxRequestBytes())),
		// Clients may ping as often as every 10 s, with or without a call open, as
		// the gRPC libraries of other languages commonly do (the default policy, 5
		// min, answers them with GOAWAY too_many_pings). The server pings a
		// connection idle for a minute and drops it if the ping goes unanswered, so
		// dead peers do not hold streams open.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: keepaliveTime, Timeout: keepaliveTimeout}),
		grpc.ForceServerCodecV2(s.codec),
		// Calls run on a pool of long-lived goroutines instead of a new goroutine
		// each: a handler that reaches the store needs a deep stack, and growing a
		// fresh goroutine's stack to it on every call showed in CPU profiles at about
		// a fifth of the store transaction's own cost. A call that finds every worker
		// busy gets a new goroutine.
		grpc.NumStreamWorkers(streamWorkers),
	}
}

// Transport keepalive (see serverOptions).
const (
	keepaliveMinTime = 10 * time.Second
	keepaliveTime    = time.Minute
	keepaliveTimeout = 20 * time.Second
)

// streamWorkers is the size of the gRPC handler pool: enough for the concurrent
// callers of a busy deployment (a call waiting on a commit holds its worker). A
// long-lived stream (WatchTask, AwaitDecision) holds one for its whole life, and past
// as many streams as workers, calls run on fresh goroutines. That is cheaper than a
// pool sized for the streams: gRPC hands a call to the worker idle longest, so every
// idle worker is used in turn, and each garbage collection shrinks idle stacks (with
// 1,000 open watches, stack growth was 5 to 7% of StartTask's CPU at 64 callers
// against 2 to 3% without; with 1,152 workers, 2 to 4% and 5 to 8%). Handing calls to
// a pool of our own from an interceptor was no better: gRPC's fresh goroutine grows
// its stack decoding the request before any interceptor runs.
const streamWorkers = 128

// registerServices registers every service on server (the public one, and the
// in-process one behind the HTTP gateway) through readErrors.
func (s *Server) registerServices(server *grpc.Server) {
	g := readErrors{server, s.codec.notes}
	agentplanev1.RegisterSpecServiceServer(g, &specService{s: s})
	agentplanev1.RegisterTaskServiceServer(g, &taskService{s: s})
	agentplanev1.RegisterHitlServiceServer(g, &hitlService{s: s})
	agentplanev1.RegisterCapabilityServiceServer(g, &capabilityService{s: s})
	agentplanev1.RegisterRuntimeServiceServer(g, &runtimeService{s: s})
	agentplanev1.RegisterAdminServiceServer(g, &adminService{s: s})
	agentplanev1.RegisterScheduleServiceServer(g, &scheduleService{s: s})

	if s.health == nil {
		s.health = health.NewServer()
		for name := range server.GetServiceInfo() {
			s.healthNames = append(s.healthNames, name)
		}
		s.healthNames = append(s.healthNames, "")
		s.storeHealth(s.domain.store.Health())
	}
	healthpb.RegisterHealthServer(g, s.health)
	reflection.Register(g)
}

func (s *Server) setHealth(st healthpb.HealthCheckResponse_ServingStatus) {
	for _, name := range s.healthNames {
		s.health.SetServingStatus(name, st)
	}
}

// storeHealth is the store's OnHealth: while the store refuses writes (a failed write
// or sync: disk full, I/O error) every service reports NOT_SERVING, and /healthz
// answers 503, until the store has recovered. After shutdown has begun the health
// server ignores it.
func (s *Server) storeHealth(failure error) {
	if s.health == nil {
		return
	}
	if failure != nil {
		s.setHealth(healthpb.HealthCheckResponse_NOT_SERVING)
		return
	}
	s.setHealth(healthpb.HealthCheckResponse_SERVING)
}

// GRPCAddr is the address the gRPC server listens on (useful with port 0).
func (s *Server) GRPCAddr() string { return s.grpcLis.Addr().String() }

// HTTPAddr is the address of the HTTP/JSON server, or "" when it is off.
func (s *Server) HTTPAddr() string {
	if s.httpLis == nil {
		return ""
	}
	return s.httpLis.Addr().String()
}

// Serve serves until ctx ends or a listener fails, then shuts down gracefully and
// closes the store. It returns nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context) error {
	s.domain.start()
	errc := make(chan error, 3)
	go func() { errc <- s.grpc.Serve(s.grpcLis) }()
	if s.inproc != nil {
		go func() { errc <- s.gwGRPC.Serve(s.inproc) }()
	}
	if s.mcp != nil {
		go s.mcp.reap(ctx)
	}
	if s.http != nil {
		go func() {
			serve := func() error { return s.http.Serve(s.httpLis) }
			if s.tls != nil {
				serve = func() error { return s.http.ServeTLS(s.httpLis, "", "") }
			}
			if err := serve(); !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	s.log.Info("agentplane control plane serving",
		"version", version.String(), "grpc", s.GRPCAddr(), "http", s.HTTPAddr(),
		"store", s.StoreLocation(), "multi_tenant", s.cfg.Auth.RequirePrincipal)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
		s.log.Error("listener failed; shutting down", "err", serveErr)
	}
	s.shutdown()
	return serveErr
}

// shutdown stops accepting, ends long-lived streams, drains in-flight calls (bounded
// by ShutdownTimeout) and closes the store.
func (s *Server) shutdown() {
	s.log.Info("shutting down")
	s.health.Shutdown()
	s.stop()
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if s.http != nil {
		if err := s.http.Shutdown(ctx); err != nil {
			s.log.Warn("http shutdown", "err", err)
		}
	}
	for _, g := range []*grpc.Server{s.grpc, s.gwGRPC} {
		if g == nil {
			continue
		}
		done := make(chan struct{})
		go func() { g.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			s.log.Warn("drain timed out; closing remaining connections")
			g.Stop()
			<-done
		}
	}
	s.closeAll()
	s.log.Info("stopped")
}

// closeAll releases whatever New acquired; safe on a partly built server.
func (s *Server) closeAll() {
	if s.gwConn != nil {
		_ = s.gwConn.Close()
	}
	for _, l := range []net.Listener{s.grpcLis, s.httpLis} {
		if l != nil {
			_ = l.Close()
		}
	}
	if s.channels != nil {
		s.channels.Close()
	}
	if s.domain != nil {
		if err := s.domain.close(); err != nil {
			s.log.Error("closing store", "err", err)
		}
		s.domain = nil
	}
	if s.tracing.Enabled() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.tracing.Shutdown(ctx); err != nil {
			s.log.Warn("flushing spans", "err", err)
		}
		cancel()
		s.tracing = nil
	}
}

// dialInProcess connects to the in-memory listener.
func (s *Server) dialInProcess() (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///agentplane-inprocess",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return s.inproc.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)),
	)
}

// ServiceInfo lists the registered gRPC services and their methods.
func (s *Server) ServiceInfo() map[string]grpc.ServiceInfo { return s.grpc.GetServiceInfo() }

// untilShutdown derives a context that also ends when shutdown begins, for long-lived
// streams that would otherwise hold the graceful stop until its timeout. It costs no
// goroutine (an idle watch would otherwise hold two).
func (s *Server) untilShutdown(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(s.stopping, cancel)
	return ctx, func() { unhook(); cancel() }
}

// shutdownError turns the end of a stream caused by shutdown into UNAVAILABLE, which
// clients treat as "reconnect".
func (s *Server) shutdownError(ctx context.Context, err error) error {
	if s.stopping.Err() != nil && err != nil && ctx.Err() != nil {
		return apierr.New(codes.Unavailable, apierr.ReasonUnavailable, "the server is shutting down; reconnect and resume from your last sequence")
	}
	return err
}
