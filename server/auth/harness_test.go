package auth

import (
	"context"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/emptypb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
)

// unlistedMethod is served by the test server but deliberately absent from the table.
const unlistedMethod = "/agentplane.test.Unlisted/Do"

// harness is a real gRPC server on an in-memory listener: every agentplane.v1 service
// as an Unimplemented stub, the real health and reflection services, and one service
// the method table does not list, behind the guard's interceptors. A recorder inside
// the guard notes which principal each call that got through carried.
type harness struct {
	srv  *grpc.Server
	conn *grpc.ClientConn
	mu   sync.Mutex
	seen map[string][]*Principal // full method -> principals that reached the handler (nil: none attached)
}

func newHarness(t *testing.T, g *Guard, serverCreds, clientCreds credentials.TransportCredentials) *harness {
	t.Helper()
	h := &harness{seen: map[string][]*Principal{}}
	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(g.UnaryInterceptor, func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			h.record(ctx, info.FullMethod)
			return handler(ctx, req)
		}),
		grpc.ChainStreamInterceptor(g.StreamInterceptor, func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			h.record(ss.Context(), info.FullMethod)
			return handler(srv, ss)
		}),
	}
	if serverCreds != nil {
		opts = append(opts, grpc.Creds(serverCreds))
	}
	h.srv = grpc.NewServer(opts...)
	agentplanev1.RegisterSpecServiceServer(h.srv, agentplanev1.UnimplementedSpecServiceServer{})
	agentplanev1.RegisterTaskServiceServer(h.srv, agentplanev1.UnimplementedTaskServiceServer{})
	agentplanev1.RegisterHitlServiceServer(h.srv, agentplanev1.UnimplementedHitlServiceServer{})
	agentplanev1.RegisterCapabilityServiceServer(h.srv, agentplanev1.UnimplementedCapabilityServiceServer{})
	agentplanev1.RegisterRuntimeServiceServer(h.srv, agentplanev1.UnimplementedRuntimeServiceServer{})
	agentplanev1.RegisterAdminServiceServer(h.srv, agentplanev1.UnimplementedAdminServiceServer{})
	agentplanev1.RegisterScheduleServiceServer(h.srv, agentplanev1.UnimplementedScheduleServiceServer{})
	grpc_health_v1.RegisterHealthServer(h.srv, health.NewServer())
	reflection.Register(h.srv)
	h.srv.RegisterService(&unlistedDesc, nil)

	lis := bufconn.Listen(1 << 20)
	go func() { _ = h.srv.Serve(lis) }()
	t.Cleanup(h.srv.Stop)
	if clientCreds == nil {
		clientCreds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(clientCreds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	h.conn = conn
	return h
}

var unlistedDesc = grpc.ServiceDesc{
	ServiceName: "agentplane.test.Unlisted",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Do",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			handler := func(context.Context, any) (any, error) { return &emptypb.Empty{}, nil }
			if interceptor == nil {
				return handler(ctx, in)
			}
			return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: unlistedMethod}, handler)
		},
	}},
}

func (h *harness) record(ctx context.Context, method string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var got *Principal
	if p, ok := FromContext(ctx); ok {
		got = &p
	}
	h.seen[method] = append(h.seen[method], got)
}

// reached returns the principals of the calls to method that reached a handler.
func (h *harness) reached(method string) []*Principal {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[method]
}

func (h *harness) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = map[string][]*Principal{}
}

// rpc is one method of a registered service, with its streaming shape.
type rpc struct {
	full                       string
	clientStream, serverStream bool
}

// registered lists every method the server serves, from the server itself.
func (h *harness) registered() []rpc {
	var out []rpc
	for svc, info := range h.srv.GetServiceInfo() {
		for _, m := range info.Methods {
			out = append(out, rpc{full: "/" + svc + "/" + m.Name, clientStream: m.IsClientStream, serverStream: m.IsServerStream})
		}
	}
	return out
}

// call invokes m with an empty request and returns the status code of the first
// answer: a refusal by the interceptor, or whatever the stub handler said.
func (h *harness) call(t *testing.T, m rpc, token string) codes.Code {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	if !m.clientStream && !m.serverStream {
		return status.Code(h.conn.Invoke(ctx, m.full, &emptypb.Empty{}, &emptypb.Empty{}))
	}
	cs, err := h.conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: m.clientStream, ServerStreams: m.serverStream}, m.full)
	if err != nil {
		return status.Code(err)
	}
	if err := cs.SendMsg(&emptypb.Empty{}); err != nil {
		return status.Code(cs.RecvMsg(&emptypb.Empty{}))
	}
	_ = cs.CloseSend()
	return status.Code(cs.RecvMsg(&emptypb.Empty{}))
}

// tokens for the multi-tenant configuration, one principal per role.
type tokenSet struct {
	user, approver, runtime, admin, userApprover string
}

func multiTenantConfig(t *testing.T) (*config.Config, tokenSet) {
	t.Helper()
	cfg := config.Default()
	cfg.Auth.RequirePrincipal = true
	var ts tokenSet
	add := func(dst *string, name, tenant string, roles ...string) {
		tok, hash, err := NewToken()
		if err != nil {
			t.Fatal(err)
		}
		*dst = tok
		cfg.Auth.Tokens = append(cfg.Auth.Tokens, config.Token{Name: name, SHA256: hash, Tenant: tenant, Roles: roles})
	}
	add(&ts.user, "alice", "acme", "user")
	add(&ts.approver, "bob", "acme", "approver")
	add(&ts.runtime, "fleet", AllTenants, "runtime")
	add(&ts.admin, "ops", AllTenants, "admin")
	add(&ts.userApprover, "carol", "globex", "user", "approver")
	return &cfg, ts
}
