package hitl

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

// SystemPrincipal decides what no person decided: allowed calls, synthesized
// rejections, deadline defaults.
const SystemPrincipal = "system"

// AlwaysGatedFunc reports whether a call must wait for a human whatever the policy
// says, and the stable reason (for example a2a.always_gated). gates.AlwaysGated is
// the implementation; it is injected so this package does not depend on gates.
type AlwaysGatedFunc func(toolName string, ann *agentplanev1.McpToolAnnotations, overrides []*agentplanev1.ToolAxisOverride) (bool, string)

// Gate answers CheckToolCall: allow, interrupt or reject. It holds no task state and
// is safe for concurrent use.
type Gate struct {
	compiler    *Compiler
	alwaysGated AlwaysGatedFunc
}

// NewGate returns a Gate using compiler for policies (a fresh one when nil) and
// alwaysGated for the calls no policy can un-gate. alwaysGated is required: a gate
// that silently stopped gating A2A skills would be worse than none.
func NewGate(compiler *Compiler, alwaysGated AlwaysGatedFunc) *Gate {
	if alwaysGated == nil {
		panic("hitl.NewGate: alwaysGated is required")
	}
	if compiler == nil {
		compiler = NewCompiler(0)
	}
	return &Gate{compiler: compiler, alwaysGated: alwaysGated}
}

// Compiler returns the gate's policy compiler, for StartTask to check a policy with
// the same cache the gate uses.
func (g *Gate) Compiler() *Compiler { return g.compiler }

// Call is one tool call a runtime asks about.
type Call struct {
	CallID          string
	ToolName        string
	ToolDescription string
	// ArgumentsJSON is the model's arguments as JSON text, possibly malformed.
	ArgumentsJSON string
	// AgentName is the graph node (or the agent) making the call.
	AgentName   string
	TripIndex   int32
	Annotations *agentplanev1.McpToolAnnotations
}

// CallFromRequest reads the call out of a CheckToolCallRequest.
func CallFromRequest(r *agentplanev1.CheckToolCallRequest) Call {
	return Call{
		CallID:          r.GetCallId(),
		ToolName:        r.GetToolName(),
		ToolDescription: r.GetToolDescription(),
		ArgumentsJSON:   r.GetArgumentsJson(),
		AgentName:       r.GetAgentName(),
		TripIndex:       r.GetTripIndex(),
		Annotations:     r.GetAnnotations(),
	}
}

// TaskGating is what the gate needs of the task, all fixed at StartTask.
type TaskGating struct {
	Policy    *agentplanev1.InterruptPolicy
	Spec      *agentplanev1.ResolvedSpec
	ToolAxes  []*agentplanev1.ToolAxisOverride
	SessionID string
}

// GateResult is the gate's answer for one call.
type GateResult struct {
	Outcome agentplanev1.GateOutcome
	// Reason is stable: for ALLOW policy.none or policy.not_matched; for INTERRUPT
	// what gated the call (policy.allowlist, policy.denylist, policy.predicate,
	// policy.predicate_error, policy.unusable, or an always-gated reason such as
	// a2a.always_gated); for REJECT hitl.disabled.
	Reason string
	// Detail is for people and logs: what gated a rejected call, why a predicate
	// failed.
	Detail string
	// Tags from the policy match.
	Tags []string
	// ArgsDigest is the digest of the call's arguments text (ArgsDigest).
	ArgsDigest string
	// Mode is how a gated call was handled; zero for ALLOW.
	Mode ModeResolution
	// Decision is set for ALLOW (approve, with the args to run) and REJECT (the
	// synthesized rejection). For INTERRUPT the decision comes later.
	Decision *agentplanev1.Decision
}

// Check decides one call. It is pure apart from reading the compiler's cache. The
// only error is a call with no tool name, an INVALID_ARGUMENT; everything else,
// including arguments that are not valid JSON and a policy that fails to evaluate, is
// an answer, and when in doubt the answer gates.
func (g *Gate) Check(ctx context.Context, t TaskGating, c Call, now time.Time) (GateResult, error) {
	if c.ToolName == "" {
		return GateResult{}, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "tool_name is required")
	}
	digest := ArgsDigest(c.ArgumentsJSON)
	res := GateResult{ArgsDigest: digest}

	var m Match
	if pol, err := g.compiler.Compile(t.Policy); err != nil {
		// Only reachable when a stored policy no longer compiles (a CEL upgrade):
		// the policy cannot say no, so it says yes.
		m = Match{Gate: true, Reason: ReasonPolicyBroken, Detail: "the task's interrupt policy no longer compiles, gating the call: " + err.Error()}
	} else {
		pc := PolicyContext{
			ToolName:        c.ToolName,
			ToolDescription: c.ToolDescription,
			ArgumentsJSON:   c.ArgumentsJSON,
			AgentName:       c.AgentName,
			TripIndex:       c.TripIndex,
			SessionID:       t.SessionID,
		}
		if pol.Kind() == KindPredicate {
			// Only a predicate reads the arguments' value.
			pc.Args, pc.ArgsValid = ParseArgs(c.ArgumentsJSON)
		}
		m = pol.Evaluate(ctx, pc)
	}
	res.Tags, res.Reason, res.Detail = m.Tags, m.Reason, m.Detail
	if always, why := g.alwaysGated(c.ToolName, c.Annotations, t.ToolAxes); always {
		// The stronger statement wins the reason; the policy's tags still help a
		// reviewer sort the request.
		res.Reason = why
		m.Gate = true
	}
	if !m.Gate {
		res.Outcome = agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW
		res.Decision = &agentplanev1.Decision{
			Type:            agentplanev1.DecisionType_DECISION_TYPE_APPROVE,
			ArgumentsJson:   c.ArgumentsJSON,
			CallId:          c.CallID,
			RuledArgsDigest: digest,
			ArgsDigest:      digest,
			DecidedBy:       SystemPrincipal,
			DecideTime:      timestamppb.New(now),
			Source:          agentplanev1.DecisionSource_DECISION_SOURCE_POLICY,
		}
		return res, nil
	}

	res.Mode = ResolveMode(t.Spec, t.Policy != nil, c.AgentName)
	if res.Mode.Mode == ModeEnabled {
		res.Outcome = agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT
		return res, nil
	}
	gatedBy := res.Reason
	res.Outcome = agentplanev1.GateOutcome_GATE_OUTCOME_REJECT
	res.Reason = ReasonHITLDisabled
	res.Detail = rejectText(c, gatedBy, res.Mode, t.Spec.GetGraph() == nil)
	res.Decision = &agentplanev1.Decision{
		Type:            agentplanev1.DecisionType_DECISION_TYPE_REJECT,
		Reason:          &res.Detail,
		CallId:          c.CallID,
		RuledArgsDigest: digest,
		ArgsDigest:      digest,
		DecidedBy:       SystemPrincipal,
		DecideTime:      timestamppb.New(now),
		Source:          agentplanev1.DecisionSource_DECISION_SOURCE_HITL_DISABLED,
		// The server wrote this text, so it reaches the model verbatim.
		ModelReason: &res.Detail,
	}
	return res, nil
}

// rejectText explains a synthesized rejection to the model and to whoever reads the
// log: which call, what gated it, and why nobody was asked.
func rejectText(c Call, gatedBy string, m ModeResolution, plainAgent bool) string {
	why := fmt.Sprintf("HITL is disabled for node %q", m.DecidedBy)
	switch {
	case plainAgent:
		why = "the task has no interrupt policy, so no one is there to approve it"
	case m.DecidedBy == c.AgentName && !m.Found:
		why = fmt.Sprintf("node %q is not in the graph and the graph's hitl_default is disabled", c.AgentName)
	case m.DecidedBy != c.AgentName:
		why = fmt.Sprintf("node %q passes approvals through to node %q, whose HITL mode is disabled", c.AgentName, m.DecidedBy)
	}
	return fmt.Sprintf("The call to tool %q was rejected without running: it requires approval (%s) but %s.", c.ToolName, gatedBy, why)
}

// ToolGatedEvent is the event recording the gate's answer.
func ToolGatedEvent(c Call, r GateResult, interruptID string) *agentplanev1.ToolGated {
	return &agentplanev1.ToolGated{
		CallId:        c.CallID,
		ToolName:      c.ToolName,
		Outcome:       r.Outcome,
		InterruptId:   interruptID,
		Tags:          r.Tags,
		Reason:        r.Reason,
		Node:          c.AgentName,
		ArgumentsJson: c.ArgumentsJSON,
	}
}
