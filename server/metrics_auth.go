package server

import (
	"net/http"

	"github.com/agentplane/agentplane/server/auth"
)

// metricsAuth guards /metrics (and /debug/pprof/ when on) in multi-tenant deployments:
// the store's counters are deployment-wide (every tenant's tasks and inbox), so only
// an admin may read them, as with AdminService.GetStats. Prometheus scrapes with a bearer token
// (authorization.credentials in its scrape config). Single-user deployments serve
// them openly, like everything else.
func (s *Server) metricsAuth(next http.Handler) http.Handler {
	if !s.cfg.Auth.RequirePrincipal {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.guard.AuthenticateHTTP(r)
		if err != nil {
			http.Error(w, "metrics need an admin bearer token", http.StatusUnauthorized)
			return
		}
		if !p.Has(auth.RoleAdmin) {
			http.Error(w, "metrics need the admin role", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
