package auth

import (
	"context"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/agentplane/agentplane/api/reasons"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/config"
)

// descriptorMethods lists every RPC of the agentplane.v1 package, from the
// generated file descriptors (a new service or RPC shows up here without anyone
// editing this test), plus the health and reflection services.
func descriptorMethods(t *testing.T) []string {
	t.Helper()
	_ = agentplanev1.File_agentplane_v1_task_service_proto // link the package's descriptors
	var files []protoreflect.FileDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage("agentplane.v1", func(fd protoreflect.FileDescriptor) bool {
		files = append(files, fd)
		return true
	})
	files = append(files, grpc_health_v1.File_grpc_health_v1_health_proto,
		reflectionv1.File_grpc_reflection_v1_reflection_proto, reflectionv1alpha.File_grpc_reflection_v1alpha_reflection_proto)
	var out []string
	services := 0
	for _, fd := range files {
		for i := 0; i < fd.Services().Len(); i++ {
			sd := fd.Services().Get(i)
			services++
			for j := 0; j < sd.Methods().Len(); j++ {
				out = append(out, "/"+string(sd.FullName())+"/"+string(sd.Methods().Get(j).Name()))
			}
		}
	}
	if services < 9 { // six agentplane.v1 services, health, two reflection versions
		t.Fatalf("found only %d services in the descriptors", services)
	}
	slices.Sort(out)
	return out
}

func TestMethodTableCoversEveryRPC(t *testing.T) {
	g, err := New(ptr(config.Default()))
	if err != nil {
		t.Fatal(err)
	}
	rpcs := descriptorMethods(t)
	for _, m := range rpcs {
		if _, ok := g.Lookup(m); !ok {
			t.Errorf("RPC %s has no entry in the method table (server/auth/methods.go)", m)
		}
	}
	for _, m := range g.Methods() {
		if !slices.Contains(rpcs, m) {
			t.Errorf("method table entry %s names no RPC", m)
		}
	}
}

// TestNoRPCReachableWithoutCredentials enumerates every method the real server
// serves in multi-tenant mode and calls it with no credentials and with a wrong
// token: every one except health is UNAUTHENTICATED and reaches no handler.
func TestNoRPCReachableWithoutCredentials(t *testing.T) {
	cfg, _ := multiTenantConfig(t)
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, g, nil, nil)
	registered := h.registered()
	var names []string
	for _, m := range registered {
		names = append(names, m.full)
	}
	for _, m := range descriptorMethods(t) {
		if !slices.Contains(names, m) {
			t.Fatalf("test server does not serve %s: register its service in newHarness", m)
		}
	}
	wrong, _, _ := NewToken()
	for _, m := range registered {
		for _, cred := range []struct{ name, token string }{{"none", ""}, {"wrong token", wrong}} {
			t.Run(m.full+"/"+cred.name, func(t *testing.T) {
				h.reset()
				code := h.call(t, m, cred.token)
				if strings.HasPrefix(m.full, "/grpc.health.v1.Health/") {
					if code == codes.Unauthenticated || code == codes.PermissionDenied || len(h.reached(m.full)) != 1 {
						t.Fatalf("health must be public, got %s", code)
					}
					if p := h.reached(m.full)[0]; p != nil {
						t.Fatalf("public call carried principal %+v", p)
					}
					return
				}
				if code != codes.Unauthenticated {
					t.Fatalf("got %s, want Unauthenticated", code)
				}
				if n := len(h.reached(m.full)); n != 0 {
					t.Fatalf("refused call reached the handler %d times", n)
				}
			})
		}
	}
}

// wantRoles is the access policy restated independently of methods.go: which roles
// may call a method ("public" for no credentials).
func wantRoles(full string) []string {
	svc, method, _ := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	switch svc {
	case "agentplane.v1.SpecService", "agentplane.v1.CapabilityService":
		return []string{"user", "approver", "runtime", "admin"}
	case "agentplane.v1.TaskService":
		if method == "StartTask" || method == "ContinueTask" || method == "CancelTask" {
			return []string{"user"}
		}
		return []string{"user", "approver"}
	case "agentplane.v1.HitlService":
		if method == "ResolveInterrupt" || method == "RevokeApprovalLink" {
			return []string{"approver"}
		}
		return []string{"user", "approver"}
	case "agentplane.v1.ScheduleService":
		if method == "GetSchedule" || method == "ListSchedules" {
			return []string{"user", "approver"}
		}
		return []string{"user"}
	case "agentplane.v1.RuntimeService":
		return []string{"runtime"}
	case "grpc.health.v1.Health":
		return []string{"public"}
	}
	return []string{"admin"} // AdminService, reflection, and anything unforeseen
}

func TestRoleMatrix(t *testing.T) {
	cfg, ts := multiTenantConfig(t)
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, g, nil, nil)
	callers := []struct {
		subject, token, tenant string
		roles                  []string
	}{
		{"alice", ts.user, "acme", []string{"user"}},
		{"bob", ts.approver, "acme", []string{"approver"}},
		{"fleet", ts.runtime, AllTenants, []string{"runtime"}},
		{"ops", ts.admin, AllTenants, []string{"admin"}},
		{"carol", ts.userApprover, "globex", []string{"user", "approver"}},
	}
	for _, m := range h.registered() {
		if m.full == unlistedMethod {
			continue
		}
		want := wantRoles(m.full)
		for _, c := range callers {
			t.Run(m.full+"/"+c.subject, func(t *testing.T) {
				h.reset()
				code := h.call(t, m, c.token)
				allowed := want[0] == "public" || slices.ContainsFunc(c.roles, func(r string) bool { return slices.Contains(want, r) })
				if !allowed {
					if code != codes.PermissionDenied || len(h.reached(m.full)) != 0 {
						t.Fatalf("got %s (reached %d), want PermissionDenied", code, len(h.reached(m.full)))
					}
					return
				}
				reached := h.reached(m.full)
				if code == codes.Unauthenticated || code == codes.PermissionDenied || len(reached) != 1 {
					t.Fatalf("got %s (reached %d), want the handler to run", code, len(reached))
				}
				if want[0] == "public" {
					return
				}
				if p := reached[0]; p == nil || p.Subject != c.subject || p.Tenant != c.tenant || p.Via != ViaToken {
					t.Fatalf("handler saw principal %+v, want %s in %s", p, c.subject, c.tenant)
				}
			})
		}
	}
}

func TestSingleUserEveryCallerIsOwner(t *testing.T) {
	cfg := config.Default()
	g, err := New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, g, nil, nil)
	junk, _, _ := NewToken()
	for _, m := range h.registered() {
		for _, token := range []string{"", junk} {
			h.reset()
			code := h.call(t, m, token)
			if m.full == unlistedMethod {
				if code != codes.PermissionDenied || len(h.reached(m.full)) != 0 {
					t.Errorf("%s: got %s, want PermissionDenied for a method missing from the table", m.full, code)
				}
				continue
			}
			reached := h.reached(m.full)
			if code == codes.Unauthenticated || code == codes.PermissionDenied || len(reached) != 1 {
				t.Errorf("%s: got %s, want the handler to run", m.full, code)
				continue
			}
			if p := reached[0]; p == nil || p.Subject != OwnerSubject || p.Tenant != DefaultTenant || len(p.Roles) != len(AllRoles()) {
				t.Errorf("%s: handler saw %+v, want the owner with every role", m.full, p)
			}
		}
	}
}

func TestUnlistedMethodDeniedInMultiTenantMode(t *testing.T) {
	cfg, ts := multiTenantConfig(t)
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, g, nil, nil)
	m := rpc{full: unlistedMethod}
	if code := h.call(t, m, ""); code != codes.Unauthenticated {
		t.Fatalf("no credentials: got %s, want Unauthenticated", code)
	}
	if code := h.call(t, m, ts.admin); code != codes.PermissionDenied {
		t.Fatalf("admin: got %s, want PermissionDenied", code)
	}
	if n := len(h.reached(unlistedMethod)); n != 0 {
		t.Fatalf("unlisted method reached its handler %d times", n)
	}
}

func TestAuthorizeErrorsCarryReasons(t *testing.T) {
	cfg, ts := multiTenantConfig(t)
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		md     []string
		method string
		code   codes.Code
		reason apierr.Reason
	}{
		{"no credentials", nil, agentplanev1.TaskService_GetTask_FullMethodName, codes.Unauthenticated, apierr.ReasonUnauthenticated},
		{"not bearer", []string{"authorization", "Basic " + ts.user}, agentplanev1.TaskService_GetTask_FullMethodName, codes.Unauthenticated, apierr.ReasonUnauthenticated},
		{"empty bearer", []string{"authorization", "Bearer "}, agentplanev1.TaskService_GetTask_FullMethodName, codes.Unauthenticated, apierr.ReasonUnauthenticated},
		{"two headers", []string{"authorization", "Bearer " + ts.user, "authorization", "Bearer " + ts.admin}, agentplanev1.TaskService_GetTask_FullMethodName, codes.Unauthenticated, apierr.ReasonUnauthenticated},
		{"role missing", []string{"authorization", "Bearer " + ts.user}, agentplanev1.HitlService_ResolveInterrupt_FullMethodName, codes.PermissionDenied, apierr.ReasonPermissionDenied},
		{"lower-case scheme", []string{"authorization", "bearer " + ts.user}, agentplanev1.TaskService_GetTask_FullMethodName, codes.OK, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := incoming(tt.md...)
			ctx, err := g.Authorize(ctx, tt.method)
			if tt.code == codes.OK {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if p, _ := FromContext(ctx); p.Subject != "alice" {
					t.Fatalf("principal %+v", p)
				}
				return
			}
			info := reasons.Info(err)
			if statusCode(err) != tt.code || info == nil || reasons.Parse(info.GetReason()) != tt.reason || info.GetDomain() != apierr.Domain {
				t.Fatalf("got %v (info %v), want %s %s", err, info, tt.code, tt.reason)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	good := config.Token{Name: "a", SHA256: HashToken("x"), Tenant: "acme", Roles: []string{"user"}}
	tests := []struct {
		name   string
		mutate func(*config.Config)
		want   string
	}{
		{"unknown role", func(c *config.Config) {
			c.Auth.Tokens = []config.Token{{Name: "a", SHA256: good.SHA256, Tenant: "t", Roles: []string{"root"}}}
		}, `unknown role "root"`},
		{"no roles", func(c *config.Config) { c.Auth.Tokens = []config.Token{{Name: "a", SHA256: good.SHA256, Tenant: "t"}} }, "at least one role"},
		{"no tenant", func(c *config.Config) {
			c.Auth.Tokens = []config.Token{{Name: "a", SHA256: good.SHA256, Roles: []string{"user"}}}
		}, "tenant is required"},
		{"bad hex", func(c *config.Config) {
			c.Auth.Tokens = []config.Token{{Name: "a", SHA256: strings.Repeat("z", 64), Tenant: "t", Roles: []string{"user"}}}
		}, "64 hex digits"},
		{"duplicate hash", func(c *config.Config) { b := good; b.Name = "b"; c.Auth.Tokens = []config.Token{good, b} }, "same sha256 as auth.tokens[0]"},
		{"duplicate name", func(c *config.Config) { b := good; b.SHA256 = HashToken("y"); c.Auth.Tokens = []config.Token{good, b} }, "name already used"},
		{"user in all tenants", func(c *config.Config) { b := good; b.Tenant = AllTenants; c.Auth.Tokens = []config.Token{b} }, "users and approvers act in one tenant"},
		{"certs without CA", func(c *config.Config) {
			c.Auth.ClientCerts = []config.ClientCert{{CommonName: "rt", Tenant: AllTenants, Roles: []string{"runtime"}}}
		}, "tls.client_ca_file"},
		{"duplicate CN", func(c *config.Config) {
			c.TLS.ClientCAFile = "ca.pem"
			cc := config.ClientCert{CommonName: "rt", Tenant: AllTenants, Roles: []string{"runtime"}}
			c.Auth.ClientCerts = []config.ClientCert{cc, cc}
		}, "mapped twice"},
		{"multi-tenant with nobody", func(c *config.Config) { c.Auth.RequirePrincipal = true }, "no caller could authenticate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			tt.mutate(&cfg)
			_, err := New(&cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestNewToken(t *testing.T) {
	a, ha, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	b, hb, _ := NewToken()
	if !strings.HasPrefix(a, TokenPrefix) || len(a) != len(TokenPrefix)+43 || a == b || ha == hb {
		t.Fatalf("tokens %q %q", a, b)
	}
	if ha != HashToken(a) || len(ha) != 64 {
		t.Fatalf("hash %q does not match HashToken", ha)
	}
	cfg := config.Default()
	cfg.Auth.Tokens = []config.Token{{Name: "n", SHA256: ha, Tenant: "t", Roles: []string{"user"}}}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("a NewToken hash must satisfy config.Validate: %v", err)
	}
}

func TestTenantOf(t *testing.T) {
	if _, err := TenantOf(context.Background()); !apierr.HasReason(err, apierr.ReasonUnauthenticated) {
		t.Fatalf("no principal: got %v, want AUTH_UNAUTHENTICATED", err)
	}
	ctx := WithPrincipal(context.Background(), Principal{Subject: "a", Tenant: "acme", Roles: []Role{RoleUser}})
	if tenant, err := TenantOf(ctx); err != nil || tenant != "acme" {
		t.Fatalf("TenantOf = %q, %v", tenant, err)
	}
	fleet := Principal{Tenant: AllTenants}
	if !fleet.ServesTenant("acme") || (Principal{Tenant: "acme"}).ServesTenant("globex") {
		t.Fatal("ServesTenant")
	}
	if p := Owner().Proto(); p.GetTenant() != DefaultTenant || len(p.GetRoles()) != 4 {
		t.Fatalf("owner proto %v", p)
	}
}

func TestParseRole(t *testing.T) {
	for _, r := range AllRoles() {
		if got, err := ParseRole(string(r)); err != nil || got != r {
			t.Fatalf("ParseRole(%q) = %q, %v", r, got, err)
		}
	}
	if _, err := ParseRole("Admin"); err == nil {
		t.Fatal("roles are case-sensitive")
	}
}

func ptr[T any](v T) *T { return &v }
