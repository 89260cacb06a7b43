package auth

import (
	"fmt"
	"testing"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
)

// BenchmarkAuthorize measures one multi-tenant authorization with 1000 configured
// tokens (every hash is compared, by design).
func BenchmarkAuthorize(b *testing.B) {
	cfg := config.Default()
	cfg.Auth.RequirePrincipal = true
	var last string
	for i := 0; i < 1000; i++ {
		tok, hash, err := NewToken()
		if err != nil {
			b.Fatal(err)
		}
		last = tok
		cfg.Auth.Tokens = append(cfg.Auth.Tokens, config.Token{Name: fmt.Sprintf("t%d", i), SHA256: hash, Tenant: "acme", Roles: []string{"user"}})
	}
	g, err := New(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := incoming("authorization", "Bearer "+last)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Authorize(ctx, agentplanev1.TaskService_StartTask_FullMethodName); err != nil {
			b.Fatal(err)
		}
	}
}
