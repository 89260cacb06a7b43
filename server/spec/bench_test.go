package spec

import (
	"bytes"
	"container/list"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// The benchmarks validate the same JSON documents two ways, side by side:
//
//	semantic: Validator.Validate on the document (decode, every rule, positions)
//	schema:   santhosh-tekuri/jsonschema on DocumentSchema (parse JSON + validate)
//
// plus, for reference, semantic validation of the typed message (no decoding) and of
// the document with the compiled-schema cache emptied before every run (the cost of
// the first sight of a spec's tool schemas). Run:
//
//	go test ./server/spec -run '^$' -bench BenchmarkValidate -benchmem -benchtime 2s

func benchAgent(name string, tools int) *agentplanev1.AgentSpec {
	a := &agentplanev1.AgentSpec{
		ApiVersion:   APIVersion,
		Kind:         KindAgent,
		Name:         proto.String(name),
		Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "You are " + name + ". Do the part of the task you are handed, cite your sources, and say when you are unsure."}},
		Model:        "gpt-4.1",
		ContentTrust: &agentplanev1.ContentTrustPolicy{ToolOutputPolicy: proto.String("untrusted"), MaxUntrustedBytes: proto.Int64(16384)},
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

// benchGraph builds a graph of n nodes: a supervisor, evaluators every fifth node,
// collaborators otherwise; nest > 0 replaces the second node with a nested graph of
// the same shape, nest levels deep.
func benchGraph(prefix string, n, nest int) *agentplanev1.GraphSpec {
	g := &agentplanev1.GraphSpec{
		ApiVersion: APIVersion,
		Kind:       KindGraph,
		Name:       proto.String(prefix + "graph"),
		Agents:     map[string]*agentplanev1.GraphAgent{},
		Entry:      prefix + "n00",
		Limits: &agentplanev1.GraphLimits{MaxSteps: proto.Int64(100), PerAgentIterations: proto.Int64(5),
			Budget: &agentplanev1.GraphBudget{TotalInputTokens: proto.Int64(1e6), TotalOutputTokens: proto.Int64(1e5), TotalWallClockS: proto.Float64(1800)}},
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
		node := &agentplanev1.GraphAgent{Role: role, Spec: &agentplanev1.NodeSpec{Spec: &agentplanev1.NodeSpec_Agent{Agent: benchAgent(name, 1+i%2)}}}
		if i == 1 && nest > 0 {
			node.Spec = &agentplanev1.NodeSpec{Spec: &agentplanev1.NodeSpec_Graph{Graph: benchGraph(fmt.Sprintf("%sl%d_", prefix, nest), n, nest-1)}}
		}
		g.Agents[name] = node
		if i > 0 {
			e := &agentplanev1.GraphEdge{From: prefix + "n00", To: name, Kind: kind}
			if i%3 == 0 {
				e.OnError = &agentplanev1.EdgeOnError{RouteTo: proto.String(prefix + "n00")}
			}
			g.Edges = append(g.Edges, e)
		}
	}
	return g
}

type benchCase struct {
	name  string
	typed Input
	doc   []byte
}

func benchCases(b *testing.B) []benchCase {
	agent := benchAgent("researcher", 4)
	graph := benchGraph("", 20, 0)
	nested := benchGraph("", 6, 2) // 3 graph levels, 16 agents
	var out []benchCase
	for _, c := range []struct {
		name string
		m    proto.Message
		in   Input
	}{
		{"agent", agent, Input{Agent: agent}},
		{"graph20", graph, Input{Graph: graph}},
		{"nested3", nested, Input{Graph: nested}},
	} {
		doc, err := Encode(c.m)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, benchCase{c.name, c.in, doc})
	}
	return out
}

func BenchmarkValidate(b *testing.B) {
	v := NewValidator(Deployment{PlatformMaxDepth: 4})
	sch := compileDocumentSchema(b)
	for _, c := range benchCases(b) {
		// Both validators must accept the document, or the comparison means nothing.
		if res, err := v.Validate(Input{Document: c.doc, Format: formatJSON}); err != nil || !res.Valid() || len(res.Warnings) > 0 {
			b.Fatalf("%s: %v %v %v", c.name, err, res.Errors, res.Warnings)
		}
		if inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(c.doc)); err != nil || sch.Validate(inst) != nil {
			b.Fatalf("%s: schema rejects the document: %v %v", c.name, err, sch.Validate(inst))
		}
		b.Run(c.name+"/semantic", func(b *testing.B) {
			b.SetBytes(int64(len(c.doc)))
			b.ReportAllocs()
			for b.Loop() {
				if res, _ := v.Validate(Input{Document: c.doc, Format: formatJSON}); !res.Valid() {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(c.name+"/schema", func(b *testing.B) {
			b.SetBytes(int64(len(c.doc)))
			b.ReportAllocs()
			for b.Loop() {
				inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(c.doc))
				if err != nil {
					b.Fatal(err)
				}
				if err := sch.Validate(inst); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/semantic-typed", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if res, _ := v.Validate(c.typed); !res.Valid() {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(c.name+"/semantic-coldcache", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				schemas.reset()
				if res, _ := v.Validate(Input{Document: c.doc, Format: formatJSON}); !res.Valid() {
					b.Fatal("invalid")
				}
			}
		})
	}
}

func (c *schemaCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ll = list.New()
	c.items = map[[32]byte]*list.Element{}
}

// BenchmarkDecodeYAML measures the YAML path on the largest example.
func BenchmarkDecodeYAML(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(examplesDir, "graphs", "research-nested.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if d := Decode(data, formatYAML, Limits{}); len(d.found) > 0 {
			b.Fatal(d.Violations())
		}
	}
}
