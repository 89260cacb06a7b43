package gates

import (
	"fmt"
	"slices"
	"strings"
)

// Mode is how a deployment treats its callers.
type Mode uint8

const (
	// SingleUser is the default: the caller is the owner of the deployment, so the
	// MCP servers and A2A peers it names are its own choice.
	SingleUser Mode = iota
	// MultiTenant is auth.require_principal: callers share the control plane and its
	// runtimes, so no caller may point the shared fleet at a URL of its choosing.
	MultiTenant
)

// ModeOf maps config's auth.require_principal to a Mode.
func ModeOf(requirePrincipal bool) Mode {
	if requirePrincipal {
		return MultiTenant
	}
	return SingleUser
}

func (m Mode) String() string {
	if m == MultiTenant {
		return "multi_tenant"
	}
	return "single_user"
}

// LockedKey names a part of a task's configuration that an operator can lock: a
// request that occupies a locked key is refused (see AssertUnlocked). The wire
// spellings are snake_case, like every other config key.
type LockedKey string

// The closed set of locked keys, and the StartTaskRequest fields that occupy each.
const (
	// KeyMcp is occupied by mcp_servers (present, even when empty).
	KeyMcp LockedKey = "mcp"
	// KeyA2a is occupied by a2a_peers (present, even when empty).
	KeyA2a LockedKey = "a2a"
	// KeyToolPolicy is occupied by interrupt_policy (present) or any tool_axes entry.
	KeyToolPolicy LockedKey = "tool_policy"
	// KeyCompliancePosture has no request field in agentplane.v1: callers can never
	// choose a posture. Locking it is accepted and reported, so a deployment can say so.
	KeyCompliancePosture LockedKey = "compliance_posture"
	// KeyRetentionPolicy has no request field in agentplane.v1 (retention is the
	// operator's, tasks.retention); accepted and reported like KeyCompliancePosture.
	KeyRetentionPolicy LockedKey = "retention_policy"
)

var allLockedKeys = []LockedKey{KeyMcp, KeyA2a, KeyToolPolicy, KeyCompliancePosture, KeyRetentionPolicy}

// AllLockedKeys returns the closed set of locked keys in canonical order.
func AllLockedKeys() []LockedKey { return slices.Clone(allLockedKeys) }

// ParseLockedKey returns the key spelled s, or an error naming the closed set.
func ParseLockedKey(s string) (LockedKey, error) {
	k := LockedKey(s)
	if slices.Contains(allLockedKeys, k) {
		return k, nil
	}
	return "", fmt.Errorf("unknown locked key %q (want one of %s)", s, joinQuoted(allLockedKeys))
}

// Capability is something a compliance posture can deny. The vocabulary is closed.
type Capability string

// The closed set of capabilities. The gates enforce the first two themselves (they
// are the caller-injection lanes) and StartTask enforces workflows (WorkflowsAllowed);
// the others are reported in denied_capabilities for runtimes and clients to honour,
// since no StartTask field carries them.
const (
	// CapMcpServers is honouring caller-supplied MCP servers on StartTask.
	CapMcpServers Capability = "mcp_servers"
	// CapA2aPeers is honouring caller-supplied A2A peers on StartTask.
	CapA2aPeers Capability = "a2a_peers"
	// CapWorkflows is running multi-agent graphs (GraphSpec).
	CapWorkflows Capability = "workflows"
	// CapWebFetch is tools that fetch arbitrary web content.
	CapWebFetch Capability = "web_fetch"
	// CapOrgMemoryMount is mounting the organisation's shared memory into a task.
	CapOrgMemoryMount Capability = "org_memory_mount"
)

var allCapabilities = []Capability{CapMcpServers, CapA2aPeers, CapWorkflows, CapWebFetch, CapOrgMemoryMount}

// AllCapabilities returns the closed set of capabilities in canonical order.
func AllCapabilities() []Capability { return slices.Clone(allCapabilities) }

// Posture is a compliance posture: a named, closed set of denied capabilities.
type Posture string

// The closed set of postures, each strictly stricter than the one before it.
const (
	// PostureStandard denies nothing. It is the default (an empty posture in config).
	PostureStandard Posture = "standard"
	// PostureRestricted denies caller-directed egress from the shared runtimes:
	// caller MCP servers, caller A2A peers and arbitrary web fetches.
	PostureRestricted Posture = "restricted"
	// PostureAirgapped denies every capability in the vocabulary.
	PostureAirgapped Posture = "airgapped"
)

var postureDenies = map[Posture][]Capability{
	PostureStandard:   nil,
	PostureRestricted: {CapMcpServers, CapA2aPeers, CapWebFetch},
	PostureAirgapped:  allCapabilities,
}

var allPostures = []Posture{PostureStandard, PostureRestricted, PostureAirgapped}

// AllPostures returns the closed set of postures, loosest first.
func AllPostures() []Posture { return slices.Clone(allPostures) }

// ParsePosture returns the posture spelled s; "" is PostureStandard.
func ParsePosture(s string) (Posture, error) {
	if s == "" {
		return PostureStandard, nil
	}
	p := Posture(s)
	if _, ok := postureDenies[p]; ok {
		return p, nil
	}
	return "", fmt.Errorf("unknown compliance posture %q (want one of %s)", s, joinQuoted(allPostures))
}

// Denied returns the capabilities p denies, in canonical order. A posture outside the
// closed set (one that bypassed ParsePosture) denies everything: the gates fail closed,
// and because the capability bits read the same table they stay truthful.
func (p Posture) Denied() []Capability {
	denies, ok := postureDenies[p]
	if !ok {
		return slices.Clone(allCapabilities)
	}
	return slices.Clone(denies)
}

// Denies reports whether p denies c.
func (p Posture) Denies(c Capability) bool {
	denies, ok := postureDenies[p]
	return !ok || slices.Contains(denies, c)
}

// AtLeastAsStrictAs reports whether p denies everything q denies. This is the only
// meaning of "stricter": a tenant may set a posture only if it is at least as strict
// as the deployment's.
func (p Posture) AtLeastAsStrictAs(q Posture) bool {
	for _, c := range q.Denied() {
		if !p.Denies(c) {
			return false
		}
	}
	return true
}

func joinQuoted[T ~string](vs []T) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = fmt.Sprintf("%q", string(v))
	}
	return strings.Join(q, ", ")
}
