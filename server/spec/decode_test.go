package spec

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/goccy/go-yaml/lexer"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

var (
	formatJSON = agentplanev1.DocumentFormat_DOCUMENT_FORMAT_JSON
	formatYAML = agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML
)

func TestDetectFormat(t *testing.T) {
	tests := map[string]agentplanev1.DocumentFormat{
		`{"a": 1}`:           formatJSON,
		"\n\t  {}":           formatJSON,
		"\xef\xbb\xbf{}":     formatJSON,
		"apiVersion: qar/v1": formatYAML,
		"- {}":               formatYAML,
		"":                   formatYAML,
	}
	for in, want := range tests {
		if got := DetectFormat([]byte(in)); got != want {
			t.Errorf("DetectFormat(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestPositions checks that the same document gives the same positions as JSON and
// as YAML, that columns count characters, and that a missing value is located at
// the nearest ancestor present.
func TestPositions(t *testing.T) {
	jsonDoc := "{\"apiVersion\": \"qar/v1\",\n \"kind\": \"GraphSpec\",\n \"name\": \"日本\", \"entry\": \"x\",\n \"agents\": {\"a/b\": {\"role\": \"supervisor\"}}}"
	yamlDoc := "apiVersion: qar/v1\nkind: GraphSpec\nname: 日本\nentry: x\nagents:\n  a/b:\n    role: supervisor\n"
	tests := []struct {
		doc    string
		format agentplanev1.DocumentFormat
		ptr    string
		line   int
		col    int
	}{
		{jsonDoc, formatJSON, "", 1, 1},
		{jsonDoc, formatJSON, "/kind", 2, 2},
		{jsonDoc, formatJSON, "/entry", 3, 16},
		{jsonDoc, formatJSON, "/agents/a~1b", 4, 13},
		{jsonDoc, formatJSON, "/agents/a~1b/role", 4, 21},
		{jsonDoc, formatJSON, "/agents/a~1b/spec", 4, 13},
		{jsonDoc, formatJSON, "/termination/0/kind", 1, 1},
		{yamlDoc, formatYAML, "/kind", 2, 1},
		{yamlDoc, formatYAML, "/entry", 4, 1},
		{yamlDoc, formatYAML, "/agents/a~1b", 6, 3},
		{yamlDoc, formatYAML, "/agents/a~1b/role", 7, 5},
		{yamlDoc, formatYAML, "/agents/a~1b/role/x", 7, 5},
	}
	for _, tt := range tests {
		d := Decode([]byte(tt.doc), tt.format, Limits{})
		line, col, ok := d.Position(tt.ptr)
		if !ok || line != tt.line || col != tt.col {
			t.Errorf("%v %q: got %d:%d (%v), want %d:%d", tt.format, tt.ptr, line, col, ok, tt.line, tt.col)
		}
	}
	if _, _, ok := Decode([]byte(jsonDoc), formatJSON, Limits{}).Position("no-slash"); ok {
		t.Error("a string that is not a pointer was located")
	}
}

// TestNodeOrder: graph nodes keep document order, which the walker follows.
func TestNodeOrder(t *testing.T) {
	d := Decode([]byte("apiVersion: qar/v1\nkind: GraphSpec\nagents:\n  zeta: {}\n  alpha: {}\n  mid: {}\n"), formatYAML, Limits{})
	got := strings.Join(d.nodeOrder(d.Graph), ",")
	if got != "zeta,alpha,mid" {
		t.Fatalf("node order %s", got)
	}
}

func TestDecodeLimits(t *testing.T) {
	big := `{"apiVersion": "qar/v1", "instructions": "` + strings.Repeat("x", 200) + `"}`
	tests := []struct {
		name string
		doc  string
		lim  Limits
		rule string
	}{
		{"json over size", big, Limits{MaxDocumentBytes: 100}, RuleDocTooLarge},
		{"yaml over size", "a: " + strings.Repeat("x", 200), Limits{MaxDocumentBytes: 100}, RuleDocTooLarge},
		{"json too deep", strings.Repeat("[", 10) + strings.Repeat("]", 10), Limits{MaxNesting: 5}, RuleDocTooDeep},
		{"yaml flow too deep", strings.Repeat("[", 10) + strings.Repeat("]", 10), Limits{MaxNesting: 5}, RuleDocTooDeep},
		{"yaml block too deep", "- - - - - - - - - - x\n", Limits{MaxNesting: 5}, RuleDocTooDeep},
		{"yaml pathological depth", strings.Repeat("[", 100000), Limits{MaxNesting: 64, MaxDocumentBytes: 1 << 20, MaxValues: 1 << 20}, RuleDocTooDeep},
		{"json pathological depth", strings.Repeat("[", 100000), Limits{MaxNesting: 64, MaxDocumentBytes: 1 << 20, MaxValues: 1 << 20}, RuleDocTooDeep},
		{"yaml alias expansion", "a: &a [1, 1, 1, 1]\nb: &b [*a, *a, *a, *a]\nc: [*b, *b, *b, *b]\n", Limits{MaxValues: 60}, RuleDocTooLarge},
		{"yaml alias depth", "a: &a [[[[1]]]]\nb: [[*a]]\n", Limits{MaxNesting: 6}, RuleDocTooDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			format := formatJSON
			if strings.HasPrefix(tt.name, "yaml") {
				format = formatYAML
			}
			d := Decode([]byte(tt.doc), format, tt.lim)
			vs := d.Violations()
			if len(vs) != 1 || vs[0].GetRuleId() != tt.rule || d.Agent != nil || d.Graph != nil {
				t.Fatalf("got %v, want one %s and no spec", vs, tt.rule)
			}
		})
	}
}

// TestYAMLControlCharacters: a raw control character is a syntax error at its
// place, in a quoted string or a plain one; escaped, it is a string like any other.
func TestYAMLControlCharacters(t *testing.T) {
	for _, c := range []string{"\x00", "\x01", "\x7f", "\u0080", "\ufffe"} {
		for _, doc := range []string{
			"apiVersion: qar/v1\nkind: AgentSpec\nmodel: m\ninstructions: \"a" + c + "b\"\n",
			"apiVersion: qar/v1\nkind: AgentSpec\nmodel: m\ninstructions: a" + c + "b\n",
		} {
			vs := Decode([]byte(doc), formatYAML, Limits{}).Violations()
			if len(vs) != 1 || vs[0].GetRuleId() != RuleDocSyntax || vs[0].GetPosition().GetLine() != 4 || !strings.Contains(vs[0].GetMessage(), "control character") {
				t.Errorf("%q: got %v, want one DOC-SYNTAX on line 4", doc, vs)
			}
		}
	}
	d := Decode([]byte("apiVersion: qar/v1\nkind: AgentSpec\nmodel: m\ninstructions: \"a\\0b\tc\"\n"), formatYAML, Limits{})
	if vs := d.Violations(); len(vs) != 0 || d.Agent.GetInstructions().GetText() != "a\x00b\tc" {
		t.Fatalf("escaped: %v %q", vs, d.Agent.GetInstructions().GetText())
	}
}

// TestDecodeValueBudget: a document of the default size limit that is all structure
// (the YAML amplification case: a flow list of one-letter scalars) is refused as
// DOC-TOO-LARGE from a scan, before a lexer or parser builds anything for it.
func TestDecodeValueBudget(t *testing.T) {
	fill := func(head, item, tail string) []byte {
		var b strings.Builder
		b.WriteString(head)
		for b.Len() < DefaultMaxDocumentBytes-len(item)-len(tail) {
			b.WriteString(item)
		}
		b.WriteString(tail)
		return []byte(b.String())
	}
	yamlHead := "apiVersion: qar/v1\nkind: AgentSpec\nmetadata:"
	tests := []struct {
		name   string
		doc    []byte
		format agentplanev1.DocumentFormat
	}{
		{"yaml flow list", fill(yamlHead+" [", "a,", "a]\n"), formatYAML},
		{"yaml block list", fill(yamlHead+"\n", "- a\n", ""), formatYAML},
		{"yaml flow map", fill(yamlHead+" {", "a: b, ", "a: b}\n"), formatYAML},
		{"json array", fill(`{"apiVersion": "qar/v1", "metadata": [`, "1,", "1]}"), formatJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			d := Decode(tt.doc, tt.format, Limits{})
			runtime.ReadMemStats(&after)
			vs := d.Violations()
			if len(vs) != 1 || vs[0].GetRuleId() != RuleDocTooLarge || d.Agent != nil || d.Graph != nil {
				t.Fatalf("got %v, want one %s and no spec", vs, RuleDocTooLarge)
			}
			if msg := vs[0].GetMessage(); !strings.Contains(msg, "over this deployment's limit of 16384 values") {
				t.Errorf("message %q does not name the value limit", msg)
			}
			// The refusal costs about a copy of the input, not a tree: the lexer alone
			// allocates over 250 MB for the flow list.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
				t.Errorf("refusing the document allocated %d MiB", alloc>>20)
			}
		})
	}
	// Prose is not structure: a document of the size limit that is nearly all
	// instructions text (a block scalar with commas, colons, dashes and short lines)
	// is decoded.
	prose := fill("apiVersion: qar/v1\nkind: AgentSpec\nmodel: m\ninstructions: |\n", "  Check the order and the customer's history, then reply politely: be brief.\n", "")
	if vs := Decode(prose, formatYAML, Limits{}).Violations(); len(vs) != 0 {
		t.Fatalf("a %d-byte prose document: %v", len(prose), vs)
	}
	// Just under the budget is decoded: the bound is not a guess that refuses
	// ordinary documents.
	var b strings.Builder
	b.WriteString(yamlHead + " [")
	for range 15000 {
		b.WriteString("a,")
	}
	b.WriteString("a]\n")
	if vs := Decode([]byte(b.String()), formatYAML, Limits{}).Violations(); len(vs) != 1 || vs[0].GetRuleId() != RuleDocUnknownKey {
		t.Fatalf("a 15001-item list: got %v, want only the unknown key metadata", vs)
	}
}

// FuzzYAMLTokenBound: the scan that guards the lexer never counts fewer tokens than
// the lexer makes.
func FuzzYAMLTokenBound(f *testing.F) {
	addSeeds(f, func(d []byte) { f.Add(d) })
	for _, s := range []string{"a: b\n", "[a, b, {c: d}]", "- a\n- b\n", "'a'\"b\"", "a: |\n  x\n  y\n", "--- a\n...\n", "? a\n: b\n", "!t &x a", "*x", "a #c\n", "%YAML 1.2\n---\na"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		if n, bound := len(lexer.Tokenize(string(data))), yamlTokenBound(data); n > bound {
			t.Fatalf("%q: the lexer made %d tokens, the bound is %d", data, n, bound)
		}
	})
}

// TestDuplicateKeysEverywhere: a repeated key is reported in any object, and the
// first value is kept.
func TestDuplicateKeysEverywhere(t *testing.T) {
	doc := `{"apiVersion": "qar/v1", "kind": "AgentSpec", "model": "first", "model": "second",
	"skills": [{"name": "a", "config": {"k": 1, "k": 2}}]}`
	d := Decode([]byte(doc), formatJSON, Limits{})
	var got []string
	for _, v := range d.Violations() {
		got = append(got, v.GetRuleId()+" "+v.GetPath())
	}
	want := "DOC-DUPLICATE-KEY /model,DOC-DUPLICATE-KEY /skills/0/config/k"
	if strings.Join(got, ",") != want {
		t.Fatalf("got %v, want %s", got, want)
	}
	if d.Agent.GetModel() != "first" || d.Agent.GetSkills()[0].GetConfig().GetFields()["k"].GetNumberValue() != 1 {
		t.Fatalf("the first value should win: %v", d.Agent)
	}
}

// TestEncodeCanonical: keys sorted at every level, unions in wire shape, numbers and
// strings in JSON syntax.
func TestEncodeCanonical(t *testing.T) {
	g := &agentplanev1.GraphSpec{
		Kind:       KindGraph,
		ApiVersion: APIVersion,
		Agents: map[string]*agentplanev1.GraphAgent{
			"z": {Role: "supervisor", Spec: &agentplanev1.NodeSpec{Spec: &agentplanev1.NodeSpec_StaticAgent{StaticAgent: &agentplanev1.StaticAgentRef{}}}},
			"a": {Role: "collaborator", Spec: &agentplanev1.NodeSpec{Spec: &agentplanev1.NodeSpec_Agent{Agent: &agentplanev1.AgentSpec{
				Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Preset{Preset: &agentplanev1.InstructionsPreset{Preset: "qodo-default"}}},
				Model:        "m\"\n\x01<",
			}}}},
		},
		Limits: &agentplanev1.GraphLimits{Budget: &agentplanev1.GraphBudget{TotalWallClockS: proto.Float64(1e21), TotalInputTokens: proto.Int32(1 << 30)}},
	}
	got, err := Encode(g)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"agents":{"a":{"role":"collaborator","spec":{"instructions":{"preset":"qodo-default"},"model":"m\"\n\u0001<"}},` +
		`"z":{"role":"supervisor","spec":{"agent_id":""}}},"apiVersion":"qar/v1","kind":"GraphSpec",` +
		`"limits":{"budget":{"total_input_tokens":1073741824,"total_wall_clock_s":1e+21}}}`
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	back := Decode(got, formatJSON, Limits{})
	if len(back.Violations()) != 0 || !proto.Equal(back.Graph, g) {
		t.Fatalf("round trip: %v", back.Violations())
	}
}

func TestEncodeRefusesNonFinite(t *testing.T) {
	g := &agentplanev1.GraphSpec{Limits: &agentplanev1.GraphLimits{Budget: &agentplanev1.GraphBudget{TotalWallClockS: proto.Float64(posInf())}}}
	if _, err := Encode(g); err == nil {
		t.Fatal("encoded +Inf")
	}
}

func posInf() float64 {
	var zero float64
	return 1 / zero
}

// TestTypedRendersWireNumbersAndNames: protojson renders the typed spec's counts as
// JSON numbers (int64 would be strings, and bigint in TypeScript) and an edge's ends
// under the wire's "from" and "to", though the fields are from_node and to_node.
func TestTypedRendersWireNumbersAndNames(t *testing.T) {
	g := &agentplanev1.GraphSpec{
		ApiVersion: APIVersion, Kind: KindGraph,
		Edges: []*agentplanev1.GraphEdge{{FromNode: "a", ToNode: "b", Kind: "handoff"}},
		Limits: &agentplanev1.GraphLimits{MaxSteps: proto.Int32(5), MaxDepth: proto.Int32(2), PerAgentIterations: proto.Int32(3),
			Budget: &agentplanev1.GraphBudget{TotalInputTokens: proto.Int32(1000), TotalOutputTokens: proto.Int32(100)}},
		ContentTrust: &agentplanev1.ContentTrustPolicy{MaxUntrustedBytes: proto.Int32(4096)},
	}
	b, err := protojson.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	limits := got["limits"].(map[string]any)
	budget := limits["budget"].(map[string]any)
	for name, v := range map[string]any{"max_steps": limits["max_steps"], "max_depth": limits["max_depth"],
		"per_agent_iterations": limits["per_agent_iterations"], "total_input_tokens": budget["total_input_tokens"],
		"max_untrusted_bytes": got["content_trust"].(map[string]any)["max_untrusted_bytes"]} {
		if _, ok := v.(float64); !ok {
			t.Errorf("%s renders as %T (%v), want a JSON number", name, v, v)
		}
	}
	edge := got["edges"].([]any)[0].(map[string]any)
	if edge["from"] != "a" || edge["to"] != "b" {
		t.Errorf("edge renders as %v, want the wire's from and to", edge)
	}
	// And the rendering reads back as a document with the same values.
	doc := Decode(b, formatJSON, Limits{})
	if len(doc.Violations()) != 0 || doc.Graph.GetLimits().GetMaxSteps() != 5 || doc.Graph.GetEdges()[0].GetFromNode() != "a" {
		t.Fatalf("decoded %v: %v", doc.Graph, doc.Violations())
	}
}
