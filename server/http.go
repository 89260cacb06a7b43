package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protojson"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/a2a"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/console"
	"github.com/agentplane/agentplane/server/hitl/channels"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/webhooks"
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
		runtime.WithOutgoingHeaderMatcher(outgoingHeader),
	)
	ctx := context.Background()
	for _, register := range []func(context.Context, *runtime.ServeMux, *grpc.ClientConn) error{
		agentplanev1.RegisterSpecServiceHandler,
		agentplanev1.RegisterTaskServiceHandler,
		agentplanev1.RegisterHitlServiceHandler,
		agentplanev1.RegisterCapabilityServiceHandler,
		agentplanev1.RegisterRuntimeServiceHandler,
		agentplanev1.RegisterAdminServiceHandler,
		agentplanev1.RegisterScheduleServiceHandler,
	} {
		if err := register(ctx, gw, conn); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
	}
	// Registered after the generated route, so it takes its place.
	if err := gw.HandlePath(http.MethodGet, "/v1/admin/backup", s.httpBackup(gw)); err != nil {
		return fmt.Errorf("gateway: %w", err)
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
	if !s.cfg.Console.Disabled {
		ui, err := s.newConsole()
		if err != nil {
			return err
		}
		root.Handle("/ui/", ui)
	}
	if err := s.registerChannels(root); err != nil {
		return err
	}
	if !s.cfg.A2A.Disabled {
		if s.a2a, err = s.newA2A(); err != nil {
			return err
		}
		face := limitBody(s.a2a, s.maxHTTPBody())
		root.Handle("/a2a/", face)
		root.Handle(a2a.WellKnownCard, face)
	}
	if !s.cfg.MCP.Disabled {
		if s.mcp, err = s.newMCP(); err != nil {
			return err
		}
		root.Handle(mcpPath, s.mcp)
	}
	root.Handle("/", limitBody(gw, s.maxHTTPBody()))
	s.http = &http.Server{Handler: s.newHTTPGuard().wrap(root), ReadHeaderTimeout: 10 * time.Second, TLSConfig: s.tls}
	if s.mcp != nil {
		s.http.RegisterOnShutdown(s.mcp.closeAll)
	}
	return nil
}

// registerChannels serves the approval channels (docs/hitl.md): the Slack app's
// interaction endpoint and the signed links' pages, when configured. They
// authenticate by Slack's signature and by the link's, not by a token, and decide
// through the same approvals service as ResolveInterrupt.
func (s *Server) registerChannels(root *http.ServeMux) error {
	h := s.cfg.HITL
	if !h.Slack.Enabled() && s.domain.links == nil {
		return nil
	}
	o := channels.Options{
		Resolver:      s.domain.approvals,
		Approvers:     h.Approvers,
		MayApprove:    func(tenant, principal string) bool { return s.guard.HasRole(tenant, principal, auth.RoleApprover) },
		SlackTeam:     h.Slack.TeamID,
		SlackHosts:    h.Slack.Hosts(),
		Client:        webhooks.NewClient(s.cfg.Notifications),
		AllowPrivate:  s.cfg.Notifications.AllowPrivateDestinations,
		RevokedBefore: h.Links.RevokedBeforeTime(),
		Revoked:       s.linkRevoked,
		ConsoleURL:    s.cfg.Notifications.ConsoleURL,
		Secure:        s.tls != nil,
		Logger:        s.log,
		Registerer:    s.metrics.registry,
	}
	if h.Slack.Enabled() {
		secret, err := h.Slack.Secret(s.cfg.BaseDir(), os.LookupEnv)
		if err != nil {
			return fmt.Errorf("hitl.slack: %w", err)
		}
		o.SlackSecret = secret
	}
	if s.domain.links != nil {
		o.LinkKey = s.domain.links.Key
	}
	ch, err := channels.New(o)
	if err != nil {
		return err
	}
	s.channels = ch
	ch.Register(root)
	return nil
}

// linkRevoked reports whether the tenant's approval link id was revoked
// (RevokeApprovalLink).
func (s *Server) linkRevoked(ctx context.Context, tenant, linkID string) (bool, error) {
	var rec *storagev1.LinkRevocationRecord
	err := s.domain.store.View(ctx, func(r store.Reader) (err error) {
		rec, err = r.GetLinkRevocation(tenant, linkID)
		return err
	})
	return rec != nil, err
}

// taskClient calls TaskService in process, through every interceptor (the MCP face
// uses it with its callers' credentials).
func (s *Server) taskClient() agentplanev1.TaskServiceClient {
	return agentplanev1.NewTaskServiceClient(s.gwConn)
}

// newConsole builds the web console (docs/console.md). It calls the API over the
// same in-process connection as the gateway, so every page runs the API's
// authentication, method table, tenant checks and limits.
func (s *Server) newConsole() (http.Handler, error) {
	keyFile := s.cfg.Console.SessionKeyFile
	if keyFile == "" {
		keyFile = filepath.Join(s.cfg.DataDir, "console-session.key")
	} else if !filepath.IsAbs(keyFile) {
		keyFile = filepath.Join(s.cfg.BaseDir(), keyFile)
	}
	key, err := console.LoadKey(keyFile)
	if err != nil {
		return nil, err
	}
	return console.New(console.Options{Conn: s.gwConn, MultiTenant: s.cfg.Auth.RequirePrincipal, Key: key,
		TTL: s.cfg.Console.SessionTTL.D(), Secure: s.tls != nil, Log: s.log,
		Live: console.LiveOptions{Interrupts: s.domain.tasks.WatchInterrupts, PerPrincipal: s.cfg.Limits.MaxWatchesPerPrincipal,
			Heartbeat: s.cfg.Limits.StreamKeepaliveInterval.D(), Registerer: s.metrics.registry, Stopping: s.stopping}})
}

// bodyMarshaler is protojson, except that a request body bound to a bytes field
// receives the raw body. That is how POST /v1/specs/validate takes the qar/v1 document
// itself as its body (the rule binds body to ValidateSpecRequest.document), so the
// document decoder sees duplicate keys, key order and positions that protojson would lose.
type bodyMarshaler struct {
	runtime.JSONPb
}

// StreamContentType implements runtime.StreamContentType: a server stream over HTTP
// (WatchTask, AwaitDecision) is newline-delimited JSON, one {"result": ...} object a
// line, and a last {"error": google.rpc.Status} line if the stream fails after its
// first message (the HTTP status, 200, is sent by then).
func (m *bodyMarshaler) StreamContentType(any) string { return "application/x-ndjson" }

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

// outgoingHeader forwards the gRPC response metadata the handlers set as
// Grpc-Metadata-* headers, but not the transport's own content-type
// (application/grpc), which says nothing true about an HTTP response.
func outgoingHeader(key string) (string, bool) {
	if key == "content-type" {
		return "", false
	}
	return runtime.MetadataHeaderPrefix + key, true
}

// httpBackup answers GET /v1/admin/backup with the backup itself, a bbolt file sent
// as application/octet-stream, rather than the gateway's stream of base64 chunks. It
// calls Backup in process like every gateway route, so authentication, roles and
// limits apply exactly as over gRPC. An error before the first byte is an ordinary
// error response (through httpError); one after it aborts the response, so that a
// client never mistakes a truncated copy for a whole one (Content-Length is the full
// size).
func (s *Server) httpBackup(gw *runtime.ServeMux) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, _ map[string]string) {
		_, m := runtime.MarshalerForRequest(gw, r)
		ctx, err := runtime.AnnotateContext(r.Context(), gw, r, agentplanev1.AdminService_Backup_FullMethodName,
			runtime.WithHTTPPathPattern("/v1/admin/backup"))
		if err != nil {
			runtime.HTTPError(ctx, gw, m, w, r, err)
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := agentplanev1.NewAdminServiceClient(s.gwConn).Backup(ctx, &agentplanev1.BackupRequest{})
		var first *agentplanev1.BackupResponse
		if err == nil {
			first, err = stream.Recv()
		}
		if err != nil && !errors.Is(err, io.EOF) {
			runtime.HTTPError(ctx, gw, m, w, r, err)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="agentplane-backup.db"`)
		if n := first.GetTotalBytes(); n > 0 {
			w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		}
		for chunk := first; chunk != nil; {
			if _, err := w.Write(chunk.GetChunk()); err != nil {
				return // the client went away
			}
			chunk, err = stream.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				s.log.Warn("http backup failed after it started; aborting the response", "err", err)
				panic(http.ErrAbortHandler)
			}
		}
	}
}
