// Package spectest builds realistic specs of a chosen size for benchmarks and tests:
// agents with strict tools, and graphs of supervisors, collaborators and evaluators,
// optionally nested.
package spectest

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Agent builds an agent named name with the given number of strict function tools.
func Agent(name string, tools int) *agentplanev1.AgentSpec {
	a := &agentplanev1.AgentSpec{
		ApiVersion:   "qar/v1",
		Kind:         "AgentSpec",
		Name:         proto.String(name),
		Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "You are " + name + ". Do the part of the task you are handed, cite your sources, and say when you are unsure."}},
		Model:        "gpt-4.1",
		ContentTrust: &agentplanev1.ContentTrustPolicy{ToolOutputPolicy: proto.String("untrusted"), MaxUntrustedBytes: proto.Int32(16384)},
	}
	for i := range tools {
		params, err := structpb.NewStruct(map[string]any{
			"type": "object",
			"properties": map[string]any{
				"query": map[string]any{"type": "string", "description": "What to look for."},
				"limit": map[string]any{"type": "integer", "minimum": 1, "maximum": 50},
				"filters": map[string]any{
					"type":                 []any{"object", "null"},
					"properties":           map[string]any{"since": map[string]any{"type": "string", "format": "date"}, "tags": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}},
					"required":             []any{"since", "tags"},
					"additionalProperties": false,
				},
			},
			"required":             []any{"query", "limit", "filters"},
			"additionalProperties": false,
		})
		if err != nil {
			panic(err)
		}
		a.Tools = append(a.Tools, &agentplanev1.FunctionTool{Type: "function", Function: &agentplanev1.FunctionDef{
			Name:        fmt.Sprintf("%s_tool_%d", name, i),
			Description: proto.String("Searches the knowledge base."),
			Parameters:  params,
			Annotations: &agentplanev1.McpToolAnnotations{ReadOnlyHint: proto.Bool(true)},
		}})
	}
	return a
}

// Graph builds a graph of n nodes: a supervisor, evaluators every fifth node,
// collaborators otherwise; nest > 0 replaces the second node with a nested graph of
// the same shape, nest levels deep.
func Graph(prefix string, n, nest int) *agentplanev1.GraphSpec {
	g := &agentplanev1.GraphSpec{
		ApiVersion: "qar/v1",
		Kind:       "GraphSpec",
		Name:       proto.String(prefix + "graph"),
		Agents:     map[string]*agentplanev1.GraphAgent{},
		Entry:      prefix + "n00",
		Limits: &agentplanev1.GraphLimits{MaxSteps: proto.Int32(100), PerAgentIterations: proto.Int32(5),
			Budget: &agentplanev1.GraphBudget{TotalInputTokens: proto.Int32(1e6), TotalOutputTokens: proto.Int32(1e5), TotalWallClockS: proto.Float64(1800)}},
		Termination: []*agentplanev1.TerminationCondition{{Kind: "agent_returns", Agent: proto.String(prefix + "n00")}, {Kind: "max_steps_reached"}},
	}
	for i := range n {
		name := fmt.Sprintf("%sn%02d", prefix, i)
		role, kind := "collaborator", "handoff"
		switch {
		case i == 0:
			role = "supervisor"
		case i%5 == 0:
			role, kind = "evaluator", "evaluate"
		}
		node := &agentplanev1.GraphAgent{Role: role, Spec: &agentplanev1.NodeSpec{Spec: &agentplanev1.NodeSpec_Agent{Agent: Agent(name, 1+i%2)}}}
		if i == 1 && nest > 0 {
			node.Spec = &agentplanev1.NodeSpec{Spec: &agentplanev1.NodeSpec_Graph{Graph: Graph(fmt.Sprintf("%sl%d_", prefix, nest), n, nest-1)}}
		}
		g.Agents[name] = node
		if i > 0 {
			e := &agentplanev1.GraphEdge{FromNode: prefix + "n00", ToNode: name, Kind: kind}
			if i%3 == 0 {
				e.OnError = &agentplanev1.EdgeOnError{RouteTo: proto.String(prefix + "n00")}
			}
			g.Edges = append(g.Edges, e)
		}
	}
	return g
}
