package spec

import (
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

func TestCheckVerdict(t *testing.T) {
	tests := []struct {
		name string
		v    *agentplanev1.VerdictResult
		want []string
	}{
		{"pass", &agentplanev1.VerdictResult{Verdict: "pass"}, nil},
		{"pass with confidence", &agentplanev1.VerdictResult{Verdict: "pass", Confidence: proto.Float64(1)}, nil},
		{"fail with rationale", &agentplanev1.VerdictResult{Verdict: "fail", Confidence: proto.Float64(0), Rationale: proto.String("wrong file")}, nil},
		{"confidence over 1", &agentplanev1.VerdictResult{Verdict: "pass", Confidence: proto.Float64(1.01)}, []string{"D11-R12 /args/confidence"}},
		{"confidence negative", &agentplanev1.VerdictResult{Verdict: "pass", Confidence: proto.Float64(-0.1)}, []string{"D11-R12 /args/confidence"}},
		{"confidence NaN", &agentplanev1.VerdictResult{Verdict: "pass", Confidence: proto.Float64(math.NaN())}, []string{"D11-R12 /args/confidence"}},
		{"unknown verdict", &agentplanev1.VerdictResult{Verdict: "approved"}, []string{"D11-R13 /args/verdict", "D11-R14 /args/rationale"}},
		{"no verdict", &agentplanev1.VerdictResult{}, []string{"D11-R13 /args/verdict"}},
		{"needs_revision without rationale", &agentplanev1.VerdictResult{Verdict: "needs_revision", Rationale: proto.String(" ")}, []string{"D11-R14 /args/rationale"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ids(CheckVerdict(tt.v, "/args")); !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCheckAllocation(t *testing.T) {
	remaining := Budget{InputTokens: 1000, OutputTokens: 100, WallClockS: 60, MaxSteps: 10}
	tests := []struct {
		name string
		a    *agentplanev1.SubgraphAllocation
		want []string
	}{
		{"empty takes defaults", &agentplanev1.SubgraphAllocation{}, nil},
		{"all within", &agentplanev1.SubgraphAllocation{InputTokens: proto.Int32(1000), OutputTokens: proto.Int32(1), WallClockS: proto.Float64(60), MaxSteps: proto.Int32(10)}, nil},
		{"over", &agentplanev1.SubgraphAllocation{InputTokens: proto.Int32(1001), WallClockS: proto.Float64(60.5), MaxSteps: proto.Int32(11)},
			[]string{"D13-R3 /allocation/input_tokens", "D13-R3 /allocation/max_steps", "D13-R3 /allocation/wall_clock_s"}},
		{"not positive", &agentplanev1.SubgraphAllocation{OutputTokens: proto.Int32(0), WallClockS: proto.Float64(math.Inf(1))},
			[]string{"D13-R7 /allocation/output_tokens", "D13-R7 /allocation/wall_clock_s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ids(CheckAllocation(tt.a, remaining, "/allocation")); !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestVerdictToolIsCleanAndStrict: the verdict tool's schema passes the rules a
// declared tool is held to (strict mode included), and it accepts exactly the
// verdicts it should.
func TestVerdictToolIsCleanAndStrict(t *testing.T) {
	a := minimalAgent()
	tool := VerdictTool()
	tool.Function.Name = "verdict_copy" // the real name is reserved for the control plane
	a.Tools = []*agentplanev1.FunctionTool{tool}
	res, err := NewValidator(Deployment{}).Validate(Input{Agent: a})
	if err != nil || !res.Valid() {
		t.Fatalf("verdict tool does not pass the tool rules: %v %v", err, res.Errors)
	}
	if VerdictTool().GetFunction().GetName() != VerdictToolName {
		t.Fatal("VerdictTool has the wrong name")
	}
	args := func(m map[string]any) *structpb.Value {
		v, err := structpb.NewValue(m)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	ok := args(map[string]any{"verdict": "fail", "confidence": 0.4, "rationale": "missing tests",
		"resolved": []any{map[string]any{"id": "o1", "how": "withdrawn", "reason": "out of scope"}}, "raised": []any{"add tests"}})
	if errs := ValidateArgs(VerdictTool().GetFunction().GetParameters(), ok); errs != nil {
		t.Fatalf("good verdict refused: %v", errs)
	}
	bad := args(map[string]any{"verdict": "maybe", "confidence": 2, "rationale": nil, "resolved": []any{}, "raised": []any{}})
	errs := ValidateArgs(VerdictTool().GetFunction().GetParameters(), bad)
	if len(errs) != 2 || !strings.HasPrefix(errs[0], "/confidence") && !strings.HasPrefix(errs[1], "/confidence") {
		t.Fatalf("bad verdict: %v", errs)
	}
}

func TestValidateArgs(t *testing.T) {
	schema, _ := structpb.NewStruct(map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"n": map[string]any{"type": "integer", "maximum": 5}},
		"required":             []any{"n"},
		"additionalProperties": false,
	})
	val := func(x any) *structpb.Value {
		v, err := structpb.NewValue(x)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name   string
		schema *structpb.Struct
		args   *structpb.Value
		want   []string // prefixes
	}{
		{"valid", schema, val(map[string]any{"n": 3}), nil},
		{"over maximum", schema, val(map[string]any{"n": 6}), []string{"/n: "}},
		{"not an integer", schema, val(map[string]any{"n": 1.5}), []string{"/n: "}},
		{"extra and missing", schema, val(map[string]any{"m": 1}), []string{"/: ", "/: "}},
		{"not an object", schema, val("x"), []string{"/: "}},
		{"no schema", nil, val(map[string]any{}), []string{"schema: "}},
		{"bad schema", mustStruct(t, map[string]any{"type": 7}), val(1), []string{"schema/type: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ValidateArgs(tt.schema, tt.args)
			if len(got) != len(tt.want) {
				t.Fatalf("got %q, want prefixes %q", got, tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Fatalf("got %q, want prefixes %q", got, tt.want)
				}
			}
		})
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSchemaCacheBounded: the compiled-schema cache never holds more than its size,
// and a cached schema gives the same answer as a fresh one.
func TestSchemaCacheBounded(t *testing.T) {
	for i := range schemaCacheSize + 50 {
		s := mustStruct(t, map[string]any{"type": "object", "maxProperties": float64(i)})
		if c := schemas.compile(s); c.sch == nil {
			t.Fatalf("schema %d did not compile: %v", i, c.findings)
		}
	}
	schemas.mu.Lock()
	n, m := schemas.ll.Len(), len(schemas.items)
	schemas.mu.Unlock()
	if n > schemaCacheSize || m != n {
		t.Fatalf("cache holds %d entries (%d indexed), bound %d", n, m, schemaCacheSize)
	}
	bad := mustStruct(t, map[string]any{"type": "nope"})
	first, second := schemas.compile(bad), schemas.compile(bad)
	if first.sch != nil || len(first.findings) == 0 || first != second {
		t.Fatal("an invalid schema should be cached with its findings")
	}
}
