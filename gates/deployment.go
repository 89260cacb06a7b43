package gates

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Config is the gate configuration as an operator writes it (server/config's auth,
// gates and tenants sections, converted by the caller): strings not yet checked
// against the closed vocabularies.
type Config struct {
	// RequirePrincipal is auth.require_principal (multi-tenant).
	RequirePrincipal bool
	// LockedKeys are gates.locked_keys.
	LockedKeys []string
	// CompliancePosture is gates.compliance_posture; "" is standard.
	CompliancePosture string
	// McpServers is the deployment's baseline of MCP servers.
	McpServers []*agentplanev1.McpServer
	// A2aPeers is the deployment's baseline of A2A peers.
	A2aPeers []*agentplanev1.A2APeer
	// Tenants are per-tenant settings, by tenant id.
	Tenants map[string]TenantConfig
}

// TenantConfig is one tenant's gate settings; it may only tighten the deployment's.
type TenantConfig struct {
	// LockedKeys are added to the deployment's.
	LockedKeys []string
	// CompliancePosture, when set, must be at least as strict as the deployment's.
	CompliancePosture string
}

// Deployment is the gate settings in force for one caller: the deployment's,
// tightened by the caller's tenant. Obtain it from Policy.For; the slices are shared
// and must not be modified. A Deployment built by hand must set Posture: the empty
// posture is outside the closed set, so it denies every capability (fail closed).
type Deployment struct {
	// Mode is single-user or multi-tenant.
	Mode Mode
	// Locked are the locked keys, in canonical order.
	Locked []LockedKey
	// Posture is the compliance posture in force.
	Posture Posture
	// McpBaseline is the deployment's MCP servers, present on every task.
	McpBaseline []*agentplanev1.McpServer
	// A2aBaseline is the deployment's A2A peers, present on every task.
	A2aBaseline []*agentplanev1.A2APeer
}

// IsLocked reports whether k is locked for this caller.
func (d Deployment) IsLocked(k LockedKey) bool { return slices.Contains(d.Locked, k) }

// Policy is the validated gate configuration: the deployment's settings and each
// configured tenant's effective settings. It is immutable and safe for concurrent use.
type Policy struct {
	base    Deployment
	tenants map[string]Deployment
}

// NewPolicy validates cfg and returns the policy. The error names every problem
// (unknown locked key or posture, a tenant loosening the deployment, a malformed
// baseline entry), one per line, each with its config path; it should stop the boot.
func NewPolicy(cfg Config) (*Policy, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	base := Deployment{Mode: ModeOf(cfg.RequirePrincipal), McpBaseline: cfg.McpServers, A2aBaseline: cfg.A2aPeers}
	base.Locked = parseKeys("gates.locked_keys", cfg.LockedKeys, nil, bad)
	if p, err := ParsePosture(cfg.CompliancePosture); err != nil {
		bad("gates.compliance_posture: %v", err)
		base.Posture = PostureAirgapped // keep checking the rest against the strictest
	} else {
		base.Posture = p
	}
	checkBaseline("gates.mcp_servers", cfg.McpServers, bad)
	checkBaseline("gates.a2a_peers", cfg.A2aPeers, bad)

	tenants := make(map[string]Deployment, len(cfg.Tenants))
	for _, id := range sortedKeys(cfg.Tenants) {
		tc := cfg.Tenants[id]
		path := "tenants." + id
		if id == "" {
			bad("tenants: empty tenant id")
		}
		d := base
		d.Locked = parseKeys(path+".locked_keys", tc.LockedKeys, base.Locked, bad)
		if tc.CompliancePosture != "" {
			p, err := ParsePosture(tc.CompliancePosture)
			switch {
			case err != nil:
				bad("%s.compliance_posture: %v", path, err)
			case !p.AtLeastAsStrictAs(base.Posture):
				bad("%s.compliance_posture: %q is looser than the deployment's %q; a tenant may only tighten (want one of %s)",
					path, p, base.Posture, joinQuoted(stricterThan(base.Posture)))
			default:
				d.Posture = p
			}
		}
		tenants[id] = d
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Policy{base: base, tenants: tenants}, nil
}

// ValidateDeployment is NewPolicy without the result: nil, or every problem in cfg.
func ValidateDeployment(cfg Config) error {
	_, err := NewPolicy(cfg)
	return err
}

// Deployment returns the deployment-wide settings (what a tenant without settings gets).
func (p *Policy) Deployment() Deployment { return p.base }

// For returns the settings in force for tenant.
func (p *Policy) For(tenant string) Deployment {
	if d, ok := p.tenants[tenant]; ok {
		return d
	}
	return p.base
}

// parseKeys parses keys at path and returns them with inherited, deduplicated, in
// canonical order. Unknown keys are reported through bad.
func parseKeys(path string, keys []string, inherited []LockedKey, bad func(string, ...any)) []LockedKey {
	set := slices.Clone(inherited)
	for i, s := range keys {
		k, err := ParseLockedKey(s)
		if err != nil {
			bad("%s[%d]: %v", path, i, err)
			continue
		}
		set = append(set, k)
	}
	var out []LockedKey
	for _, k := range allLockedKeys {
		if slices.Contains(set, k) {
			out = append(out, k)
		}
	}
	return out
}

// checkBaseline applies the entry rules with operator reach (private hosts and plain
// http allowed; the always-forbidden addresses not) and refuses duplicates: a
// baseline is configured, so a bad entry is an error rather than a drop.
func checkBaseline[E Entry](path string, entries []E, bad func(string, ...any)) {
	seen := map[string]int{}
	for i, e := range entries {
		if why, ok := checkEntry(e, operatorRules); !ok {
			bad("%s[%d] (%q): %s", path, i, e.GetName(), why)
			continue
		}
		if j, dup := seen[nameKey(e.GetName())]; dup {
			bad("%s[%d] (%q): %s of %s[%d]", path, i, e.GetName(), DropNameDuplicate, path, j)
			continue
		}
		seen[nameKey(e.GetName())] = i
	}
}

func stricterThan(p Posture) []Posture {
	var out []Posture
	for _, q := range allPostures {
		if q.AtLeastAsStrictAs(p) {
			out = append(out, q)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
