package server

import (
	"context"

	"github.com/agentplane/agentplane/server/auth"
)

// Every domain call is keyed by auth.TenantOf(ctx), the calling principal's tenant,
// so another tenant's resources are NOT_FOUND exactly like absent ones.

// principalOf is the calling principal (the owner in single-user mode).
func principalOf(ctx context.Context) auth.Principal {
	p, _ := auth.FromContext(ctx)
	return p
}
