package auth

import (
	"context"
	"fmt"
	"slices"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"google.golang.org/grpc/codes"
)

// Role is what a principal may do. Roles combine: a principal holding several may do
// what each allows.
type Role string

// The closed set of roles.
const (
	// RoleUser starts, continues, reads and cancels its tenant's tasks.
	RoleUser Role = "user"
	// RoleApprover reads its tenant's tasks and interrupts and resolves interrupts.
	RoleApprover Role = "approver"
	// RoleRuntime is a runtime: it leases tasks and reports what happens in them.
	RoleRuntime Role = "runtime"
	// RoleAdmin operates the deployment: backups, purges, stats, reflection.
	RoleAdmin Role = "admin"
)

var allRoles = []Role{RoleUser, RoleApprover, RoleRuntime, RoleAdmin}

// AllRoles returns the closed set of roles in canonical order.
func AllRoles() []Role { return slices.Clone(allRoles) }

// ParseRole returns the role spelled s.
func ParseRole(s string) (Role, error) {
	if r := Role(s); slices.Contains(allRoles, r) {
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q (want user, approver, runtime or admin)", s)
}

// Single-user identity: every caller is the owner, in the default tenant, with every role.
const (
	DefaultTenant = "default"
	OwnerSubject  = "owner"
)

// AllTenants as a principal's tenant lets a runtime or admin principal serve every
// tenant (a shared runtime fleet, a deployment operator). Principals holding user or
// approver act inside one tenant and may not have it (New refuses the config).
const AllTenants = "*"

// How a principal was established, in Principal.Via.
const (
	ViaOwner = "owner" // single-user mode
	ViaToken = "token" // bearer token
	ViaMTLS  = "mtls"  // verified client certificate
)

// Principal is an authenticated caller.
type Principal struct {
	// Subject is the token's name, the certificate's CN, or "owner".
	Subject string
	// Tenant is the tenant the caller acts in, or AllTenants.
	Tenant string
	// Roles, in canonical order, without duplicates.
	Roles []Role
	// Via says how the caller was authenticated (ViaOwner, ViaToken, ViaMTLS).
	Via string
}

// Owner is the single-user principal.
func Owner() Principal {
	return Principal{Subject: OwnerSubject, Tenant: DefaultTenant, Roles: AllRoles(), Via: ViaOwner}
}

// Has reports whether p holds r.
func (p Principal) Has(r Role) bool { return slices.Contains(p.Roles, r) }

// ServesTenant reports whether p may act on tenant's resources: its own tenant, or
// every tenant for an AllTenants principal.
func (p Principal) ServesTenant(tenant string) bool {
	return p.Tenant == tenant || p.Tenant == AllTenants
}

// Proto returns p as the API's Principal (Capabilities.principal).
func (p Principal) Proto() *agentplanev1.Principal {
	roles := make([]string, len(p.Roles))
	for i, r := range p.Roles {
		roles[i] = string(r)
	}
	return &agentplanev1.Principal{Subject: p.Subject, Tenant: p.Tenant, Roles: roles}
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p. The interceptors call it; tests may too.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal the interceptors attached. It is absent only for
// public methods (health) in multi-tenant mode, and outside a gRPC call.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// TenantOf returns the tenant the caller acts in: the key under which the domain
// stores and looks up everything the call touches. Domain lookups are always by
// (tenant, id), so another tenant's resource is not found exactly like an absent one,
// with the same code, reason, message and work: permission comes before existence
// because existence is only ever asked inside the caller's tenant. Without a
// principal (a bug: the method is public, or the interceptors were not installed) it
// fails closed with UNAUTHENTICATED rather than guessing a tenant.
func TenantOf(ctx context.Context) (string, error) {
	p, ok := FromContext(ctx)
	if !ok || p.Tenant == "" {
		return "", apierr.New(codes.Unauthenticated, apierr.ReasonUnauthenticated, "no authenticated principal")
	}
	return p.Tenant, nil
}
