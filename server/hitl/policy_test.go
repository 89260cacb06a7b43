package hitl

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

func allowlist(tools []string, tags map[string][]string) *agentplanev1.InterruptPolicy {
	return &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Allowlist{Allowlist: toolList(tools, tags)}}
}

func denylist(tools []string, tags map[string][]string) *agentplanev1.InterruptPolicy {
	return &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Denylist{Denylist: toolList(tools, tags)}}
}

func toolList(tools []string, tags map[string][]string) *agentplanev1.ToolListPolicy {
	l := &agentplanev1.ToolListPolicy{Tools: tools}
	if tags != nil {
		l.Tags = map[string]*agentplanev1.TagList{}
		for k, v := range tags {
			l.Tags[k] = &agentplanev1.TagList{Tags: v}
		}
	}
	return l
}

func predicate(expr string) *agentplanev1.InterruptPolicy {
	return &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Predicate{Predicate: &agentplanev1.PredicatePolicy{Expression: expr}}}
}

// violations returns the BadRequest field names of a POLICY_INVALID error, failing
// the test when err is anything else.
func violations(t *testing.T, err error) []string {
	t.Helper()
	var e *apierr.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not an *apierr.Error", err)
	}
	if e.Code != codes.InvalidArgument || e.Reason != apierr.ReasonPolicyInvalid {
		t.Fatalf("error %v: want InvalidArgument/%s", err, apierr.ReasonPolicyInvalid)
	}
	var fields []string
	for _, d := range e.Details {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fields = append(fields, v.GetField())
			}
		}
	}
	return fields
}

func TestCompilePolicyErrors(t *testing.T) {
	tests := []struct {
		name   string
		policy *agentplanev1.InterruptPolicy
		fields []string
		msg    string // substring of the error message
	}{
		{"no kind", &agentplanev1.InterruptPolicy{}, []string{"interrupt_policy"}, "exactly one"},
		{"empty expression", predicate("  "), []string{exprField}, "empty"},
		{"syntax error at its column", predicate("tool_name == "), []string{exprField + ":1:14"}, "Syntax error"},
		{"syntax error on line 2", predicate("tool_name == 'x' &&\n  (trip_index >"), []string{exprField + ":2:16"}, "Syntax error"},
		{"undeclared variable", predicate("tool == 'rm'"), []string{exprField + ":1:1"}, "undeclared reference to 'tool'"},
		{"type error", predicate("trip_index + 'a' > 0"), []string{exprField + ":1:12"}, "no matching overload"},
		{"int result", predicate("trip_index"), []string{exprField + ":1:1"}, "has type int"},
		{"dyn result", predicate("args.dangerous"), []string{exprField + ":1:1"}, "has type dyn"},
		{"list(dyn) result", predicate("[args.kind]"), []string{exprField + ":1:1"}, "list(dyn)"},
		{"too long", predicate("true || " + strings.Repeat("true || ", MaxExpressionBytes/8) + "true"), []string{exprField}, "bytes"},
		{"allowlist empty name", allowlist([]string{"a", ""}, nil), []string{"interrupt_policy.allowlist.tools[1]"}, "empty"},
		{"allowlist long name", allowlist([]string{strings.Repeat("x", MaxToolNameBytes+1)}, nil), []string{"interrupt_policy.allowlist.tools[0]"}, "bytes"},
		{"allowlist tags for an unlisted tool", allowlist([]string{"a"}, map[string][]string{"b": {"x"}, "a": {"ok"}}),
			[]string{`interrupt_policy.allowlist.tags["b"]`}, "never apply"},
		{"denylist tags for a listed tool", denylist([]string{"read"}, map[string][]string{"read": {"x"}}),
			[]string{`interrupt_policy.denylist.tags["read"]`}, "never apply"},
		{"empty tag", allowlist([]string{"a"}, map[string][]string{"a": {"x", ""}}), []string{`interrupt_policy.allowlist.tags["a"].tags[1]`}, "empty"},
		{"every problem named", allowlist([]string{"", "a", ""}, map[string][]string{"zz": {"x"}}),
			[]string{"interrupt_policy.allowlist.tools[0]", "interrupt_policy.allowlist.tools[2]", `interrupt_policy.allowlist.tags["zz"]`}, "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := CompilePolicy(tt.policy)
			if err == nil {
				t.Fatalf("CompilePolicy = %v, want an error", p)
			}
			if got := violations(t, err); !slices.Equal(got, tt.fields) {
				t.Errorf("violations %q, want %q (error: %v)", got, tt.fields, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not mention %q", err, tt.msg)
			}
		})
	}
}

func TestCompilePolicyAccepts(t *testing.T) {
	for _, p := range []*agentplanev1.InterruptPolicy{
		nil,
		allowlist(nil, nil), // gates nothing by policy, but opts a plain agent into HITL
		allowlist([]string{"rm", "rm"}, map[string][]string{"rm": {"destructive", "destructive"}}),
		denylist([]string{"read"}, map[string][]string{"write": {"io"}}),
		predicate("true"),
		predicate("tool_name.startsWith('fs.') && has(args.path) ? ['fs', string(args.path)] : []"),
		predicate("tool_description.lowerAscii().contains('delete') || trip_index > 3 || session_id == 's' || agent_name == 'x'"),
	} {
		if _, err := CompilePolicy(p); err != nil {
			t.Errorf("CompilePolicy(%v): %v", p, err)
		}
	}
}

func TestEvaluate(t *testing.T) {
	bigList := make([]any, 1000)
	for i := range bigList {
		bigList[i] = float64(i)
	}
	base := PolicyContext{ToolName: "fs.delete", ToolDescription: "Deletes a file", AgentName: "worker", TripIndex: 2, SessionID: "sess-1"}
	with := func(mut func(*PolicyContext)) PolicyContext { c := base; mut(&c); return c }
	tests := []struct {
		name   string
		policy *agentplanev1.InterruptPolicy
		ctx    PolicyContext
		gate   bool
		tags   []string
		reason string
		detail string // substring of Detail
	}{
		{"no policy", nil, base, false, nil, ReasonNoPolicy, ""},
		{"allowlist listed", allowlist([]string{"fs.delete"}, map[string][]string{"fs.delete": {"destructive"}}), base, true, []string{"destructive"}, ReasonAllowlist, ""},
		{"allowlist not listed", allowlist([]string{"fs.write"}, nil), base, false, nil, ReasonNotMatched, ""},
		{"empty allowlist", allowlist(nil, nil), base, false, nil, ReasonNotMatched, ""},
		{"denylist listed bypasses", denylist([]string{"fs.delete"}, nil), base, false, nil, ReasonNotMatched, ""},
		{"denylist other gated with tags", denylist([]string{"fs.read"}, map[string][]string{"fs.delete": {"io", "danger"}}), base, true, []string{"io", "danger"}, ReasonDenylist, ""},
		{"predicate true", predicate("tool_name == 'fs.delete'"), base, true, nil, ReasonPredicate, ""},
		{"predicate false", predicate("tool_name == 'fs.read'"), base, false, nil, ReasonNotMatched, ""},
		{"predicate on every variable", predicate("tool_description.contains('Deletes') && agent_name == 'worker' && trip_index == 2 && session_id == 'sess-1' && args.force"),
			with(func(c *PolicyContext) { c.Args = mustValue(t, map[string]any{"force": true}) }), true, nil, ReasonPredicate, ""},
		{"predicate numeric args compare with ints", predicate("args.amount > 100"),
			with(func(c *PolicyContext) { c.Args = mustValue(t, map[string]any{"amount": 150.5}) }), true, nil, ReasonPredicate, ""},
		{"predicate tags", predicate("['money', 'money', '', 'finance']"), base, true, []string{"money", "finance"}, ReasonPredicate, ""},
		{"predicate empty list allows", predicate("tool_name == 'x' ? ['t'] : []"), base, false, nil, ReasonNotMatched, ""},
		{"predicate tags capped", predicate(manyTags(MaxTags + 8)), base, true, nil, ReasonPredicate, ""},
		{"missing key fails closed", predicate("args.force == true"), with(func(c *PolicyContext) { c.Args = mustValue(t, map[string]any{}) }), true, nil, ReasonPredicateError, "no such key"},
		{"nil args are null", predicate("args == null"), base, true, nil, ReasonPredicate, ""},
		{"runtime type error fails closed", predicate("args.n + 1 > 0"), with(func(c *PolicyContext) { c.Args = mustValue(t, map[string]any{"n": "x"}) }), true, nil, ReasonPredicateError, "no such overload"},
		{"cost limit fails closed", predicate("args.items.all(x, args.items.all(y, x + y >= 0.0))"),
			with(func(c *PolicyContext) { c.Args = mustValue(t, map[string]any{"items": bigList}) }), true, nil, ReasonPredicateError, "cost limit"},
		{"predicate on malformed args", predicate("!args_valid || arguments_json.contains('rm -rf')"),
			with(func(c *PolicyContext) { c.ArgumentsJSON, c.ArgsValid = `{"cmd": "rm -rf`, false }), true, nil, ReasonPredicate, ""},
		{"predicate on valid args text", predicate("!args_valid"),
			with(func(c *PolicyContext) {
				c.ArgumentsJSON, c.ArgsValid, c.Args = `{}`, true, mustValue(t, map[string]any{})
			}), false, nil, ReasonNotMatched, ""},
		{"division by zero fails closed", predicate("1 / (trip_index - 2) > 0"), base, true, nil, ReasonPredicateError, "division by zero"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := CompilePolicy(tt.policy)
			if err != nil {
				t.Fatal(err)
			}
			m := p.Evaluate(context.Background(), tt.ctx)
			if m.Gate != tt.gate || m.Reason != tt.reason {
				t.Fatalf("Evaluate = %+v, want gate=%v reason=%s", m, tt.gate, tt.reason)
			}
			if tt.name == "predicate tags capped" {
				if len(m.Tags) != MaxTags {
					t.Errorf("%d tags, want %d", len(m.Tags), MaxTags)
				}
			} else if !slices.Equal(m.Tags, tt.tags) {
				t.Errorf("tags %q, want %q", m.Tags, tt.tags)
			}
			if !strings.Contains(m.Detail, tt.detail) {
				t.Errorf("detail %q does not mention %q", m.Detail, tt.detail)
			}
		})
	}
}

func manyTags(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = "'t" + strings.Repeat("x", i) + "'"
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func TestEvaluateCanceledContextFailsClosed(t *testing.T) {
	p, err := CompilePolicy(predicate("args.items.exists(x, x < 0.0)"))
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 5000)
	for i := range items {
		items[i] = float64(i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := p.Evaluate(ctx, PolicyContext{ToolName: "t", Args: mustValue(t, map[string]any{"items": items})})
	if !m.Gate || m.Reason != ReasonPredicateError {
		t.Errorf("Evaluate with a canceled context = %+v, want gated with %s", m, ReasonPredicateError)
	}
}

func TestCompilerCaches(t *testing.T) {
	c := NewCompiler(2)
	a1, err := c.Compile(predicate("tool_name == 'a'"))
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := c.Compile(predicate("tool_name == 'a'")) // equal, not the same message
	if a1 != a2 {
		t.Error("the same policy was compiled twice")
	}
	if _, err := c.Compile(predicate("tool_name ==")); err == nil {
		t.Error("a bad policy compiled")
	}
	if c.Len() != 1 {
		t.Errorf("cache holds %d policies after a failure, want 1 (errors are not cached)", c.Len())
	}
	b, _ := c.Compile(allowlist([]string{"b"}, nil))
	_, _ = c.Compile(predicate("tool_name == 'a'")) // a is now the most recent
	_, _ = c.Compile(denylist([]string{"c"}, nil))  // evicts b
	if c.Len() != 2 {
		t.Fatalf("cache holds %d policies, want 2", c.Len())
	}
	if a3, _ := c.Compile(predicate("tool_name == 'a'")); a3 != a1 {
		t.Error("the most recently used policy was evicted")
	}
	if b2, _ := c.Compile(allowlist([]string{"b"}, nil)); b2 == b {
		t.Error("the least recently used policy was not evicted")
	}
	if p, err := c.Compile(nil); err != nil || p.Kind() != KindNone {
		t.Errorf("Compile(nil) = %v, %v; want a policy of kind none", p, err)
	}
}

// benchPolicies are the policy kinds the gate benchmarks compare.
func benchPolicies() []struct {
	name   string
	policy *agentplanev1.InterruptPolicy
} {
	tools := make([]string, 50)
	for i := range tools {
		tools[i] = "tool_" + strings.Repeat("x", i%7) + string(rune('a'+i%26))
	}
	tools = append(tools, "fs.delete")
	return []struct {
		name   string
		policy *agentplanev1.InterruptPolicy
	}{
		{"none", nil},
		{"allowlist", allowlist(tools, map[string][]string{"fs.delete": {"destructive"}})},
		{"denylist", denylist(tools[:50], map[string][]string{"fs.delete": {"destructive"}})},
		{"predicate_bool", predicate("tool_name.startsWith('fs.') && has(args.path) && args.path.startsWith('/etc')")},
		{"predicate_tags", predicate("tool_name.startsWith('fs.') ? ['fs', agent_name] + (trip_index > 3 ? ['late'] : []) : []")},
	}
}

func BenchmarkEvaluate(b *testing.B) {
	pc := PolicyContext{ToolName: "fs.delete", AgentName: "worker", TripIndex: 1,
		Args: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"path": structpb.NewStringValue("/etc/passwd")}})}
	for _, bp := range benchPolicies() {
		p, err := CompilePolicy(bp.policy)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bp.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				p.Evaluate(ctx, pc)
			}
		})
	}
}

func BenchmarkCompilePredicate(b *testing.B) {
	p := predicate("tool_name.startsWith('fs.') && has(args.path) && args.path.startsWith('/etc')")
	b.Run("uncached", func(b *testing.B) {
		for b.Loop() {
			if _, err := CompilePolicy(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		c := NewCompiler(0)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Compile(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzCompilePredicate checks that any expression either compiles or is refused with
// POLICY_INVALID, and that a compiled one evaluates without panicking, gating when it
// cannot answer.
func FuzzCompilePredicate(f *testing.F) {
	for _, s := range []string{"true", "tool_name == 'x'", "args.a.b.c > 1", "[string(args.x)]", "tool_name ==", "1/0 == 1",
		"args.items.all(x, args.items.all(y, true))", "size(tool_description) > trip_index"} {
		f.Add(s)
	}
	args := structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
		"a": structpb.NewNumberValue(1), "items": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewNumberValue(2)}}),
	}})
	f.Fuzz(func(t *testing.T, expr string) {
		p, err := CompilePolicy(predicate(expr))
		if err != nil {
			if apierr.ReasonOf(err) != apierr.ReasonPolicyInvalid {
				t.Fatalf("refusal %v has reason %q", err, apierr.ReasonOf(err))
			}
			return
		}
		m := p.Evaluate(context.Background(), PolicyContext{ToolName: "t", Args: args})
		if m.Reason == ReasonPredicateError && !m.Gate {
			t.Fatalf("an evaluation error did not gate: %+v", m)
		}
	})
}
