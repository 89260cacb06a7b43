package spec

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

// Resolve turns a valid spec into the spec a runtime runs:
//   - every static reference is replaced by a copy of the static agent table's spec
//     (a graph node's {agent_id} becomes an inline agent; a spawnable agent's
//     agent_id becomes its spec), recursively;
//   - the reserved verdict tool (VerdictTool) is added to the agent of every
//     evaluator node. An evaluator node that is a nested graph answers through its
//     entry node, so that node's agent gets the tool.
//
// The input is not modified. A result that is not valid is refused with
// InvalidArgument (reason SPEC_INVALID), so nothing unvalidated reaches a runtime.
func (v *Validator) Resolve(r *Result) (*agentplanev1.ResolvedSpec, error) {
	if r == nil || !r.Valid() || (r.Agent == nil) == (r.Graph == nil) {
		return nil, apierr.InvalidArgument(apierr.ReasonSpecInvalid, "only a valid spec can be resolved")
	}
	rs := resolver{table: v.d.StaticAgents}
	if r.Agent != nil {
		a := proto.CloneOf(r.Agent)
		if err := rs.agent(a, nil); err != nil {
			return nil, err
		}
		return &agentplanev1.ResolvedSpec{Spec: &agentplanev1.ResolvedSpec_Agent{Agent: a}}, nil
	}
	g := proto.CloneOf(r.Graph)
	if err := rs.graph(g); err != nil {
		return nil, err
	}
	return &agentplanev1.ResolvedSpec{Spec: &agentplanev1.ResolvedSpec_Graph{Graph: g}}, nil
}

type resolver struct {
	table map[string]*agentplanev1.AgentSpec
}

// static returns a copy of the static agent id, with its own references resolved.
// chain is the static ids being expanded, to refuse a spawn cycle.
func (rs resolver) static(id string, chain []string) (*agentplanev1.AgentSpec, error) {
	if slices.Contains(chain, id) {
		return nil, apierr.InvalidArgument(apierr.ReasonSpecInvalid,
			"static agent %q spawns itself (%s -> %s); such a spec cannot be resolved", id, strings.Join(chain, " -> "), id)
	}
	a, ok := rs.table[id]
	if !ok {
		return nil, apierr.InvalidArgument(apierr.ReasonSpecInvalid, "static agent %q is not in the table", id)
	}
	a = proto.CloneOf(a)
	if err := rs.agent(a, append(chain, id)); err != nil {
		return nil, err
	}
	return a, nil
}

func (rs resolver) agent(a *agentplanev1.AgentSpec, chain []string) error {
	for _, s := range a.GetSpawnableAgents() {
		switch {
		case s == nil:
		case s.AgentId != nil:
			spec, err := rs.static(s.GetAgentId(), chain)
			if err != nil {
				return err
			}
			s.AgentId, s.Spec = nil, spec
		case s.Spec != nil:
			if err := rs.agent(s.Spec, chain); err != nil {
				return err
			}
		}
	}
	return nil
}

func (rs resolver) graph(g *agentplanev1.GraphSpec) error {
	for _, name := range mapKeys(g.GetAgents()) {
		n := g.GetAgents()[name]
		switch s := n.GetSpec().GetSpec().(type) {
		case *agentplanev1.NodeSpec_StaticAgent:
			a, err := rs.static(s.StaticAgent.GetAgentId(), nil)
			if err != nil {
				return err
			}
			n.Spec.Spec = &agentplanev1.NodeSpec_Agent{Agent: a}
		case *agentplanev1.NodeSpec_Agent:
			if err := rs.agent(s.Agent, nil); err != nil {
				return err
			}
		case *agentplanev1.NodeSpec_Graph:
			if err := rs.graph(s.Graph); err != nil {
				return err
			}
		}
		if n.GetRole() == "evaluator" {
			grantVerdict(n)
		}
	}
	return nil
}

// grantVerdict adds the verdict tool to the agent that answers for node n.
func grantVerdict(n *agentplanev1.GraphAgent) {
	for depth := 0; n != nil && depth < 1000; depth++ {
		switch s := n.GetSpec().GetSpec().(type) {
		case *agentplanev1.NodeSpec_Agent:
			s.Agent.Tools = append(s.Agent.Tools, VerdictTool())
			return
		case *agentplanev1.NodeSpec_Graph:
			n = s.Graph.GetAgents()[s.Graph.GetEntry()]
		default:
			return
		}
	}
}
