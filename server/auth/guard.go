package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/store/schema"
)

// Guard authenticates callers and enforces the method table. It holds no mutable
// state and is safe for concurrent use.
type Guard struct {
	multiTenant bool
	tokens      []tokenEntry
	certs       map[string]Principal
	methods     map[string]Rule
}

type tokenEntry struct {
	hash [sha256.Size]byte
	p    Principal
}

// New builds the guard from the configuration, refusing what cannot work: unknown
// roles, principals without roles or tenant, malformed or duplicate token hashes,
// duplicate certificate names, AllTenants on a user or approver, and a multi-tenant
// deployment in which nobody could authenticate. The error names every problem.
func New(cfg *config.Config) (*Guard, error) {
	g := &Guard{multiTenant: cfg.Auth.RequirePrincipal, certs: map[string]Principal{}, methods: methodTable()}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	seenName := map[string]int{}
	for i, t := range cfg.Auth.Tokens {
		path := fmt.Sprintf("auth.tokens[%d] (%q)", i, t.Name)
		p, err := principal(t.Name, t.Tenant, t.Roles, ViaToken)
		if err != nil {
			bad("%s: %v", path, err)
		}
		raw, err := hex.DecodeString(t.SHA256)
		if err != nil || len(raw) != sha256.Size {
			bad("%s: sha256 must be 64 hex digits (make a token with: controlplane token new)", path)
			continue
		}
		if j, dup := seenName[t.Name]; dup {
			bad("%s: name already used by auth.tokens[%d]", path, j)
		}
		seenName[t.Name] = i
		e := tokenEntry{p: p}
		copy(e.hash[:], raw)
		for j, o := range g.tokens {
			if o.hash == e.hash {
				bad("%s: same sha256 as auth.tokens[%d]", path, j)
			}
		}
		g.tokens = append(g.tokens, e)
	}
	for i, c := range cfg.Auth.ClientCerts {
		path := fmt.Sprintf("auth.client_certs[%d] (%q)", i, c.CommonName)
		p, err := principal(c.CommonName, c.Tenant, c.Roles, ViaMTLS)
		if err != nil {
			bad("%s: %v", path, err)
		}
		if _, dup := g.certs[c.CommonName]; dup {
			bad("%s: common_name mapped twice", path)
		}
		g.certs[c.CommonName] = p
	}
	if len(cfg.Auth.ClientCerts) > 0 && cfg.TLS.ClientCAFile == "" {
		bad("auth.client_certs need tls.client_ca_file: without it no client certificate is verified")
	}
	if g.multiTenant && len(cfg.Auth.Tokens)+len(cfg.Auth.ClientCerts) == 0 {
		bad("auth.require_principal with no auth.tokens or auth.client_certs: no caller could authenticate")
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return g, nil
}

// principal checks and builds one configured principal.
func principal(subject, tenant string, roles []string, via string) (Principal, error) {
	p := Principal{Subject: subject, Tenant: tenant, Via: via}
	var errs []error
	if strings.TrimSpace(subject) == "" {
		errs = append(errs, errors.New("empty name"))
	}
	if strings.TrimSpace(tenant) == "" {
		errs = append(errs, errors.New("tenant is required"))
	}
	if len(tenant) > schema.MaxComponent {
		errs = append(errs, fmt.Errorf("tenant id of %d bytes: at most %d (every stored key starts with it)", len(tenant), schema.MaxComponent))
	}
	for _, s := range roles {
		r, err := ParseRole(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !slices.Contains(p.Roles, r) {
			p.Roles = append(p.Roles, r)
		}
	}
	if len(roles) == 0 {
		errs = append(errs, errors.New("at least one role is required"))
	}
	if tenant == AllTenants && (p.Has(RoleUser) || p.Has(RoleApprover)) {
		errs = append(errs, fmt.Errorf("tenant %q is for runtime and admin principals; users and approvers act in one tenant", AllTenants))
	}
	slices.SortFunc(p.Roles, func(a, b Role) int { return slices.Index(allRoles, a) - slices.Index(allRoles, b) })
	return p, errors.Join(errs...)
}

// MultiTenant reports whether every call must be authenticated.
func (g *Guard) MultiTenant() bool { return g.multiTenant }

// Authenticate establishes the caller of ctx (an incoming gRPC context). In
// single-user mode it is always the owner. In multi-tenant mode a bearer token in the
// authorization metadata wins; without one, a verified client certificate's subject
// CN is looked up. A presented credential that does not match is refused rather than
// passed over for another, so a typo never silently changes who the caller is.
func (g *Guard) Authenticate(ctx context.Context) (Principal, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	var state *tls.ConnectionState
	if pr, ok := peer.FromContext(ctx); ok && pr.AuthInfo != nil {
		if info, ok := pr.AuthInfo.(credentials.TLSInfo); ok {
			state = &info.State
		}
	}
	return g.authenticate(md.Get("authorization"), state)
}

// AuthenticateHTTP authenticates a plain HTTP request (one that does not go through
// the gRPC gateway, such as /metrics) exactly as Authenticate does a call.
func (g *Guard) AuthenticateHTTP(r *http.Request) (Principal, error) {
	return g.authenticate(r.Header.Values("Authorization"), r.TLS)
}

// authenticate is the one decision behind Authenticate and AuthenticateHTTP, from the
// authorization values presented and the connection's TLS state (nil when plaintext).
func (g *Guard) authenticate(authorization []string, state *tls.ConnectionState) (Principal, error) {
	if !g.multiTenant {
		return Owner(), nil
	}
	switch len(authorization) {
	case 0:
	case 1:
		return g.bearer(authorization[0])
	default:
		return Principal{}, unauthenticated("more than one authorization header")
	}
	if cn, ok := verifiedCN(state); ok {
		if p, ok := g.certs[cn]; ok {
			return p, nil
		}
		return Principal{}, unauthenticated("client certificate %q is not mapped to a principal", cn)
	}
	return Principal{}, unauthenticated("credentials required: a bearer token (authorization: Bearer <token>) or a client certificate")
}

// bearer looks up an "authorization: Bearer <token>" value. Every configured hash is
// compared in constant time, with no early exit, so timing reveals neither whether
// the token matched nor which entry it matched.
func (g *Guard) bearer(value string) (Principal, error) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(value), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(token) == "" {
		return Principal{}, unauthenticated("authorization must be: Bearer <token>")
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	found := -1
	for i := range g.tokens {
		eq := subtle.ConstantTimeCompare(sum[:], g.tokens[i].hash[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return Principal{}, unauthenticated("unknown bearer token")
	}
	return g.tokens[found].p, nil
}

// verifiedCN returns the subject CN of the client certificate that the TLS handshake
// verified against tls.client_ca_file. Unverified peer certificates are ignored.
func verifiedCN(state *tls.ConnectionState) (string, bool) {
	if state == nil || len(state.VerifiedChains) == 0 || len(state.VerifiedChains[0]) == 0 {
		return "", false
	}
	return state.VerifiedChains[0][0].Subject.CommonName, true
}

func unauthenticated(format string, args ...any) error {
	return apierr.New(codes.Unauthenticated, apierr.ReasonUnauthenticated, format, args...)
}

// HasRole reports whether a configured principal named subject acts in tenant with
// role r (a token or a client certificate; in single-user mode, the owner in the
// default tenant). The approval channels ask it when a Slack user or a link names a
// principal, so that taking a role away from a principal takes it from their Slack
// clicks and links at once.
func (g *Guard) HasRole(tenant, subject string, r Role) bool {
	if !g.multiTenant {
		return tenant == DefaultTenant && subject == OwnerSubject
	}
	for _, t := range g.tokens {
		if t.p.Subject == subject && t.p.Tenant == tenant && t.p.Has(r) {
			return true
		}
	}
	p, ok := g.certs[subject]
	return ok && p.Tenant == tenant && p.Has(r)
}
