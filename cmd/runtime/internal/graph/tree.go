package graph

import (
	"strings"

	"github.com/agentplane/agentplane/cmd/runtime/internal/agent"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Edge tool name prefixes, one per edge kind: the tool <prefix><to> is offered to the
// edge's from node.
const (
	prefixHandoff  = "handoff__"
	prefixAsk      = "ask__"
	prefixEvaluate = "evaluate__"
)

// Note attributes the runtime writes to mark graph control flow in the log.
const (
	noteKey   = "graph"
	noteRoute = "route_to" // the edge's target failed; its recovery node runs under the same call
	noteCall  = "call_id"
	noteNode  = "node"
)

// edgeToolName is the tool that offers edge e to its from node.
func edgeToolName(e *agentplanev1.GraphEdge) string {
	switch e.GetKind() {
	case "handoff":
		return prefixHandoff + e.GetToNode()
	case "evaluate":
		return prefixEvaluate + e.GetToNode()
	default:
		return prefixAsk + e.GetToNode()
	}
}

// edgeOf returns the edge of g leaving node that tool offers, or nil.
func edgeOf(g *agentplanev1.GraphSpec, node, tool string) *agentplanev1.GraphEdge {
	if !strings.Contains(tool, "__") {
		return nil
	}
	for _, e := range g.GetEdges() {
		if e.GetFromNode() == node && edgeToolName(e) == tool {
			return e
		}
	}
	return nil
}

// invocation is one run of a node's agent: its own events, and the invocations its
// edge calls started, by call id (the target, then the recovery node when the target
// failed and the edge routes).
type invocation struct {
	g    *agentplanev1.GraphSpec // the graph the session's node belongs to
	node string                  // the node whose agent runs (a nested graph's entry)
	// events are the session's own events, in log order.
	events []*agentplanev1.TaskEvent
	calls  map[string][]*invocation
	// parent and via link an invocation to the edge call that started it.
	parent *invocation
	via    string
	// note is the route note's text, for a recovery node's invocation.
	note string
}

func newInvocation(g *agentplanev1.GraphSpec, node string, parent *invocation, via string) *invocation {
	return &invocation{g: g, node: node, calls: map[string][]*invocation{}, parent: parent, via: via}
}

// entryOf returns the graph and node whose agent answers for node n of g: n itself,
// or, for a nested graph, its entry (recursively).
func entryOf(g *agentplanev1.GraphSpec, n string) (*agentplanev1.GraphSpec, string) {
	for depth := 0; depth < 64; depth++ {
		sub := g.GetAgents()[n].GetSpec().GetGraph()
		if sub == nil {
			return g, n
		}
		g, n = sub, sub.GetEntry()
	}
	return g, n
}

// buildTree sorts a task's log into the invocation tree of graph g, whose entry runs
// at the root. Node invocations nest like calls, so one stack does it: an edge call
// of the node on top starts its target's invocation, the call's result ends it, and a
// route note replaces a failed target with its recovery node.
func buildTree(g *agentplanev1.GraphSpec, evs []*agentplanev1.TaskEvent) *invocation {
	eg, en := entryOf(g, g.GetEntry())
	root := newInvocation(eg, en, nil, "")
	top := root
	for _, ev := range evs {
		switch p := ev.GetPayload().(type) {
		case *agentplanev1.TaskEvent_ToolCall:
			tc := p.ToolCall
			top.events = append(top.events, ev)
			if tc.GetNode() != top.node {
				continue
			}
			if e := edgeOf(top.g, top.node, tc.GetToolName()); e != nil {
				tg, tn := entryOf(top.g, e.GetToNode())
				child := newInvocation(tg, tn, top, tc.GetCallId())
				top.calls[tc.GetCallId()] = append(top.calls[tc.GetCallId()], child)
				top = child
			}
			continue
		case *agentplanev1.TaskEvent_ToolResult:
			// The result of an open edge call ends every invocation above it.
			for in := top; in.parent != nil; in = in.parent {
				if in.via == p.ToolResult.GetCallId() {
					top = in.parent
					break
				}
			}
		case *agentplanev1.TaskEvent_Note:
			a := p.Note.GetAttributes()
			if a[noteKey] == noteRoute && top.parent != nil && top.via == a[noteCall] {
				parent := top.parent
				rg, rn := entryOf(top.parentGraph(), a[noteNode])
				child := newInvocation(rg, rn, parent, top.via)
				child.note = p.Note.GetText()
				parent.calls[top.via] = append(parent.calls[top.via], child)
				top = child
				continue
			}
		}
		top.events = append(top.events, ev)
	}
	return root
}

// parentGraph is the graph of the edge that started in: the graph of its parent's
// node.
func (in *invocation) parentGraph() *agentplanev1.GraphSpec {
	if in.parent == nil {
		return in.g
	}
	return in.parent.g
}

// walk calls fn for in and every invocation under it.
func (in *invocation) walk(fn func(*invocation)) {
	fn(in)
	for _, cs := range in.calls {
		for _, c := range cs {
			c.walk(fn)
		}
	}
}

// usage sums what the model calls under in recorded: steps, input and output tokens.
func (in *invocation) usage() (steps, input, output int64) {
	in.walk(func(x *invocation) {
		for _, ev := range x.events {
			m := ev.GetMessage()
			if m.GetRole() != agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT || m.GetModel() == "" {
				continue
			}
			in, out, _ := agent.Usage(m)
			steps++
			input += in
			output += out
		}
	})
	return steps, input, output
}
