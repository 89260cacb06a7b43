package hitl

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/ext"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

// Bounds on a policy. They keep a policy, which is stored with its task and evaluated
// on every tool call, small and cheap.
const (
	// MaxPolicyTools bounds the tool names of an allowlist or denylist.
	MaxPolicyTools = 1024
	// MaxToolNameBytes bounds one tool name in a list policy.
	MaxToolNameBytes = 256
	// MaxExpressionBytes bounds a predicate's CEL source.
	MaxExpressionBytes = 4096
	// MaxTags bounds the tags of one approval request; a predicate returning more is
	// cut to the first MaxTags distinct ones.
	MaxTags = 32
	// MaxTagBytes bounds one tag.
	MaxTagBytes = 128
	// EvalCostLimit bounds the work of one predicate evaluation (CEL cost units,
	// roughly one per operation and per element visited). An evaluation that would
	// exceed it stops with an error, and the call is gated (fail closed).
	EvalCostLimit = 100_000
)

// Stable gate reasons written into ToolGated.reason and CheckToolCallResponse.reason.
// The always-gated reasons come from the injected predicate (gates.AlwaysGated).
const (
	ReasonNoPolicy        = "policy.none"
	ReasonNotMatched      = "policy.not_matched"
	ReasonAllowlist       = "policy.allowlist"
	ReasonDenylist        = "policy.denylist"
	ReasonPredicate       = "policy.predicate"
	ReasonPredicateError  = "policy.predicate_error"
	ReasonPolicyBroken    = "policy.unusable"
	ReasonHITLDisabled    = "hitl.disabled"
	ReasonInvalidCallArgs = "call.args_invalid"
)

// GateReasons is every reason above. With gates.AlwaysGatedReasons, they are the
// closed set the comment on ToolGated.reason in hitl.proto lists (a test keeps them
// equal).
var GateReasons = []string{ReasonNoPolicy, ReasonNotMatched, ReasonAllowlist, ReasonDenylist, ReasonPredicate,
	ReasonPredicateError, ReasonPolicyBroken, ReasonHITLDisabled, ReasonInvalidCallArgs}

// PolicyKind is the kind of a compiled policy.
type PolicyKind int

// Policy kinds.
const (
	KindNone PolicyKind = iota
	KindAllowlist
	KindDenylist
	KindPredicate
)

func (k PolicyKind) String() string {
	switch k {
	case KindAllowlist:
		return "allowlist"
	case KindDenylist:
		return "denylist"
	case KindPredicate:
		return "predicate"
	}
	return "none"
}

// Policy is a compiled InterruptPolicy. It is immutable and safe for concurrent use.
// The zero value and a nil *Policy gate nothing.
type Policy struct {
	kind  PolicyKind
	tools map[string]struct{}
	tags  map[string][]string
	prg   cel.Program
	expr  string
}

// Kind returns the policy's kind.
func (p *Policy) Kind() PolicyKind {
	if p == nil {
		return KindNone
	}
	return p.kind
}

// PolicyContext is what a policy sees of a tool call: the policy context of docs/hitl.md.
type PolicyContext struct {
	ToolName        string
	ToolDescription string
	// Args is ArgumentsJSON parsed; nil (CEL null) when ArgsValid is false.
	Args *structpb.Value
	// ArgumentsJSON is the arguments as the model produced them.
	ArgumentsJSON string
	// ArgsValid says whether ArgumentsJSON is valid JSON.
	ArgsValid bool
	AgentName string
	TripIndex int32
	SessionID string
}

// Match is a policy's answer for one call.
type Match struct {
	// Gate is true when the call needs a human.
	Gate bool
	// Tags are the approval request's tags (from the list policy's per-tool tags or
	// the predicate's list result).
	Tags []string
	// Reason is one of the Reason* constants.
	Reason string
	// Detail explains an evaluation error (Reason == ReasonPredicateError).
	Detail string
}

// Evaluate applies the policy to one call. It never fails: a predicate that errors
// (a missing key, a type mismatch at run time, the cost limit) gates the call and
// says so in Match.Reason and Match.Detail, because an unanswerable question about
// whether a human must look is answered "yes".
func (p *Policy) Evaluate(ctx context.Context, pc PolicyContext) Match {
	switch p.Kind() {
	case KindAllowlist:
		if _, ok := p.tools[pc.ToolName]; ok {
			return Match{Gate: true, Tags: p.tags[pc.ToolName], Reason: ReasonAllowlist}
		}
		return Match{Reason: ReasonNotMatched}
	case KindDenylist:
		if _, ok := p.tools[pc.ToolName]; ok {
			return Match{Reason: ReasonNotMatched}
		}
		return Match{Gate: true, Tags: p.tags[pc.ToolName], Reason: ReasonDenylist}
	case KindPredicate:
		return p.evalPredicate(ctx, pc)
	}
	return Match{Reason: ReasonNoPolicy}
}

func (p *Policy) evalPredicate(ctx context.Context, pc PolicyContext) (m Match) {
	defer func() {
		// cel-go recovers its own panics; this guards the conversions around it.
		if r := recover(); r != nil {
			m = Match{Gate: true, Reason: ReasonPredicateError, Detail: fmt.Sprintf("predicate evaluation panicked: %v", r)}
		}
	}()
	act := &policyActivation{pc: pc}
	out, _, err := p.prg.ContextEval(ctx, act)
	if err != nil {
		return Match{Gate: true, Reason: ReasonPredicateError, Detail: "predicate evaluation failed, gating the call: " + err.Error()}
	}
	switch v := out.(type) {
	case types.Bool:
		return Match{Gate: bool(v), Reason: predicateReason(bool(v))}
	case traits.Lister:
		tags, err := listTags(v)
		if err != nil {
			return Match{Gate: true, Reason: ReasonPredicateError, Detail: "predicate result unusable, gating the call: " + err.Error()}
		}
		return Match{Gate: len(tags) > 0, Tags: tags, Reason: predicateReason(len(tags) > 0)}
	}
	return Match{Gate: true, Reason: ReasonPredicateError, Detail: fmt.Sprintf("predicate returned %s, want bool or list(string); gating the call", out.Type())}
}

func predicateReason(gate bool) string {
	if gate {
		return ReasonPredicate
	}
	return ReasonNotMatched
}

// listTags turns a predicate's list(string) result into tags: empty strings dropped,
// duplicates removed, at most MaxTags of at most MaxTagBytes each.
func listTags(l traits.Lister) ([]string, error) {
	n, ok := l.Size().(types.Int)
	if !ok {
		return nil, errors.New("list size is not an int")
	}
	var tags []string
	for i := range int64(n) {
		s, ok := l.Get(types.Int(i)).(types.String)
		if !ok {
			return nil, fmt.Errorf("element %d is not a string", i)
		}
		tags = appendTag(tags, string(s))
		if len(tags) == MaxTags {
			break
		}
	}
	return tags, nil
}

func appendTag(tags []string, t string) []string {
	t = TruncateUTF8(t, MaxTagBytes)
	if t == "" || slices.Contains(tags, t) {
		return tags
	}
	return append(tags, t)
}

// policyActivation resolves the policy context's variables without building a map
// per evaluation.
type policyActivation struct{ pc PolicyContext }

func (a *policyActivation) ResolveName(name string) (any, bool) {
	switch name {
	case "tool_name":
		return a.pc.ToolName, true
	case "tool_description":
		return a.pc.ToolDescription, true
	case "args":
		if a.pc.Args == nil {
			return structpb.NewNullValue(), true
		}
		return a.pc.Args, true
	case "arguments_json":
		return a.pc.ArgumentsJSON, true
	case "args_valid":
		return a.pc.ArgsValid, true
	case "agent_name":
		return a.pc.AgentName, true
	case "trip_index":
		return int64(a.pc.TripIndex), true
	case "session_id":
		return a.pc.SessionID, true
	}
	return nil, false
}

func (a *policyActivation) Parent() cel.Activation { return nil }

// celEnv is the one CEL environment of predicates. Building it is the expensive part
// of CEL setup, and environments are safe for concurrent use.
var celEnv = func() *cel.Env {
	env, err := cel.NewEnv(
		cel.Variable("tool_name", cel.StringType),
		cel.Variable("tool_description", cel.StringType),
		cel.Variable("args", cel.DynType),
		cel.Variable("arguments_json", cel.StringType),
		cel.Variable("args_valid", cel.BoolType),
		cel.Variable("agent_name", cel.StringType),
		cel.Variable("trip_index", cel.IntType),
		cel.Variable("session_id", cel.StringType),
		// args numbers are doubles (JSON); let `args.amount > 100` mean what it says.
		cel.CrossTypeNumericComparisons(true),
		ext.Strings(),
		cel.ParserExpressionSizeLimit(MaxExpressionBytes),
		cel.ParserRecursionLimit(64),
	)
	if err != nil {
		panic("hitl: building the CEL environment: " + err.Error())
	}
	return env
}()

var listOfString = types.NewListType(types.StringType)

// PolicyError is a policy refused at StartTask. It is an *apierr.Error
// (INVALID_ARGUMENT, reason POLICY_INVALID) with a google.rpc.BadRequest naming
// every problem; for a predicate each problem names the expression's line and column.
func policyError(violations ...*errdetails.BadRequest_FieldViolation) error {
	msgs := make([]string, len(violations))
	for i, v := range violations {
		msgs[i] = v.GetField() + ": " + v.GetDescription()
	}
	return apierr.InvalidArgument(apierr.ReasonPolicyInvalid, "invalid interrupt_policy: %s", strings.Join(msgs, "; ")).
		WithDetails(&errdetails.BadRequest{FieldViolations: violations})
}

func violation(field, format string, args ...any) *errdetails.BadRequest_FieldViolation {
	return &errdetails.BadRequest_FieldViolation{Field: field, Description: fmt.Sprintf(format, args...)}
}

// CompilePolicy checks and compiles an interrupt policy. A nil policy compiles to a
// policy that gates nothing. A bad policy is an *apierr.Error (INVALID_ARGUMENT,
// reason POLICY_INVALID) that names every problem; a bad predicate is reported at
// its line and column ("interrupt_policy.predicate.expression:1:7: ...").
//
// Compiling a predicate costs tens to hundreds of microseconds; callers on the hot
// path use a Compiler, which caches.
func CompilePolicy(p *agentplanev1.InterruptPolicy) (*Policy, error) {
	switch k := p.GetPolicy().(type) {
	case nil:
		if p == nil {
			return &Policy{}, nil
		}
		return nil, policyError(violation("interrupt_policy",
			"set exactly one of allowlist, denylist or predicate, or leave interrupt_policy out to gate nothing by policy"))
	case *agentplanev1.InterruptPolicy_Allowlist:
		return compileList(KindAllowlist, "interrupt_policy.allowlist", k.Allowlist)
	case *agentplanev1.InterruptPolicy_Denylist:
		return compileList(KindDenylist, "interrupt_policy.denylist", k.Denylist)
	case *agentplanev1.InterruptPolicy_Predicate:
		return compilePredicate(k.Predicate.GetExpression())
	default:
		return nil, policyError(violation("interrupt_policy", "unknown policy kind %T", k))
	}
}

func compileList(kind PolicyKind, field string, l *agentplanev1.ToolListPolicy) (*Policy, error) {
	var bad []*errdetails.BadRequest_FieldViolation
	if len(l.GetTools()) > MaxPolicyTools {
		bad = append(bad, violation(field+".tools", "%d tools, at most %d allowed", len(l.GetTools()), MaxPolicyTools))
	}
	tools := make(map[string]struct{}, len(l.GetTools()))
	for i, t := range l.GetTools() {
		switch {
		case t == "":
			bad = append(bad, violation(fmt.Sprintf("%s.tools[%d]", field, i), "tool name is empty"))
		case len(t) > MaxToolNameBytes:
			bad = append(bad, violation(fmt.Sprintf("%s.tools[%d]", field, i), "tool name is %d bytes, at most %d allowed", len(t), MaxToolNameBytes))
		}
		tools[t] = struct{}{}
	}
	var tags map[string][]string
	if len(l.GetTags()) > 0 {
		tags = make(map[string][]string, len(l.GetTags()))
	}
	// Sorted so that violations come out in a stable order.
	names := make([]string, 0, len(l.GetTags()))
	for name := range l.GetTags() {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		f := fmt.Sprintf("%s.tags[%q]", field, name)
		_, listed := tools[name]
		switch {
		case kind == KindAllowlist && !listed:
			bad = append(bad, violation(f, "tags for %q would never apply: the allowlist does not list it, so its calls are not gated", name))
			continue
		case kind == KindDenylist && listed:
			bad = append(bad, violation(f, "tags for %q would never apply: the denylist lists it, so its calls bypass approval", name))
			continue
		}
		var ts []string
		for j, t := range l.GetTags()[name].GetTags() {
			switch {
			case t == "":
				bad = append(bad, violation(fmt.Sprintf("%s.tags[%d]", f, j), "tag is empty"))
			case len(t) > MaxTagBytes || !utf8.ValidString(t):
				bad = append(bad, violation(fmt.Sprintf("%s.tags[%d]", f, j), "tag must be valid UTF-8 of at most %d bytes", MaxTagBytes))
			}
			ts = appendTag(ts, t)
		}
		if len(ts) > MaxTags {
			bad = append(bad, violation(f, "%d tags, at most %d allowed", len(ts), MaxTags))
		}
		tags[name] = ts
	}
	if len(bad) > 0 {
		return nil, policyError(bad...)
	}
	return &Policy{kind: kind, tools: tools, tags: tags}, nil
}

const exprField = "interrupt_policy.predicate.expression"

func compilePredicate(src string) (*Policy, error) {
	switch {
	case strings.TrimSpace(src) == "":
		return nil, policyError(violation(exprField, "the expression is empty"))
	case len(src) > MaxExpressionBytes:
		return nil, policyError(violation(exprField, "the expression is %d bytes, at most %d allowed", len(src), MaxExpressionBytes))
	}
	ast, iss := celEnv.Compile(src)
	if iss.Err() != nil {
		var bad []*errdetails.BadRequest_FieldViolation
		for _, e := range iss.Errors() {
			// CEL columns are 0-based; people count from 1.
			bad = append(bad, violation(fmt.Sprintf("%s:%d:%d", exprField, e.Location.Line(), e.Location.Column()+1), "%s", e.Message))
		}
		return nil, policyError(bad...)
	}
	out := ast.OutputType()
	if !out.IsExactType(types.BoolType) && !out.IsExactType(listOfString) {
		return nil, policyError(violation(exprField+":1:1",
			"the expression has type %s; it must be bool (gate or not) or list(string) (tags; non-empty gates). "+
				"Values read from args are dyn: convert them, for example bool(args.dangerous) or [string(args.kind)]", out))
	}
	prg, err := celEnv.Program(ast,
		cel.CostLimit(EvalCostLimit),
		// Lets ContextEval stop a long comprehension when the caller gives up.
		cel.InterruptCheckFrequency(100),
	)
	if err != nil {
		return nil, policyError(violation(exprField, "%s", err.Error()))
	}
	return &Policy{kind: KindPredicate, prg: prg, expr: src}, nil
}

// policyKey is the cache key of a policy: the digest of its deterministic encoding.
type policyKey [sha256.Size]byte

func keyOf(p *agentplanev1.InterruptPolicy) (policyKey, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	if err != nil {
		return policyKey{}, err
	}
	return sha256.Sum256(b), nil
}
