package spec

import (
	"math"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// VerdictToolSchema is the JSON Schema of the reserved verdict tool's arguments
// (docs/vocabulary.md, Verdicts): the decision, how sure the
// evaluator is, why, which open obligations it resolves and which it raises. It is
// strict-mode clean, so a model's call is held to it exactly; optional values are
// nullable rather than absent, as strict mode requires.
const VerdictToolSchema = `{
  "type": "object",
  "properties": {
    "verdict": {
      "type": "string",
      "enum": ["pass", "fail", "needs_revision"],
      "description": "The decision. pass means nothing further is asked."
    },
    "confidence": {
      "type": ["number", "null"],
      "minimum": 0,
      "maximum": 1,
      "description": "How sure the evaluator is, from 0 to 1."
    },
    "rationale": {
      "type": ["string", "null"],
      "description": "Why, in short. Required unless the verdict is pass."
    },
    "resolved": {
      "type": "array",
      "description": "Open obligations this verdict resolves, by ledger id. Ones not named stay open.",
      "items": {
        "type": "object",
        "properties": {
          "id": {"type": "string", "description": "The obligation's ledger id."},
          "how": {"type": "string", "enum": ["addressed", "withdrawn"], "description": "addressed when the work was done, withdrawn when it is dropped."},
          "reason": {"type": ["string", "null"], "description": "Why; required for a withdrawal."}
        },
        "required": ["id", "how", "reason"],
        "additionalProperties": false
      }
    },
    "raised": {
      "type": "array",
      "description": "New obligations, as text.",
      "items": {"type": "string"}
    }
  },
  "required": ["verdict", "confidence", "rationale", "resolved", "raised"],
  "additionalProperties": false
}`

var verdictParameters = sync.OnceValue(func() *structpb.Struct {
	s := &structpb.Struct{}
	if err := protojson.Unmarshal([]byte(VerdictToolSchema), s); err != nil {
		panic("spec: VerdictToolSchema is not JSON: " + err.Error()) // a constant; a test parses it
	}
	return s
})

// VerdictTool returns a new copy of the verdict tool definition that Resolve grants
// to evaluator nodes. Callers may modify it.
func VerdictTool() *agentplanev1.FunctionTool {
	return &agentplanev1.FunctionTool{
		Type: "function",
		Function: &agentplanev1.FunctionDef{
			Name:        VerdictToolName,
			Description: proto.String("Record your verdict on the work under review. Call it once, when you have decided."),
			Parameters:  proto.Clone(verdictParameters()).(*structpb.Struct),
			Strict:      proto.Bool(true),
		},
	}
}

// CheckVerdict checks an evaluator's verdict wherever one arrives (a verdict tool
// call, a runtime's report): the verdict is in the closed set (D11-R13), confidence
// is in [0, 1] (D11-R12), and a verdict other than pass says why (D11-R14). path is
// the JSON pointer of the verdict in its enclosing message ("" for the root).
func CheckVerdict(v *agentplanev1.VerdictResult, path string) []*agentplanev1.SpecViolation {
	if v == nil {
		v = &agentplanev1.VerdictResult{}
	}
	var out findings
	p := NewPath(path)
	switch {
	case v.GetVerdict() == "":
		out.add(RuleVerdictValue, p.Child("verdict"), "verdict is required: %s", oneOf(verdictValues))
	case !slices.Contains(verdictValues, v.GetVerdict()):
		out.add(RuleVerdictValue, p.Child("verdict"), "verdict must be %s, got %q", oneOf(verdictValues), v.GetVerdict())
	}
	if v.Confidence != nil {
		if c := v.GetConfidence(); math.IsNaN(c) || c < 0 || c > 1 {
			out.add(RuleVerdictConfidence, p.Child("confidence"), "confidence must be between 0 and 1, got %v", c)
		}
	}
	if v.GetVerdict() != "pass" && v.GetVerdict() != "" && strings.TrimSpace(v.GetRationale()) == "" {
		out.add(RuleVerdictRationale, p.Child("rationale"), "a %s verdict needs a rationale: say what is wrong so it can be fixed", v.GetVerdict())
	}
	return protos(out)
}
