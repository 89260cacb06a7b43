package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protojson"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// buildHTTP assembles the HTTP/JSON front: grpc-gateway for the API (reaching the gRPC
// server in process, so interceptors apply exactly as for gRPC), /metrics and /healthz.
func (s *Server) buildHTTP() error {
	s.inproc = bufconn.Listen(1 << 20)
	s.gwGRPC = grpc.NewServer(s.serverOptions(s.tls2peer.unary, s.tls2peer.stream)...)
	s.registerServices(s.gwGRPC)
	conn, err := s.dialInProcess()
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	s.gwConn = conn

	gw := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &bodyMarshaler{JSONPb: runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{},
			UnmarshalOptions: protojson.UnmarshalOptions{},
		}}),
		runtime.WithHealthzEndpoint(healthpb.NewHealthClient(conn)),
		runtime.WithMetadata(s.tls2peer.annotate),
		runtime.WithIncomingHeaderMatcher(traceHeaderMatcher),
		runtime.WithErrorHandler(s.httpError),
		runtime.WithRoutingErrorHandler(s.httpRoutingError),
	)
	ctx := context.Background()
	for _, register := range []func(context.Context, *runtime.ServeMux, *grpc.ClientConn) error{
		agentplanev1.RegisterSpecServiceHandler,
		agentplanev1.RegisterTaskServiceHandler,
		agentplanev1.RegisterHitlServiceHandler,
		agentplanev1.RegisterCapabilityServiceHandler,
		agentplanev1.RegisterRuntimeServiceHandler,
		agentplanev1.RegisterAdminServiceHandler,
	} {
		if err := register(ctx, gw, conn); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
	}

	root := http.NewServeMux()
	root.Handle("/metrics", s.metricsAuth(promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{})))
	if s.cfg.Debug.Pprof {
		root.Handle("/debug/pprof/", s.metricsAuth(http.HandlerFunc(pprof.Index)))
		root.Handle("/debug/pprof/cmdline", s.metricsAuth(http.HandlerFunc(pprof.Cmdline)))
		root.Handle("/debug/pprof/profile", s.metricsAuth(http.HandlerFunc(pprof.Profile)))
		root.Handle("/debug/pprof/symbol", s.metricsAuth(http.HandlerFunc(pprof.Symbol)))
		root.Handle("/debug/pprof/trace", s.metricsAuth(http.HandlerFunc(pprof.Trace)))
	}
	root.Handle("/", limitBody(gw, s.maxHTTPBody()))
	s.http = &http.Server{Handler: root, ReadHeaderTimeout: 10 * time.Second, TLSConfig: s.tls}
	return nil
}

// bodyMarshaler is protojson, except that a request body bound to a bytes field
// receives the raw body. That is how POST /v1/specs/validate takes the qar/v1 document
// itself as its body (the rule binds body to ValidateSpecRequest.document), so the
// document decoder sees duplicate keys, key order and positions that protojson would lose.
type bodyMarshaler struct {
	runtime.JSONPb
}

// NewDecoder implements runtime.Marshaler.
func (m *bodyMarshaler) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v any) error {
		if raw, ok := v.(*[]byte); ok {
			data, err := io.ReadAll(r)
			*raw = data
			return err
		}
		return m.JSONPb.NewDecoder(r).Decode(v)
	})
}
