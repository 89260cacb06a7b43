package spec

import (
	"fmt"
	"math"
	"slices"
	"strings"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// nodeNamePattern: node names are referenced by entry, edges and termination, and an
// ai_tool edge offers its target to the producer's model as a tool, so a node name
// is held to the tool-name pattern.
var nodeNamePattern = toolNamePattern

// depthCtx carries the nesting state down a graph tree.
type depthCtx struct {
	depth int // 1 for the top-level graph
	// levels is how many graph levels the current graph may still hold, itself
	// included, under min(platform, tenant, every enclosing max_depth); 0 = no cap.
	levels int64
	// reported stops the nesting finding from repeating at every deeper level.
	reported bool
}

func (w *walker) rootGraph(g *agentplanev1.GraphSpec, p *Path) {
	w.graph(g, p, depthCtx{depth: 1, levels: minCap(w.deployCap, declaredDepth(g))})
}

func declaredDepth(g *agentplanev1.GraphSpec) int64 {
	if d := g.GetLimits().GetMaxDepth(); d >= 1 {
		return int64(d)
	}
	return 0
}

// graph applies the D11 and D13 rules to g at p.
func (w *walker) graph(g *agentplanev1.GraphSpec, p *Path, dc depthCtx) {
	w.apiVersion(g.GetApiVersion(), p, RuleGraphAPIVersion)
	w.kind(g.GetKind(), KindGraph, p, RuleGraphKind)

	names := w.nodeNames(g)
	ap := p.Child("agents")
	if len(names) == 0 {
		w.errf(RuleNodesNonEmpty, ap, "agents is required: a graph needs at least one node (a supervisor to enter at)")
	}
	for _, name := range names {
		w.node(name, g.GetAgents()[name], ap.Child(name), dc)
	}

	edges := w.edges(g, p.Child("edges"))

	entry := g.GetEntry()
	switch node, ok := g.GetAgents()[entry]; {
	case entry == "":
		w.errf(RuleEntry, p.Child("entry"), "entry is required: the name of the supervisor node the graph starts at")
	case !ok:
		w.errf(RuleEntry, p.Child("entry"), "entry %q names no node of this graph%s", entry, nearest(entry, names))
	case node.GetRole() != "supervisor" && slices.Contains(roles, node.GetRole()):
		w.errf(RuleEntrySupervisor, p.Child("entry"), "entry node %q is a %s; the entry node must be a supervisor", entry, node.GetRole())
	}

	w.limits(g.GetLimits(), p.Child("limits"))
	w.termination(g, names, p.Child("termination"))
	w.outputSchemas(g.GetOutputSchema(), g.GetDepsSchema(), p)
	if g.HitlDefault != nil && !slices.Contains(hitlModes, g.GetHitlDefault()) {
		w.errf(RuleHITLMode, p.Child("hitl_default"), "hitl_default must be %s, got %q", oneOf(hitlModes), g.GetHitlDefault())
	}
	if g.GetParentClosePolicy() != nil && !isNull(g.GetParentClosePolicy()) {
		w.errf(RuleParentClosePolicy, p.Child("parent_close_policy"), "parent_close_policy is reserved and must be null or absent")
	}
	w.contentTrust(g.GetContentTrust(), p.Child("content_trust"))

	w.topologyWarnings(g, names, edges, p)
}

// nodeNames returns the node names in document order for a document, sorted for
// typed input (the order of the canonical encoding).
func (w *walker) nodeNames(g *agentplanev1.GraphSpec) []string {
	if order := w.doc.nodeOrder(g); len(order) == len(g.GetAgents()) {
		return order
	}
	names := make([]string, 0, len(g.GetAgents()))
	for name := range g.GetAgents() {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// nearest suggests a node name for a dangling reference.
func nearest(name string, names []string) string {
	best, bestDist := "", 3
	for _, n := range names {
		if d := editDistance(n, name, bestDist); d < bestDist {
			best, bestDist = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

func (w *walker) node(name string, n *agentplanev1.GraphAgent, p *Path, dc depthCtx) {
	if n == nil {
		n = &agentplanev1.GraphAgent{}
	}
	if !nodeNamePattern.MatchString(name) {
		w.errf(RuleNodeName, p, "node name %q must be 1 to 64 letters, digits, '_', '-' or '.' (an ai_tool edge offers it to a model as a tool name)", name)
	}
	switch role := n.GetRole(); {
	case role == "":
		w.errf(RuleRole, p.Child("role"), "role is required: %s", oneOf(roles))
	case !slices.Contains(roles, role):
		w.errf(RuleRole, p.Child("role"), "role must be %s, got %q", oneOf(roles), role)
	}
	if n.Hitl != nil && !slices.Contains(hitlModes, n.GetHitl()) {
		w.errf(RuleHITLMode, p.Child("hitl"), "hitl must be %s, got %q (leave it out to inherit hitl_default)", oneOf(hitlModes), n.GetHitl())
	}
	sp := p.Child("spec")
	switch s := n.GetSpec().GetSpec().(type) {
	case *agentplanev1.NodeSpec_Agent:
		if s.Agent == nil {
			break
		}
		w.agent(s.Agent, sp, false)
		return
	case *agentplanev1.NodeSpec_Graph:
		if s.Graph == nil {
			break
		}
		w.nested(s.Graph, sp, dc)
		return
	case *agentplanev1.NodeSpec_StaticAgent:
		switch id := s.StaticAgent.GetAgentId(); {
		case strings.TrimSpace(id) == "":
			w.errf(RuleStaticAgent, sp.Child("agent_id"), "agent_id is empty")
		case !w.staticKnown(id):
			w.errf(RuleStaticAgent, sp.Child("agent_id"), "agent_id %q is not in this deployment's static agent table (%s)", id, w.knownStatic())
		}
		return
	}
	w.errf(RuleNodeSpec, sp, "spec is required: an inline agent (kind AgentSpec), a nested graph (kind GraphSpec) or {agent_id}")
}

// nested validates a nested graph one level down, checking the nesting cap.
func (w *walker) nested(g *agentplanev1.GraphSpec, p *Path, dc depthCtx) {
	child := depthCtx{depth: dc.depth + 1, reported: dc.reported}
	if dc.levels > 0 {
		child.levels = dc.levels - 1
		if child.levels < 1 && !dc.reported {
			w.errf(RuleNestingDepth, p, "this nested graph is at depth %d, over the effective nesting cap of %d (the smallest of %s)",
				child.depth, dc.depth+int(dc.levels)-1, w.capSources())
			child.reported = true
		}
	}
	if child.levels < 1 {
		child.levels = 0
	}
	child.levels = minCap(child.levels, declaredDepth(g))
	w.graph(g, p, child)
}

func (w *walker) capSources() string {
	var parts []string
	if w.platform > 0 {
		parts = append(parts, fmt.Sprintf("platform %d", w.platform))
	}
	if w.tenant > 0 {
		parts = append(parts, fmt.Sprintf("tenant %d", w.tenant))
	}
	parts = append(parts, "limits.max_depth of this graph and the graphs around it")
	return strings.Join(parts, ", ")
}

type edgeKey struct{ from, to, kind string }

func (w *walker) edges(g *agentplanev1.GraphSpec, p *Path) []*agentplanev1.GraphEdge {
	agents := g.GetAgents()
	seen := make(map[edgeKey]int, len(g.GetEdges()))
	for i, e := range g.GetEdges() {
		ep := p.Index(i)
		for _, end := range []struct{ key, name string }{{"from", e.GetFromNode()}, {"to", e.GetToNode()}} {
			if end.name == "" {
				w.errf(RuleEdgeEnds, ep.Child(end.key), "%s is required: a node name", end.key)
			} else if _, ok := agents[end.name]; !ok {
				w.errf(RuleEdgeEnds, ep.Child(end.key), "%s %q names no node of this graph%s", end.key, end.name, nearest(end.name, mapKeys(agents)))
			}
		}
		switch k := e.GetKind(); {
		case k == "":
			w.errf(RuleEdgeKind, ep.Child("kind"), "kind is required: %s", oneOf(edgeKinds))
		case !slices.Contains(edgeKinds, k):
			w.errf(RuleEdgeKind, ep.Child("kind"), "edge kind must be %s, got %q", oneOf(edgeKinds), k)
		}
		key := edgeKey{e.GetFromNode(), e.GetToNode(), e.GetKind()}
		if j, dup := seen[key]; dup {
			w.errf(RuleEdgeUnique, ep, "the same %s edge %s -> %s is already declared at edges[%d]", e.GetKind(), e.GetFromNode(), e.GetToNode(), j)
		} else {
			seen[key] = i
		}
		if target, ok := agents[e.GetToNode()]; ok && e.GetKind() == "evaluate" && target.GetRole() != "evaluator" {
			w.errf(RuleEvaluateTarget, ep.Child("to"), "an evaluate edge dispatches an evaluator, but %q has role %q", e.GetToNode(), target.GetRole())
		}
		if oe := e.GetOnError(); oe != nil {
			op := ep.Child("on_error")
			switch {
			case oe.Abort != nil && oe.RouteTo != nil:
				w.errf(RuleOnErrorShape, op, "on_error is {abort: true} or {route_to: node}, not both")
			case oe.Abort == nil && oe.RouteTo == nil:
				w.errf(RuleOnErrorShape, op, "on_error is empty; give {abort: true} or {route_to: node}, or leave it out")
			case oe.Abort != nil && !oe.GetAbort():
				w.errf(RuleOnErrorShape, op.Child("abort"), "abort must be true; to not abort, route the error with route_to or leave on_error out")
			case oe.RouteTo != nil:
				if _, ok := agents[oe.GetRouteTo()]; !ok {
					w.errf(RuleOnErrorRoute, op.Child("route_to"), "route_to %q names no node of this graph%s", oe.GetRouteTo(), nearest(oe.GetRouteTo(), mapKeys(agents)))
				}
			}
		}
	}
	return g.GetEdges()
}

func mapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (w *walker) termination(g *agentplanev1.GraphSpec, names []string, p *Path) {
	if len(g.GetTermination()) == 0 {
		w.errf(RuleTerminationNonEmpty, p, "termination is required: at least one condition (agent_returns, max_steps_reached or error_uncaught)")
		return
	}
	for i, t := range g.GetTermination() {
		if t == nil {
			t = &agentplanev1.TerminationCondition{}
		}
		tp := p.Index(i)
		switch k := t.GetKind(); k {
		case "agent_returns":
			switch {
			case t.GetAgent() == "":
				w.errf(RuleTerminationShape, tp.Child("agent"), "agent is required for agent_returns: the node whose return ends the graph")
			case !slices.Contains(names, t.GetAgent()):
				w.errf(RuleTerminationAgent, tp.Child("agent"), "agent %q names no node of this graph%s", t.GetAgent(), nearest(t.GetAgent(), names))
			}
		case "max_steps_reached", "error_uncaught":
			if t.Agent != nil {
				w.errf(RuleTerminationShape, tp.Child("agent"), "agent only applies to agent_returns; remove it from %s", k)
			}
			if k == "max_steps_reached" && (g.GetLimits() == nil || g.GetLimits().MaxSteps == nil) {
				w.warnf(WarnMaxStepsDefault, tp, "max_steps_reached ends the graph at limits.max_steps, which is not set here, so the deployment default decides")
			}
		case "":
			w.errf(RuleTerminationShape, tp.Child("kind"), "kind is required: %s", oneOf(terminationKinds))
		default:
			w.errf(RuleTerminationShape, tp.Child("kind"), "termination kind must be %s, got %q", oneOf(terminationKinds), k)
		}
	}
}

func (w *walker) limits(l *agentplanev1.GraphLimits, p *Path) {
	if l == nil {
		return
	}
	for _, f := range []struct {
		name string
		v    *int32
	}{{"max_steps", l.MaxSteps}, {"max_depth", l.MaxDepth}, {"per_agent_iterations", l.PerAgentIterations}} {
		if f.v != nil && *f.v < 1 {
			w.errf(RuleLimitMin, p.Child(f.name), "%s must be at least 1, got %d", f.name, *f.v)
		}
	}
	if d := int64(l.GetMaxDepth()); d >= 1 && w.deployCap > 0 && d > w.deployCap {
		w.errf(RuleMaxDepthOverCap, p.Child("max_depth"), "max_depth %d is over this deployment's nesting cap of %d (%s); lower it",
			d, w.deployCap, strings.TrimSuffix(w.capSources(), ", limits.max_depth of this graph and the graphs around it"))
	}
	if b := l.GetBudget(); b != nil {
		bp := p.Child("budget")
		for _, f := range []struct {
			name string
			set  bool
			pos  bool
			v    string
		}{
			{"total_input_tokens", b.TotalInputTokens != nil, b.GetTotalInputTokens() > 0, fmt.Sprint(b.GetTotalInputTokens())},
			{"total_output_tokens", b.TotalOutputTokens != nil, b.GetTotalOutputTokens() > 0, fmt.Sprint(b.GetTotalOutputTokens())},
			{"total_wall_clock_s", b.TotalWallClockS != nil, b.GetTotalWallClockS() > 0 && !math.IsInf(b.GetTotalWallClockS(), 0), fmt.Sprint(b.GetTotalWallClockS())},
		} {
			switch {
			case !f.set:
				w.errf(RuleBudget, bp.Child(f.name), "%s is required: a budget sets every field", f.name)
			case !f.pos:
				w.errf(RuleBudget, bp.Child(f.name), "%s must be greater than 0, got %s", f.name, f.v)
			}
		}
	}
}

// topologyWarnings reports nodes the graph can never run.
func (w *walker) topologyWarnings(g *agentplanev1.GraphSpec, names []string, edges []*agentplanev1.GraphEdge, p *Path) {
	agents := g.GetAgents()
	ap := p.Child("agents")
	dispatched := map[string]bool{}
	for _, e := range edges {
		if e.GetKind() == "evaluate" {
			dispatched[e.GetToNode()] = true
		}
	}
	if _, ok := agents[g.GetEntry()]; ok {
		// Reachable: from entry along edges; a route_to target is reached when the
		// edge it guards is taken.
		next := map[string][]string{}
		for _, e := range edges {
			next[e.GetFromNode()] = append(next[e.GetFromNode()], e.GetToNode())
			if r := e.GetOnError().GetRouteTo(); r != "" {
				next[e.GetFromNode()] = append(next[e.GetFromNode()], r)
			}
		}
		seen := map[string]bool{g.GetEntry(): true}
		queue := []string{g.GetEntry()}
		for len(queue) > 0 {
			n := queue[0]
			queue = queue[1:]
			for _, m := range next[n] {
				if !seen[m] {
					seen[m] = true
					queue = append(queue, m)
				}
			}
		}
		for _, name := range names {
			if !seen[name] {
				w.warnf(WarnUnreachable, ap.Child(name), "node %q is not reachable from entry %q through any edge, so it never runs", name, g.GetEntry())
			}
		}
	}
	for _, name := range names {
		if agents[name].GetRole() == "evaluator" && !dispatched[name] {
			w.warnf(WarnEvaluatorIdle, ap.Child(name), "evaluator %q is the target of no evaluate edge, so its verdict is never asked for", name)
		}
	}
	for i, e := range edges {
		if e.GetKind() != "evaluate" && agents[e.GetToNode()].GetRole() == "evaluator" && slices.Contains(edgeKinds, e.GetKind()) {
			w.warnf(WarnEvaluatorEdgeKind, p.Child("edges").Index(i).Child("kind"),
				"this %s edge reaches evaluator %q, whose verdict only an evaluate edge collects", e.GetKind(), e.GetToNode())
		}
	}
}
