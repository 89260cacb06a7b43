package gates

// IgnoreReason says why a closed gate ignored a caller's entries; it is written as
// InjectionIgnored.reason.
type IgnoreReason string

// Why caller entries were ignored.
const (
	// IgnoredMultiTenant: the deployment is multi-tenant, so a caller cannot point the
	// shared runtimes at a URL of its choosing.
	IgnoredMultiTenant IgnoreReason = "multi_tenant"
	// IgnoredCompliancePosture: the posture in force denies the capability.
	IgnoredCompliancePosture IgnoreReason = "compliance_posture"
)

// IgnoreReasons is every Ignored* reason (InjectionIgnored.reason's closed set).
var IgnoreReasons = []IgnoreReason{IgnoredMultiTenant, IgnoredCompliancePosture}

// lane is one injection lane: its locked key and the capability a posture denies.
type lane struct {
	key   LockedKey
	cap   Capability
	field string // the StartTaskRequest field that carries the caller's entries
}

var (
	mcpLane = lane{key: KeyMcp, cap: CapMcpServers, field: "mcp_servers"}
	a2aLane = lane{key: KeyA2a, cap: CapA2aPeers, field: "a2a_peers"}
)

// gate is the single owner of "are this lane's caller entries honoured": three vetoes,
// each with its consequence. locked means a request occupying the key is refused;
// otherwise a non-empty reason means the entries are ignored and that is said.
func (l lane) gate(d Deployment) (honoured, locked bool, why IgnoreReason) {
	switch {
	case d.IsLocked(l.key):
		return false, true, ""
	case d.Mode != SingleUser:
		return false, false, IgnoredMultiTenant
	case d.Posture.Denies(l.cap):
		return false, false, IgnoredCompliancePosture
	}
	return true, false, ""
}

// McpInjectionHonored reports whether caller-supplied MCP servers on StartTask are
// honoured for d. It is false when the mcp key is locked (the request is refused),
// when the deployment is multi-tenant, or when the posture denies mcp_servers. The
// capability bit (Capabilities) and the request path (ResolveMcp) both read it.
func McpInjectionHonored(d Deployment) bool {
	ok, _, _ := mcpLane.gate(d)
	return ok
}

// A2aInjectionHonored is McpInjectionHonored for A2A peers: the a2a key, the
// a2a_peers capability, multi-tenant mode.
func A2aInjectionHonored(d Deployment) bool {
	ok, _, _ := a2aLane.gate(d)
	return ok
}

// WorkflowsAllowed reports whether d lets a caller run multi-agent graphs (GraphSpec):
// the workflows capability, which a compliance posture may deny. StartTask refuses a
// graph when it is false, and GetCapabilities leaves GraphSpec out of the spec kinds.
func WorkflowsAllowed(d Deployment) bool {
	return !d.Posture.Denies(CapWorkflows)
}
