package config

import (
	"strings"

	"github.com/agentplane/agentplane/gates"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// GatesConfig converts the auth.require_principal, gates and tenants sections into
// the trust gates' input; pass it to gates.NewPolicy at boot.
func (c *Config) GatesConfig() gates.Config {
	g := gates.Config{
		RequirePrincipal:  c.Auth.RequirePrincipal,
		LockedKeys:        c.Gates.LockedKeys,
		CompliancePosture: c.Gates.CompliancePosture,
	}
	for _, p := range c.Gates.McpServers {
		g.McpServers = append(g.McpServers, &agentplanev1.McpServer{Name: p.Name, Url: p.URL, Headers: p.Headers})
	}
	for _, p := range c.Gates.A2aPeers {
		g.A2aPeers = append(g.A2aPeers, &agentplanev1.A2APeer{Name: p.Name, Url: p.URL, Headers: p.Headers})
	}
	if len(c.Tenants) > 0 {
		g.Tenants = make(map[string]gates.TenantConfig, len(c.Tenants))
		for id, t := range c.Tenants {
			g.Tenants[id] = gates.TenantConfig{LockedKeys: t.LockedKeys, CompliancePosture: t.CompliancePosture}
		}
	}
	return g
}

// validateGates reports every problem gates.ValidateDeployment finds (unknown locked
// keys or postures, tenants loosening the deployment, bad baseline entries).
func (c *Config) validateGates(bad func(format string, args ...any)) {
	if err := gates.ValidateDeployment(c.GatesConfig()); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			bad("%s", line)
		}
	}
}
