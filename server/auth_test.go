package server_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

// TestMultiTenantRequiresCredentials checks the wiring of the auth interceptors into
// the real server: no token is UNAUTHENTICATED, a configured token acts as its principal.
func TestMultiTenantRequiresCredentials(t *testing.T) {
	token, hash, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	in := servertest.Start(t, func(c *config.Config) {
		c.Auth.RequirePrincipal = true
		c.Auth.Tokens = []config.Token{{Name: "alice", SHA256: hash, Tenant: "acme", Roles: []string{"user"}}}
	})
	ctx := context.Background()
	if _, err := in.Client.Capabilities.GetCapabilities(ctx, &agentplanev1.GetCapabilitiesRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without a token: want UNAUTHENTICATED, got %v", err)
	}
	c, err := client.Dial(ctx, in.GRPCAddr, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.Capabilities.GetCapabilities(ctx, &agentplanev1.GetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	caps := resp.GetCapabilities()
	if caps.GetPrincipal().GetTenant() != "acme" || caps.GetPrincipal().GetSubject() != "alice" || !caps.GetRequirePrincipal() {
		t.Fatalf("principal = %v, require_principal = %v", caps.GetPrincipal(), caps.GetRequirePrincipal())
	}
	if caps.GetMcpInjection() || caps.GetA2AInjection() {
		t.Fatalf("multi-tenant deployments never honour caller MCP/A2A entries")
	}
	if _, err := c.Admin.GetStats(ctx, &agentplanev1.GetStatsRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a user calling AdminService: want PERMISSION_DENIED, got %v", err)
	}
}
