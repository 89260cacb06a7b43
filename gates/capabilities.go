package gates

import agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"

// Capabilities returns the gate-derived part of the Capabilities message for a caller
// whose settings are d: require_principal, mcp_injection, a2a_injection,
// max_caller_peers, locked_keys, compliance_posture and denied_capabilities. The
// service layer fills in the rest of the returned message. The injection bits come
// from McpInjectionHonored and A2aInjectionHonored, the same predicates ResolveMcp and
// ResolveA2a read, so a "yes" here is a route that works for this caller. Roles do not
// enter: single-user callers hold every role, and multi-tenant callers get "no".
// max_caller_peers is MaxCallerPeers when some lane is honoured and 0 when none is.
func Capabilities(d Deployment) *agentplanev1.Capabilities {
	c := &agentplanev1.Capabilities{
		RequirePrincipal:  d.Mode == MultiTenant,
		McpInjection:      McpInjectionHonored(d),
		A2AInjection:      A2aInjectionHonored(d),
		CompliancePosture: string(d.Posture),
	}
	if c.McpInjection || c.A2AInjection {
		c.MaxCallerPeers = MaxCallerPeers
	}
	for _, k := range d.Locked {
		c.LockedKeys = append(c.LockedKeys, string(k))
	}
	for _, cp := range d.Posture.Denied() {
		c.DeniedCapabilities = append(c.DeniedCapabilities, string(cp))
	}
	return c
}
