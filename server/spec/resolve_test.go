package spec

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

func toolNames(a *agentplanev1.AgentSpec) []string {
	var out []string
	for _, t := range a.GetTools() {
		out = append(out, t.GetFunction().GetName())
	}
	return out
}

func TestResolveGraph(t *testing.T) {
	v := NewValidator(corpusDeployment())
	doc := `apiVersion: qar/v1
kind: GraphSpec
agents:
  lead: {role: supervisor, spec: {agent_id: triager}}
  critic: {role: evaluator, spec: {agent_id: reviewer}}
  panel:
    role: evaluator
    spec:
      apiVersion: qar/v1
      kind: GraphSpec
      agents:
        chair: {role: supervisor, spec: {apiVersion: qar/v1, kind: AgentSpec, instructions: Decide., model: m}}
      entry: chair
      termination: [{kind: agent_returns, agent: chair}]
edges:
  - {from: lead, to: critic, kind: evaluate}
  - {from: lead, to: panel, kind: evaluate}
entry: lead
termination: [{kind: agent_returns, agent: lead}]
`
	res, err := v.Validate(Input{Document: []byte(doc)})
	if err != nil || !res.Valid() {
		t.Fatalf("%v %v", err, res.Errors)
	}
	before := proto.Clone(res.Graph)
	rs, err := v.Resolve(res)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(before, res.Graph) {
		t.Fatal("Resolve modified its input")
	}
	g := rs.GetGraph()
	lead := g.GetAgents()["lead"].GetSpec().GetAgent()
	if lead.GetInstructions().GetText() != "Sort incoming issues." || len(lead.GetTools()) != 0 {
		t.Fatalf("static supervisor not inlined (or given the verdict tool): %v", lead)
	}
	critic := g.GetAgents()["critic"].GetSpec().GetAgent()
	if !slices.Equal(toolNames(critic), []string{VerdictToolName}) {
		t.Fatalf("static evaluator tools: %v", toolNames(critic))
	}
	chair := g.GetAgents()["panel"].GetSpec().GetGraph().GetAgents()["chair"].GetSpec().GetAgent()
	if !slices.Equal(toolNames(chair), []string{VerdictToolName}) {
		t.Fatalf("nested evaluator's entry tools: %v", toolNames(chair))
	}
	if len(corpusDeployment().StaticAgents["reviewer"].GetTools()) != 0 {
		t.Fatal("the static table was modified")
	}
}

func TestResolveSpawnable(t *testing.T) {
	d := corpusDeployment()
	v := NewValidator(d)
	a := minimalAgent()
	a.SpawnableAgents = []*agentplanev1.SpawnableAgentRef{{Name: "t", AgentId: proto.String("triager")}}
	res, _ := v.Validate(Input{Agent: a})
	rs, err := v.Resolve(res)
	if err != nil {
		t.Fatal(err)
	}
	s := rs.GetAgent().GetSpawnableAgents()[0]
	if s.AgentId != nil || s.GetSpec().GetModel() != "gpt-4.1-mini" {
		t.Fatalf("spawnable not inlined: %v", s)
	}
	a.Model = ""
	bad, _ := v.Validate(Input{Agent: a})
	if _, err := v.Resolve(bad); !apierr.HasReason(err, apierr.ReasonSpecInvalid) {
		t.Fatalf("resolving an invalid spec: %v", err)
	}
}

func TestResolveRefusesSpawnCycle(t *testing.T) {
	self := minimalAgent()
	self.SpawnableAgents = []*agentplanev1.SpawnableAgentRef{{Name: "me", AgentId: proto.String("loop")}}
	v := NewValidator(Deployment{StaticAgents: map[string]*agentplanev1.AgentSpec{"loop": self}})
	a := minimalAgent()
	a.SpawnableAgents = []*agentplanev1.SpawnableAgentRef{{Name: "l", AgentId: proto.String("loop")}}
	res, _ := v.Validate(Input{Agent: a})
	if _, err := v.Resolve(res); !apierr.HasReason(err, apierr.ReasonSpecInvalid) {
		t.Fatalf("got %v, want a refusal", err)
	}
}

func TestLoadStaticAgents(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "apiVersion: qar/v1\nkind: AgentSpec\ninstructions: A.\nmodel: m\nspawnable_agents: [{name: b, agent_id: b}]\n")
	write("b.json", `{"apiVersion": "qar/v1", "kind": "AgentSpec", "instructions": "B.", "model": "m"}`)
	write("bad.yaml", "apiVersion: qar/v1\nkind: AgentSpec\ninstructions: x\nmodel: \"\"\n")
	write("graph.yaml", "apiVersion: qar/v1\nkind: GraphSpec\nentry: x\n")
	write("c1.yaml", "apiVersion: qar/v1\nkind: AgentSpec\ninstructions: x\nmodel: m\nspawnable_agents: [{name: n, agent_id: c2}]\n")
	write("c2.yaml", "apiVersion: qar/v1\nkind: AgentSpec\ninstructions: x\nmodel: m\nspawnable_agents: [{name: n, spec: {apiVersion: qar/v1, kind: AgentSpec, instructions: x, model: m, spawnable_agents: [{name: n, agent_id: c1}]}}]\n")

	table, err := LoadStaticAgents(map[string]string{"a": "a.yaml", "b": filepath.Join(dir, "b.json")}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if table["a"].GetInstructions().GetText() != "A." || table["b"].GetInstructions().GetText() != "B." {
		t.Fatalf("table: %v", table)
	}
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"missing file", map[string]string{"x": "nope.yaml"}, []string{`static agent "x"`, "nope.yaml"}},
		{"invalid agent", map[string]string{"bad": "bad.yaml"}, []string{"bad.yaml:4:1: D10-R6 /model"}},
		{"a graph", map[string]string{"g": "graph.yaml"}, []string{`static agent "g": is not an AgentSpec document`}},
		{"unknown spawn", map[string]string{"a": "a.yaml"}, []string{"D10-UNSUPPORTED-SPAWN /spawnable_agents/0/agent_id"}},
		{"spawn cycle", map[string]string{"c1": "c1.yaml", "c2": "c2.yaml"}, []string{"c1 -> c2 -> c1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadStaticAgents(tt.files, dir)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
