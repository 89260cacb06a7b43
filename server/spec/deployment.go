package spec

import (
	"fmt"

	"github.com/agentplane/agentplane/server/config"
)

// DeploymentFrom is the deployment knowledge a configuration gives validation: the
// platform nesting cap, the static agent table (read and validated from its files,
// relative to the config file) and the document limits. The server builds its
// validator from it, and so does `ctl spec validate --offline`, so both apply the
// same rules to the same configuration.
func DeploymentFrom(cfg *config.Config) (Deployment, error) {
	static, err := LoadStaticAgents(cfg.Spec.StaticAgents, cfg.BaseDir())
	if err != nil {
		return Deployment{}, fmt.Errorf("spec.static_agents: %w", err)
	}
	return Deployment{
		PlatformMaxDepth: cfg.Spec.PlatformMaxDepth,
		StaticAgents:     static,
		MaxDocumentBytes: cfg.Limits.MaxSpecBytes,
		MaxNesting:       cfg.Limits.MaxSpecNesting,
	}, nil
}

// TenantMaxDepth is a tenant's graph nesting cap: the one cfg gives the tenant,
// tightened by requested when that is smaller. 0 means no tenant cap.
func TenantMaxDepth(cfg *config.Config, tenant string, requested int64) int64 {
	capped := cfg.Tenants[tenant].MaxDepth
	if requested > 0 && (capped == 0 || requested < capped) {
		capped = requested
	}
	return capped
}
