package spec

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// gen builds random specs, valid and invalid, from small vocabularies that include
// the mistakes the rules look for. Node-spec kinds agree with their arm (or leave a
// routing key present), since a document routes on kind: that is the one place a
// typed message has no document twin.
//
// noise is the probability that a decision is random; otherwise it takes the first
// (valid) choice, so a low noise yields mostly valid specs and a high one mostly
// invalid specs.
type gen struct {
	r     *rand.Rand
	noise float64
}

func (g gen) noisy() bool { return g.r.Float64() < g.noise }

func (g gen) pick(xs ...string) string {
	if g.noisy() {
		return xs[g.r.IntN(len(xs))]
	}
	return xs[0]
}

func (g gen) chance(p float64) bool {
	if g.noisy() {
		return g.r.Float64() < p
	}
	return p >= 0.5
}

// intn chooses a variant; variant 0 is the valid one.
func (g gen) intn(n int) int {
	if g.noisy() {
		return g.r.IntN(n)
	}
	return 0
}

// count chooses a list length: any length when noisy, else at most one (more would
// repeat the first choice and break uniqueness).
func (g gen) count(n int) int {
	if g.noisy() {
		return g.r.IntN(n)
	}
	return min(g.r.IntN(n), 1)
}

func (g gen) optString(xs ...string) *string {
	if g.chance(0.5) {
		return nil
	}
	return proto.String(g.pick(xs...))
}

func (g gen) optInt(xs ...int32) *int32 {
	if g.chance(0.5) {
		return nil
	}
	return proto.Int32(xs[g.intn(len(xs))])
}

func (g gen) schema() *structpb.Struct {
	choices := []map[string]any{
		{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}, "required": []any{"q"}, "additionalProperties": false},
		{"type": "object"},
		{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "text"}}},
		{"type": "array"},
		{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": 1.5}}},
		{"type": "object", "required": "q"},
	}
	s, err := structpb.NewStruct(choices[g.intn(len(choices))])
	if err != nil {
		panic(err)
	}
	return s
}

func (g gen) agent(depth int, routed bool) *agentplanev1.AgentSpec {
	a := &agentplanev1.AgentSpec{
		ApiVersion: g.pick("qar/v1", "qar/v1", "", "qar/v2"),
		Kind:       g.pick("AgentSpec", "AgentSpec", "", "Bogus", "GraphSpec"),
		Name:       g.optString("a", "release notes"),
		Model:      g.pick("gpt-4.1", "", " "),
	}
	if routed && a.Kind != KindAgent {
		if a.Kind == KindGraph {
			a.Kind = KindAgent
		}
		a.Model = "routing-needs-a-field"
	}
	switch g.intn(4) {
	case 0:
		a.Instructions = &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: g.pick("Do it.", "", " \n")}}
	case 1:
		a.Instructions = &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Preset{Preset: &agentplanev1.InstructionsPreset{
			Preset: g.pick("qodo-default", "nope", ""), Append: g.optString("more"),
		}}}
	}
	for range g.count(4) {
		fn := &agentplanev1.FunctionDef{Name: g.pick("search", "search", "verdict", "bad name", "", "a.b-c_d")}
		if g.chance(0.8) {
			fn.Parameters = g.schema()
		}
		if g.chance(0.5) {
			fn.Strict = proto.Bool(g.chance(0.5))
		}
		if g.chance(0.3) {
			fn.Annotations = &agentplanev1.McpToolAnnotations{ReadOnlyHint: proto.Bool(true), Title: g.optString("t")}
		}
		t := &agentplanev1.FunctionTool{Type: g.pick("function", "function", "", "retrieval")}
		if g.chance(0.9) {
			t.Function = fn
		}
		a.Tools = append(a.Tools, t)
	}
	for range g.count(3) {
		a.ExcludedTools = append(a.ExcludedTools, g.pick("search", "shell", "shell", ""))
	}
	if g.chance(0.3) {
		a.OutputSchema = &agentplanev1.OutputSchemaSpec{}
		if g.chance(0.8) {
			a.OutputSchema.JsonSchema = &agentplanev1.JsonSchemaSpec{Name: g.pick("out", ""), Schema: g.schema(), Strict: g.optBool()}
		}
	}
	if g.chance(0.2) {
		a.DepsSchema = &agentplanev1.JsonSchemaSpec{Name: g.pick("deps", ""), Strict: g.optBool()}
		if g.chance(0.7) {
			a.DepsSchema.Schema = g.schema()
		}
	}
	for range g.count(3) {
		a.Skills = append(a.Skills, &agentplanev1.SkillRef{
			Vendor: g.optString("qodo", "acme", ""), Name: g.pick("lint", "lint", ""), Version: g.optString("*", "^1.2", "latest", ""),
		})
	}
	if depth < 2 {
		for range g.count(3) {
			s := &agentplanev1.SpawnableAgentRef{Name: g.pick("helper", "helper", "", "other")}
			switch g.intn(4) {
			case 0:
				s.AgentId = proto.String(g.pick("reviewer", "ghost", ""))
			case 1:
				s.Spec = g.agent(depth+1, false)
				if g.chance(0.2) {
					s.Spec.AutoPauseOnTurnEnd = proto.Bool(true)
				}
			case 2:
				s.AgentId = proto.String("reviewer")
				s.Spec = g.agent(depth+1, false)
			}
			a.SpawnableAgents = append(a.SpawnableAgents, s)
		}
	}
	switch g.intn(5) {
	case 0:
		a.CustomCode = structpb.NewNullValue()
	case 1:
		a.CustomCode = structpb.NewStringValue("print(1)")
	}
	if g.chance(0.4) {
		a.ContentTrust = g.trust()
	}
	a.UseManagedTools = g.optBool()
	a.AutoPauseOnTurnEnd = g.optBool()
	return a
}

func (g gen) optBool() *bool {
	if g.chance(0.5) {
		return nil
	}
	return proto.Bool(g.chance(0.5))
}

func (g gen) trust() *agentplanev1.ContentTrustPolicy {
	return &agentplanev1.ContentTrustPolicy{
		EvaluatorRationalePolicy: g.optString("trusted", "untrusted", "weird"),
		HitlReasonPolicy:         g.optString("untrusted", ""),
		ToolOutputPolicy:         g.optString("trusted"),
		BulletinPostPolicy:       g.optString("nope"),
		MaxUntrustedBytes:        g.optInt(4096, 0, -1),
		MaxTrustedBytes:          g.optInt(1),
	}
}

var nodeNames = []string{"lead", "writer", "critic", "a/b", "x~y", "w", ""}

func (g gen) graph(depth int, routed bool) *agentplanev1.GraphSpec {
	gs := &agentplanev1.GraphSpec{
		ApiVersion: g.pick("qar/v1", "qar/v1", "", "qar/v2"),
		Kind:       g.pick("GraphSpec", "GraphSpec", "", "Bogus"),
		Name:       g.optString("g"),
		Entry:      g.pick("lead", "lead", "writer", "nobody", ""),
		Agents:     map[string]*agentplanev1.GraphAgent{},
	}
	if routed && gs.Kind != KindGraph && gs.Entry == "" {
		gs.Entry = "lead" // a document without kind GraphSpec routes on a graph key
	}
	for range 1 + g.count(4) {
		n := &agentplanev1.GraphAgent{Role: g.pick("supervisor", "collaborator", "evaluator", "", "boss"), Hitl: g.optString("enabled", "ask"), AutoPauseOnTurnEnd: g.optBool()}
		switch k := g.intn(5); {
		case k == 0:
			n.Spec = &agentplanev1.NodeSpec{Spec: &agentplanev1.NodeSpec_StaticAgent{StaticAgent: &agentplanev1.StaticAgentRef{AgentId: g.pick("reviewer", "ghost", "")}}}
		case k == 1 && depth < 4:
			n.Spec = &agentplanev1.NodeSpec{Spec: &agentplanev1.NodeSpec_Graph{Graph: g.graph(depth+1, true)}}
		case k == 2:
			// no spec
		default:
			n.Spec = &agentplanev1.NodeSpec{Spec: &agentplanev1.NodeSpec_Agent{Agent: g.agent(1, true)}}
		}
		gs.Agents[g.pick(nodeNames...)] = n
	}
	for range g.count(5) {
		e := &agentplanev1.GraphEdge{FromNode: g.pick(nodeNames...), ToNode: g.pick(nodeNames...), Kind: g.pick("handoff", "ai_tool", "evaluate", "", "call")}
		switch g.intn(6) {
		case 5:
			e.OnError = &agentplanev1.EdgeOnError{Abort: proto.Bool(g.chance(0.7))}
		case 1:
			e.OnError = &agentplanev1.EdgeOnError{RouteTo: proto.String(g.pick(nodeNames...))}
		case 2:
			e.OnError = &agentplanev1.EdgeOnError{Abort: proto.Bool(true), RouteTo: proto.String("lead")}
		case 3:
			e.OnError = &agentplanev1.EdgeOnError{}
		}
		gs.Edges = append(gs.Edges, e)
	}
	for range 1 + g.count(3) {
		t := &agentplanev1.TerminationCondition{Kind: g.pick("agent_returns", "max_steps_reached", "error_uncaught", "", "timeout")}
		if g.chance(0.6) {
			t.Agent = proto.String(g.pick(nodeNames...))
		}
		gs.Termination = append(gs.Termination, t)
	}
	if g.chance(0.6) {
		gs.Limits = &agentplanev1.GraphLimits{MaxSteps: g.optInt(10, 0), MaxDepth: g.optInt(1, 2, 3, 9, 0), PerAgentIterations: g.optInt(3, -1)}
		if g.chance(0.4) {
			b := &agentplanev1.GraphBudget{}
			if g.chance(0.8) {
				b.TotalInputTokens = proto.Int32(g.pick2(1000, 0))
			}
			if g.chance(0.8) {
				b.TotalOutputTokens = proto.Int32(100)
			}
			if g.chance(0.8) {
				b.TotalWallClockS = proto.Float64([]float64{60.5, 0, -1, 1e-9, 1e22}[g.intn(5)])
			}
			gs.Limits.Budget = b
		}
	}
	gs.HitlDefault = g.optString("disabled", "nope")
	if g.chance(0.2) {
		gs.ParentClosePolicy = structpb.NewStringValue("cascade")
	}
	if g.chance(0.3) {
		gs.ContentTrust = g.trust()
	}
	return gs
}

func (g gen) pick2(xs ...int32) int32 { return xs[g.intn(len(xs))] }

type triple struct{ rule, path, msg string }

func triples(vs []*agentplanev1.SpecViolation) []triple {
	out := make([]triple, len(vs))
	for i, v := range vs {
		out[i] = triple{v.GetRuleId(), v.GetPath(), v.GetMessage()}
	}
	return out
}

// TestTypedAndDocumentAgree is the property behind "both reach the same rules":
// for random specs, validating the typed message and validating its encoded document
// give the same errors and warnings (rule id, path and message; a document's in text
// order), and the
// document decodes back to the same message.
func TestTypedAndDocumentAgree(t *testing.T) {
	sortedTriples := func(l []*agentplanev1.SpecViolation) string {
		out := make([]string, len(l))
		for i, tr := range triples(l) {
			out[i] = fmt.Sprint(tr)
		}
		slices.Sort(out)
		return strings.Join(out, "\n")
	}
	v := NewValidator(corpusDeployment())
	const n = 400
	invalid := 0
	for i := range n {
		r := rand.New(rand.NewPCG(uint64(i), 0x5eed))
		g := gen{r: r, noise: []float64{0, 0.05, 0.2, 1}[i%4]}
		var typed Input
		var msg proto.Message
		if g.chance(0.4) {
			a := g.agent(0, true)
			typed, msg = Input{Agent: a, TenantMaxDepth: int64(g.intn(3))}, a
		} else {
			gs := g.graph(1, true)
			typed, msg = Input{Graph: gs, TenantMaxDepth: int64(g.intn(3))}, gs
		}
		doc, err := Encode(msg)
		if err != nil {
			t.Fatalf("case %d: encode: %v", i, err)
		}
		tr, err := v.Validate(typed)
		if err != nil {
			t.Fatal(err)
		}
		dr, err := v.Validate(Input{Document: doc, TenantMaxDepth: typed.TenantMaxDepth})
		if err != nil {
			t.Fatal(err)
		}
		if !tr.Valid() {
			invalid++
		}
		// The same findings; a document's are in text order, typed input's in walk order.
		if a, b := sortedTriples(tr.Errors), sortedTriples(dr.Errors); a != b {
			t.Fatalf("case %d: errors differ\ntyped:    %s\ndocument: %s\n%s", i, a, b, doc)
		}
		if a, b := sortedTriples(tr.Warnings), sortedTriples(dr.Warnings); a != b {
			t.Fatalf("case %d: warnings differ\ntyped:    %s\ndocument: %s\n%s", i, a, b, doc)
		}
		for _, l := range [][]*agentplanev1.SpecViolation{dr.Errors, dr.Warnings} {
			for j, f := range l {
				if f.GetPosition() == nil {
					t.Fatalf("case %d: document finding without a position: %v", i, f)
				}
				if p, q := l[max(j-1, 0)].GetPosition(), f.GetPosition(); p.GetLine() > q.GetLine() || (p.GetLine() == q.GetLine() && p.GetColumn() > q.GetColumn()) {
					t.Fatalf("case %d: findings not in document order: %v before %v\n%s", i, l[j-1], f, doc)
				}
			}
		}
		back := Decode(doc, agentplanev1.DocumentFormat_DOCUMENT_FORMAT_JSON, Limits{})
		var got proto.Message = back.Agent
		if back.Graph != nil {
			got = back.Graph
		}
		if !proto.Equal(got, msg) {
			t.Fatalf("case %d: Decode(Encode(x)) != x\n%s", i, doc)
		}
	}
	// The generator must exercise both sides of the property.
	t.Logf("%d of %d random specs invalid", invalid, n)
	if invalid == 0 || invalid == n {
		t.Fatalf("%d of %d random specs invalid; the generator is not mixing valid and invalid specs", invalid, n)
	}
}
