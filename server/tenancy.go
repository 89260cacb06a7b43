package server

import (
	"context"

	"github.com/agentplane/agentplane/server/auth"
)

// tenantOf is the calling principal's tenant; every domain call is keyed by it, so
// another tenant's resources are NOT_FOUND exactly like absent ones.
func tenantOf(ctx context.Context) (string, error) { return auth.TenantOf(ctx) }

// principalOf is the calling principal (the owner in single-user mode).
func principalOf(ctx context.Context) auth.Principal {
	p, _ := auth.FromContext(ctx)
	return p
}
