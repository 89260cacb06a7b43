package hitl

import (
	"slices"

	"google.golang.org/protobuf/types/known/structpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Mode is a graph node's HITL mode, spelled as on the wire.
type Mode string

// HITL modes.
const (
	// ModeEnabled surfaces a gated call as an interrupt for a person.
	ModeEnabled Mode = "enabled"
	// ModePassthrough hands a gated call to the enclosing graph's frame.
	ModePassthrough Mode = "passthrough"
	// ModeDisabled rejects a gated call at once with a synthesized decision.
	ModeDisabled Mode = "disabled"
)

// ModeResolution is how a gated call from one node is handled, and why.
type ModeResolution struct {
	// Mode is the effective mode: ModeEnabled or ModeDisabled, never passthrough
	// (passthrough is resolved by walking outwards).
	Mode Mode
	// Declared is the calling node's own mode (its hitl, else its graph's
	// hitl_default, else disabled).
	Declared Mode
	// DecidedBy names the frame whose mode decided: the calling node, the graph
	// node enclosing it for a passthrough, or "" for the control plane itself (the
	// outermost frame, reached by passthrough at the top level, or a plain agent).
	DecidedBy string
	// Found is false when the calling node is not in the spec; the top-level
	// graph's default then applies, as to a node that sets no mode of its own.
	Found bool
}

// frame is one graph on the path from the root to a node: the graph, and the name
// and value of the node taken in it.
type frame struct {
	graph *agentplanev1.GraphSpec
	name  string
	node  *agentplanev1.GraphAgent
}

// findNode returns the frames from the root graph down to the node called name:
// path[len-1] holds the node itself. Nodes of the root graph are found first, then
// nested graphs are searched in the order of their node names, so a name used at
// several depths resolves to the shallowest, first in name order.
func findNode(g *agentplanev1.GraphSpec, name string) []frame {
	if n, ok := g.GetAgents()[name]; ok {
		return []frame{{graph: g, name: name, node: n}}
	}
	keys := make([]string, 0, len(g.GetAgents()))
	for k, n := range g.GetAgents() {
		if n.GetSpec().GetGraph() != nil {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		n := g.GetAgents()[k]
		if sub := findNode(n.GetSpec().GetGraph(), name); sub != nil {
			return append([]frame{{graph: g, name: k, node: n}}, sub...)
		}
	}
	return nil
}

// nodeMode is a node's own effective mode in its graph. A mode outside the closed
// set (which the spec validator refuses) is treated as disabled: when in doubt, no
// call runs unapproved.
func nodeMode(g *agentplanev1.GraphSpec, n *agentplanev1.GraphAgent) Mode {
	m := ModeDisabled
	switch {
	case n != nil && n.Hitl != nil:
		m = Mode(n.GetHitl())
	case g.HitlDefault != nil:
		m = Mode(g.GetHitlDefault())
	}
	switch m {
	case ModeEnabled, ModePassthrough, ModeDisabled:
		return m
	}
	return ModeDisabled
}

// ResolveMode decides how a gated call from node is handled under spec.
//
// Graphs: a node's mode is its hitl, else its graph's hitl_default, else disabled.
// enabled surfaces the interrupt and disabled rejects it. passthrough hands it to
// the enclosing frame: for a node of a nested graph, that is the outer graph's node
// that hosts the nested graph, whose own mode then applies (and may pass it on
// again); at the top level the enclosing frame is the control plane, whose reviewers
// are the consumer, so the interrupt is surfaced (enabled). The interrupt is owned by
// the calling node either way; DecidedBy records which frame let it through.
//
// A plain agent (inline or static) has no mode field. It is enabled when the task
// carries an interrupt policy, the caller's statement that someone will answer, and
// disabled otherwise, matching the headless default of graphs: a task started without
// a policy never waits for a person, and its always-gated calls (A2A skills,
// destructive MCP tools) are rejected at once, never run. A caller who wants only
// those surfaced sends an empty allowlist.
func ResolveMode(spec *agentplanev1.ResolvedSpec, hasPolicy bool, node string) ModeResolution {
	g := spec.GetGraph()
	if g == nil {
		m := ModeDisabled
		if hasPolicy {
			m = ModeEnabled
		}
		return ModeResolution{Mode: m, Declared: m, Found: true}
	}
	path := findNode(g, node)
	if path == nil {
		m := nodeMode(g, nil)
		if m == ModePassthrough {
			return ModeResolution{Mode: ModeEnabled, Declared: m}
		}
		return ModeResolution{Mode: m, Declared: m, DecidedBy: node}
	}
	last := path[len(path)-1]
	res := ModeResolution{Declared: nodeMode(last.graph, last.node), Found: true}
	for i := len(path) - 1; i >= 0; i-- {
		f := path[i]
		if m := nodeMode(f.graph, f.node); m != ModePassthrough {
			res.Mode, res.DecidedBy = m, f.name
			return res
		}
	}
	res.Mode = ModeEnabled
	return res
}

// LookupNode returns the graph node called name in spec's graph, searching nested
// graphs as ResolveMode does (shallowest first), or nil for a plain agent or an
// unknown name.
func LookupNode(spec *agentplanev1.ResolvedSpec, name string) *agentplanev1.GraphAgent {
	path := findNode(spec.GetGraph(), name)
	if path == nil {
		return nil
	}
	return path[len(path)-1].node
}

// nodeAgent returns the agent spec that runs node: the plain agent itself, or the
// inline agent of the graph node. It is nil for a static agent reference inside a
// graph (the resolved spec inlines those) and for unknown nodes.
func nodeAgent(spec *agentplanev1.ResolvedSpec, node string) (*agentplanev1.AgentSpec, []frame) {
	if a := spec.GetAgent(); a != nil {
		return a, nil
	}
	path := findNode(spec.GetGraph(), node)
	if path == nil {
		return nil, nil
	}
	return path[len(path)-1].node.GetSpec().GetAgent(), path
}

// ToolSchema returns the parameter schema of the function tool named tool in the
// agent that runs node, and whether the spec declares that tool. Tools the spec does
// not declare (MCP tools, A2A skills, managed tools) have no schema here.
func ToolSchema(spec *agentplanev1.ResolvedSpec, node, tool string) (*structpb.Struct, bool) {
	a, _ := nodeAgent(spec, node)
	for _, t := range a.GetTools() {
		if t.GetFunction().GetName() == tool {
			return t.GetFunction().GetParameters(), true
		}
	}
	return nil, false
}

// AutoPauseOnTurnEnd reports whether chat mode is on for node: a plain agent's
// auto_pause_on_turn_end; in a graph, only for the entry supervisor, by its own
// auto_pause_on_turn_end, else the graph's auto_pause_on_turn_end_default.
func AutoPauseOnTurnEnd(spec *agentplanev1.ResolvedSpec, node string) bool {
	if a := spec.GetAgent(); a != nil {
		return a.GetAutoPauseOnTurnEnd()
	}
	g := spec.GetGraph()
	if g == nil || node != g.GetEntry() {
		return false
	}
	n := g.GetAgents()[node]
	if n == nil {
		return false
	}
	if n.AutoPauseOnTurnEnd != nil {
		return n.GetAutoPauseOnTurnEnd()
	}
	return g.GetAutoPauseOnTurnEndDefault()
}

// HitlReasonTrust returns the content-trust settings for reasons reaching node: each
// field from the nearest of the node's inline agent, then the graphs enclosing it
// from the innermost out; fields set nowhere stay unset (the deployment default).
func HitlReasonTrust(spec *agentplanev1.ResolvedSpec, node string) *agentplanev1.ContentTrustPolicy {
	a, path := nodeAgent(spec, node)
	out := &agentplanev1.ContentTrustPolicy{}
	merge := func(p *agentplanev1.ContentTrustPolicy) {
		if p == nil {
			return
		}
		if out.HitlReasonPolicy == nil && p.HitlReasonPolicy != nil {
			out.HitlReasonPolicy = p.HitlReasonPolicy
		}
		if out.MaxUntrustedBytes == nil && p.MaxUntrustedBytes != nil {
			out.MaxUntrustedBytes = p.MaxUntrustedBytes
		}
		if out.MaxTrustedBytes == nil && p.MaxTrustedBytes != nil {
			out.MaxTrustedBytes = p.MaxTrustedBytes
		}
	}
	merge(a.GetContentTrust())
	if path == nil && spec.GetGraph() != nil {
		merge(spec.GetGraph().GetContentTrust())
	}
	for i := len(path) - 1; i >= 0; i-- {
		merge(path[i].graph.GetContentTrust())
	}
	return out
}
