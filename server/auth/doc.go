// Package auth is agentplane's identity and access control: who a caller is
// (Principal), how that is established (bearer tokens stored as SHA-256 hashes,
// verified mTLS client certificates, or the owner in single-user mode), and what each
// RPC requires (the method table), enforced by one unary and one stream interceptor.
//
// Guarantees:
//
//   - Every RPC of every agentplane.v1 service, and the health and reflection
//     services, has an entry in the method table; a method without one is denied in
//     every mode. Tests derive the RPC list from the generated descriptors and the
//     registered services, not from a hand-kept list.
//   - Multi-tenant (auth.require_principal): no RPC but health is reachable without
//     valid credentials (UNAUTHENTICATED, reason AUTH_UNAUTHENTICATED); a caller
//     without a role the method needs gets PERMISSION_DENIED (AUTH_PERMISSION_DENIED).
//   - Single-user: every caller is the owner, tenant "default", holding every role.
//   - Token lookup hashes the presented token and compares it with every configured
//     hash in constant time; tokens themselves are never stored.
//   - No globals: a Guard is built from config and is immutable.
//
// # Tenancy: permission before existence
//
// Handlers scope every read and write with TenantOf(ctx), and the domain packages key
// everything by tenant first, so a lookup of another tenant's task, interrupt, event
// or verdict is the same miss as an absent one: NOT_FOUND, same reason, same message.
// Never look a resource up globally and then compare its tenant: that answers
// "exists, not yours" in timing and in code paths. Runtime-scope calls act on tasks of
// the tenants the runtime serves (Principal.ServesTenant; AllTenants for a shared
// fleet); admin-scope calls act on the deployment.
package auth
