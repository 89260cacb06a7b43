package spec

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

func ids(vs []*agentplanev1.SpecViolation) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.GetRuleId() + " " + v.GetPath()
	}
	return out
}

func minimalAgent() *agentplanev1.AgentSpec {
	return &agentplanev1.AgentSpec{
		ApiVersion:   APIVersion,
		Kind:         KindAgent,
		Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "Help."}},
		Model:        "gpt-4.1",
	}
}

func TestValidateInput(t *testing.T) {
	v := NewValidator(Deployment{})
	for name, in := range map[string]Input{
		"nothing":         {},
		"agent and doc":   {Agent: minimalAgent(), Document: []byte("{}")},
		"agent and graph": {Agent: minimalAgent(), Graph: &agentplanev1.GraphSpec{}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := v.Validate(in)
			if st, _ := apierr.ToStatus(err); err == nil || st.Code() != codes.InvalidArgument {
				t.Fatalf("got %v, want InvalidArgument", err)
			}
		})
	}
}

func TestResponseShape(t *testing.T) {
	v := NewValidator(Deployment{})
	res, err := v.Validate(Input{Agent: minimalAgent()})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := protojson.Marshal(res.Response()); !strings.Contains(string(got), `"valid":true`) || strings.Contains(string(got), "errors") {
		t.Fatalf("valid response %s", got)
	}
	bad := minimalAgent()
	bad.Model = ""
	res, _ = v.Validate(Input{Agent: bad})
	got, _ := protojson.Marshal(res.Response())
	if !strings.Contains(string(got), `"valid":false`) || !strings.Contains(string(got), `"rule_id":"D10-R6"`) || !strings.Contains(string(got), `"path":"/model"`) {
		t.Fatalf("invalid response %s", got)
	}
	if res.Response().GetKind() != KindAgent {
		t.Fatal("kind missing")
	}
	if res, _ := v.Validate(Input{Document: []byte("{")}); res.Kind != "" || res.Valid() {
		t.Fatalf("syntax error: %+v", res)
	}
}

// TestDepthCaps: the effective cap is min(platform, tenant, spec) over the caps set,
// and a declared max_depth is compared with the deployment's part of it.
func TestDepthCaps(t *testing.T) {
	nested := func(levels int, maxDepth int64) *agentplanev1.GraphSpec {
		leaf := &agentplanev1.NodeSpec{Spec: &agentplanev1.NodeSpec_StaticAgent{StaticAgent: &agentplanev1.StaticAgentRef{AgentId: "reviewer"}}}
		var g *agentplanev1.GraphSpec
		for i := range levels {
			g = &agentplanev1.GraphSpec{
				ApiVersion:  APIVersion,
				Kind:        KindGraph,
				Agents:      map[string]*agentplanev1.GraphAgent{"n": {Role: "supervisor", Spec: leaf}},
				Entry:       "n",
				Termination: []*agentplanev1.TerminationCondition{{Kind: "agent_returns", Agent: proto.String("n")}},
			}
			if i == levels-1 && maxDepth > 0 {
				g.Limits = &agentplanev1.GraphLimits{MaxDepth: proto.Int32(int32(maxDepth))}
			}
			leaf = &agentplanev1.NodeSpec{Spec: &agentplanev1.NodeSpec_Graph{Graph: g}}
		}
		return g
	}
	tests := []struct {
		name     string
		platform int64
		tenant   int64
		levels   int
		maxDepth int64
		want     []string
	}{
		{"no caps", 0, 0, 6, 0, nil},
		{"platform allows", 3, 0, 3, 0, nil},
		{"platform refuses", 3, 0, 4, 0, []string{"D13-R6 /agents/n/spec/agents/n/spec/agents/n/spec"}},
		{"tenant lower", 5, 2, 3, 0, []string{"D13-R6 /agents/n/spec/agents/n/spec"}},
		{"spec lower", 5, 0, 2, 1, []string{"D13-R6 /agents/n/spec"}},
		{"declared over platform", 3, 0, 1, 4, []string{"D13-R2 /limits/max_depth"}},
		{"declared over tenant", 0, 2, 1, 3, []string{"D13-R2 /limits/max_depth"}},
		{"declared within", 3, 0, 1, 3, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := NewValidator(Deployment{PlatformMaxDepth: tt.platform, StaticAgents: ExampleDeployment().StaticAgents})
			res, err := v.Validate(Input{Graph: nested(tt.levels, tt.maxDepth), TenantMaxDepth: tt.tenant})
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(res.Errors); !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestTypedNilsDoNotPanic: hand-built messages may hold nil elements and empty
// oneofs; they are reported, never a crash.
func TestTypedNilsDoNotPanic(t *testing.T) {
	a := minimalAgent()
	a.Tools = []*agentplanev1.FunctionTool{nil}
	a.Skills = []*agentplanev1.SkillRef{nil}
	a.SpawnableAgents = []*agentplanev1.SpawnableAgentRef{nil}
	a.Instructions = &agentplanev1.Instructions{}
	g := &agentplanev1.GraphSpec{
		Agents: map[string]*agentplanev1.GraphAgent{
			"a": nil,
			"b": {Spec: &agentplanev1.NodeSpec{Spec: &agentplanev1.NodeSpec_Agent{}}},
			"c": {Spec: &agentplanev1.NodeSpec{Spec: &agentplanev1.NodeSpec_Graph{}}},
			"d": {Spec: &agentplanev1.NodeSpec{}},
		},
		Edges:       []*agentplanev1.GraphEdge{nil},
		Termination: []*agentplanev1.TerminationCondition{nil},
	}
	v := NewValidator(Deployment{})
	for _, in := range []Input{{Agent: a}, {Graph: g}} {
		res, err := v.Validate(in)
		if err != nil || res.Valid() {
			t.Fatalf("got %v, %v", res, err)
		}
	}
	if got := CheckVerdict(nil, ""); len(got) != 1 {
		t.Fatalf("nil verdict: %v", got)
	}
	if got := CheckAllocation(nil, Budget{}, ""); got != nil {
		t.Fatalf("nil allocation: %v", got)
	}
}

// TestConcurrentValidate runs one Validator from many goroutines (run with -race).
func TestConcurrentValidate(t *testing.T) {
	v := NewValidator(corpusDeployment())
	docs := [][]byte{
		[]byte(catalogue[0].example),
		[]byte("apiVersion: qar/v1\nkind: AgentSpec\ninstructions: x\nmodel: m\ntools: [{type: function, function: {name: t, parameters: {type: object}}}]\n"),
	}
	want := make([]string, len(docs))
	for i, d := range docs {
		res, _ := v.Validate(Input{Document: d})
		want[i] = fmt.Sprint(ids(res.Errors))
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				d := (g + i) % len(docs)
				res, err := v.Validate(Input{Document: docs[d]})
				if err != nil || fmt.Sprint(ids(res.Errors)) != want[d] {
					errs <- fmt.Sprintf("goroutine %d: %v %v", g, err, ids(res.Errors))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestFormatViolation(t *testing.T) {
	v := &agentplanev1.SpecViolation{RuleId: "D10-R6", Path: "/model", Message: "model is required", Position: &agentplanev1.SourcePosition{Line: 3, Column: 1}}
	if got := FormatViolation("a.yaml", v); got != "a.yaml:3:1: D10-R6 /model: model is required" {
		t.Fatal(got)
	}
	root := &agentplanev1.SpecViolation{RuleId: "DOC-TYPE", Message: "m"}
	if got := FormatViolation("", root); got != `DOC-TYPE "": m` {
		t.Fatal(got)
	}
}
