// Package gates holds agentplane's trust decisions as pure functions: whether a
// caller's MCP servers and A2A peers are honoured, which request fields a deployment
// has locked, what a compliance posture denies, which caller entries are well-formed
// and safe to reach, how they merge over the deployment's baseline, and which tool
// calls always wait for a human.
//
// Guarantees:
//
//   - Pure: no I/O, no clock, no logging, no globals that change; it imports only
//     the generated API and the standard library. The same input always gives the
//     same answer, so the service layer asks and never re-derives.
//   - One owner per decision. McpInjectionHonored and A2aInjectionHonored are the
//     only place the three vetoes (locked key, posture denies, multi-tenant) are
//     combined; Capabilities and ResolveMcp/ResolveA2a both read them, so the
//     capability bit says yes exactly when a request's entries are honoured.
//   - Closed vocabularies: locked keys (mcp, a2a, tool_policy, compliance_posture,
//     retention_policy), capabilities (mcp_servers, a2a_peers, workflows, web_fetch,
//     org_memory_mount) and postures (standard ⊂ restricted ⊂ airgapped, by denies).
//     NewPolicy refuses anything else, and a tenant loosening the deployment.
//   - Presence, not content, occupies a locked key: an empty list is refused exactly
//     like a full one, an absent list never is (AssertUnlocked, *LockedKeyError).
//   - Nothing a caller sends loosens anything: caller entries never shadow the
//     baseline (Merge), annotations and tool_axes overrides only tighten gating.
//   - Bounded output: at most MaxCallerPeers entries are honoured per list, and drop
//     and ignore reports stay bounded whatever the request's size.
//
// # How the service layer uses it
//
// At boot: NewPolicy(cfg) (an error stops the boot). Per call: d := policy.For(tenant).
// GetCapabilities: Capabilities(d), then the service's own fields. StartTask, before
// creating the task: ResolveStartTask(d, req); map *LockedKeyError to
// FAILED_PRECONDITION CONFIG_LOCKED_KEY and *AxisError to INVALID_ARGUMENT; store
// Mcp.Effective and A2a.Effective on the task; append Events to its log and log a line
// for each ignored lane. CheckToolCall: AlwaysGated(tool, annotations, task's tool_axes).
//
// What this package cannot do: it judges URL text. A DNS name may resolve to a
// forbidden address (DNS rebinding), so the runtime that dials a peer must check the
// address it connects to as well.
package gates
