package hitl

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

// MaxReasonBytes bounds a reviewer's reason as given (what reaches the model is
// capped further by the content-trust policy).
const MaxReasonBytes = 16 << 10

// ArgsValidator checks arguments against a tool's parameter schema and returns the
// violations, none when valid. spec.ValidateArgs is the implementation.
type ArgsValidator func(schema *structpb.Struct, args *structpb.Value) []string

// ResolveParams is what turning a ResolveInterruptRequest into a Decision needs
// beyond the request and the interrupt.
type ResolveParams struct {
	// Principal is the resolving caller; the decision is bound to it.
	Principal string
	Now       time.Time
	// Reason says how the reason reaches the model.
	Reason ReasonPolicy
	// Schema is the tool's parameter schema when the spec declares the tool
	// (ToolSchema); HasSchema says whether it does.
	Schema    *structpb.Struct
	HasSchema bool
	// ValidateArgs checks edited args against Schema. Required when HasSchema.
	ValidateArgs ArgsValidator
	// LinkID is the signed link the decision comes through, if any (for the audit).
	LinkID string
}

// CheckResolvable refuses a resolution the interrupt's state does not allow: a chat
// pause or a wait for tool outputs (only ContinueTask resolves them), an interrupt already resolved (the decision
// is single-use), or a reviewer who saw other arguments (expectedDigest, when set,
// must equal the interrupt's args digest).
func CheckResolvable(in *agentplanev1.Interrupt, expectedDigest string) error {
	if in.GetKind() == agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED {
		return apierr.FailedPrecondition(apierr.ReasonTaskState,
			"interrupt %s waits for the output of client tool call %q; give it with TaskService.ContinueTask (tool_outputs)", in.GetInterruptId(), in.GetCallId()).
			WithMetadata(apierr.MetaTaskID, in.GetTaskId()).WithMetadata(apierr.MetaInterruptID, in.GetInterruptId()).
			WithMetadata(apierr.MetaResolveWith, apierr.ResolveWithContinueTask)
	}
	if in.GetKind() == agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE {
		return apierr.FailedPrecondition(apierr.ReasonTaskState,
			"interrupt %s is a chat-mode pause; resume the task with TaskService.ContinueTask", in.GetInterruptId()).
			WithMetadata(apierr.MetaTaskID, in.GetTaskId()).WithMetadata(apierr.MetaInterruptID, in.GetInterruptId()).
			WithMetadata(apierr.MetaResolveWith, apierr.ResolveWithContinueTask)
	}
	if err := checkPending(in); err != nil {
		return err
	}
	if expectedDigest != "" && expectedDigest != in.GetArgsDigest() {
		return apierr.FailedPrecondition(apierr.ReasonArgsMismatch,
			"interrupt %s is about arguments with digest %s, not %s; reload it and rule on what it shows",
			in.GetInterruptId(), in.GetArgsDigest(), expectedDigest).
			WithMetadata("args_digest", in.GetArgsDigest())
	}
	return nil
}

func checkPending(in *agentplanev1.Interrupt) error {
	if in.GetState() == agentplanev1.InterruptState_INTERRUPT_STATE_PENDING {
		return nil
	}
	e := apierr.FailedPrecondition(apierr.ReasonAlreadyResolved, "interrupt %s is already resolved", in.GetInterruptId())
	if d := in.GetDecision(); d != nil {
		e.Message = fmt.Sprintf("interrupt %s was already resolved (%s by %s)", in.GetInterruptId(), decisionWord(d), d.GetDecidedBy())
	}
	return e
}

func decisionWord(d *agentplanev1.Decision) string {
	switch d.GetType() {
	case agentplanev1.DecisionType_DECISION_TYPE_APPROVE:
		return "approved"
	case agentplanev1.DecisionType_DECISION_TYPE_REJECT:
		return "rejected"
	case agentplanev1.DecisionType_DECISION_TYPE_EDIT:
		return "edited"
	}
	return "decided"
}

// CheckResolveRequest checks a ResolveInterruptRequest on its own: a decision is
// given, a rejection has a reason, an edit has arguments, reasons are bounded.
func CheckResolveRequest(req *agentplanev1.ResolveInterruptRequest) error {
	if req.GetInterruptId() == "" {
		return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "interrupt_id is required")
	}
	var reason string
	switch d := req.GetDecision().(type) {
	case nil:
		return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "a decision is required: approve, reject (with a reason) or edit (with new args)")
	case *agentplanev1.ResolveInterruptRequest_Approve:
		reason = d.Approve.GetReason()
	case *agentplanev1.ResolveInterruptRequest_Reject:
		reason = d.Reject.GetReason()
		if strings.TrimSpace(reason) == "" {
			return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "reject.reason is required: the model is told why its call was refused")
		}
	case *agentplanev1.ResolveInterruptRequest_Edit:
		reason = d.Edit.GetReason()
		if d.Edit.GetArgumentsJson() == "" {
			return apierr.InvalidArgument(apierr.ReasonEditInvalid, "edit.arguments_json is required")
		}
	}
	if len(reason) > MaxReasonBytes {
		return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "the reason is %d bytes, at most %d allowed", len(reason), MaxReasonBytes)
	}
	return nil
}

// DecideResolve turns a person's ruling into the server's Decision for in. It runs
// CheckResolveRequest and CheckResolvable, then validates edited arguments: they must
// be JSON text of an object and satisfy the tool's parameter schema when the spec
// declares one (otherwise INVALID_ARGUMENT, reason INTERRUPT_EDIT_INVALID, with every
// violation in a google.rpc.BadRequest). The decision carries the arguments_json the
// runtime must run with (the interrupt's for approve, the new text for edit, none for
// reject), the digest of the text ruled on and of the text to run (for reject, the
// ruled one: the call is reported with it), the call id, the principal and the time.
func DecideResolve(in *agentplanev1.Interrupt, req *agentplanev1.ResolveInterruptRequest, p ResolveParams) (*agentplanev1.Decision, error) {
	if err := CheckResolveRequest(req); err != nil {
		return nil, err
	}
	if err := CheckResolvable(in, req.GetArgsDigest()); err != nil {
		return nil, err
	}
	d := &agentplanev1.Decision{
		RuledArgsDigest: in.GetArgsDigest(),
		DecidedBy:       p.Principal,
		DecideTime:      timestamppb.New(p.Now),
		Source:          agentplanev1.DecisionSource_DECISION_SOURCE_HUMAN,
		InterruptId:     in.GetInterruptId(),
		CallId:          in.GetCallId(),
	}
	var reason *string
	switch r := req.GetDecision().(type) {
	case *agentplanev1.ResolveInterruptRequest_Approve:
		d.Type = agentplanev1.DecisionType_DECISION_TYPE_APPROVE
		d.ArgumentsJson = in.GetApproval().GetArgumentsJson()
		d.ArgsDigest = in.GetArgsDigest()
		reason = r.Approve.Reason
	case *agentplanev1.ResolveInterruptRequest_Reject:
		d.Type = agentplanev1.DecisionType_DECISION_TYPE_REJECT
		d.ArgsDigest = in.GetArgsDigest()
		reason = &r.Reject.Reason
	case *agentplanev1.ResolveInterruptRequest_Edit:
		if IsModelCall(in) {
			return nil, noModelCallEdit(in)
		}
		if err := checkEdit(in, r.Edit.GetArgumentsJson(), p); err != nil {
			return nil, err
		}
		d.Type = agentplanev1.DecisionType_DECISION_TYPE_EDIT
		d.ArgumentsJson = r.Edit.GetArgumentsJson()
		d.ArgsDigest = ArgsDigest(d.ArgumentsJson)
		reason = r.Edit.Reason
	}
	if reason != nil && *reason != "" {
		d.Reason = proto.String(*reason)
		d.ModelReason = proto.String(RenderReason(*reason, p.Reason))
	}
	return d, nil
}

func checkEdit(in *agentplanev1.Interrupt, text string, p ResolveParams) error {
	args, ok := ParseArgs(text)
	if !ok {
		return editInvalid(in, []string{"arguments_json is not valid JSON"})
	}
	if args.GetStructValue() == nil {
		return editInvalid(in, []string{"tool arguments must be a JSON object"})
	}
	if !p.HasSchema {
		return nil
	}
	if p.ValidateArgs == nil {
		return apierr.New(codes.Internal, apierr.ReasonInternal, "edit validation is not configured")
	}
	if v := p.ValidateArgs(p.Schema, args); len(v) > 0 {
		return editInvalid(in, v)
	}
	return nil
}

func editInvalid(in *agentplanev1.Interrupt, violations []string) error {
	fv := make([]*errdetails.BadRequest_FieldViolation, len(violations))
	for i, v := range violations {
		fv[i] = &errdetails.BadRequest_FieldViolation{Field: "edit.arguments_json", Description: v}
	}
	return apierr.InvalidArgument(apierr.ReasonEditInvalid, "the edited args do not fit the parameters of tool %q: %s",
		in.GetApproval().GetToolName(), strings.Join(violations, "; ")).
		WithDetails(&errdetails.BadRequest{FieldViolations: fv})
}

// DeadlineDecision is the decision applied when in's deadline passes: the deployment
// default, reject unless approve is configured. It is recorded like a person's, with
// source DEADLINE and principal "system"; its reason is the server's and reaches the
// model verbatim.
func DeadlineDecision(in *agentplanev1.Interrupt, approve bool, now time.Time) *agentplanev1.Decision {
	d := &agentplanev1.Decision{
		RuledArgsDigest: in.GetArgsDigest(),
		DecidedBy:       SystemPrincipal,
		DecideTime:      timestamppb.New(now),
		Source:          agentplanev1.DecisionSource_DECISION_SOURCE_DEADLINE,
		InterruptId:     in.GetInterruptId(),
		CallId:          in.GetCallId(),
		ArgsDigest:      in.GetArgsDigest(),
	}
	when := in.GetDeadline().AsTime().UTC().Format(time.RFC3339)
	var reason string
	if approve {
		d.Type = agentplanev1.DecisionType_DECISION_TYPE_APPROVE
		d.ArgumentsJson = in.GetApproval().GetArgumentsJson()
		reason = fmt.Sprintf("No reviewer decided by the deadline (%s); the deployment default approved the call.", when)
	} else {
		d.Type = agentplanev1.DecisionType_DECISION_TYPE_REJECT
		reason = fmt.Sprintf("No reviewer decided by the deadline (%s); the deployment default rejected the call. "+
			"Do not retry it unchanged unless the user asks.", when)
	}
	d.Reason, d.ModelReason = &reason, &reason
	return d
}

// DecideContinue is the decision of ContinueTask on a chat-mode pause, or on a wait
// for the output of a client-executed tool call (TOOL_OUTPUT_REQUIRED). The user's
// message or the tool output travels separately (as a continue message or a
// ToolResult), not as a reason.
func DecideContinue(in *agentplanev1.Interrupt, principal string, now time.Time) (*agentplanev1.Decision, error) {
	switch in.GetKind() {
	case agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE, agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED:
	default:
		return nil, apierr.FailedPrecondition(apierr.ReasonTaskState,
			"interrupt %s waits for a reviewer's decision, not for a user message; resolve it with HitlService.ResolveInterrupt", in.GetInterruptId()).
			WithMetadata(apierr.MetaTaskID, in.GetTaskId()).WithMetadata(apierr.MetaInterruptID, in.GetInterruptId()).
			WithMetadata(apierr.MetaResolveWith, apierr.ResolveWithResolveInterrupt)
	}
	if err := checkPending(in); err != nil {
		return nil, err
	}
	return &agentplanev1.Decision{
		Type:            agentplanev1.DecisionType_DECISION_TYPE_APPROVE,
		RuledArgsDigest: in.GetArgsDigest(),
		DecidedBy:       principal,
		DecideTime:      timestamppb.New(now),
		Source:          agentplanev1.DecisionSource_DECISION_SOURCE_CONTINUE,
		InterruptId:     in.GetInterruptId(),
		CallId:          in.GetCallId(),
	}, nil
}

// TaskEndedDecision resolves in when its task reached a terminal state (how:
// "completed", "failed", "canceled") before anyone decided: a rejection with source
// TASK_ENDED and principal "system", since no runtime is left to act on a decision.
// Its reason is the server's and reaches the model verbatim.
func TaskEndedDecision(in *agentplanev1.Interrupt, how string, now time.Time) *agentplanev1.Decision {
	reason := fmt.Sprintf("The task %s before a decision on this call; the call did not run.", how)
	switch in.GetKind() {
	case agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE:
		reason = fmt.Sprintf("The task %s while it waited for the user.", how)
	case agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED:
		reason = fmt.Sprintf("The task %s while it waited for the output of this call from the client.", how)
	}
	return &agentplanev1.Decision{
		Type:            agentplanev1.DecisionType_DECISION_TYPE_REJECT,
		Reason:          &reason,
		ModelReason:     &reason,
		RuledArgsDigest: in.GetArgsDigest(),
		DecidedBy:       SystemPrincipal,
		DecideTime:      timestamppb.New(now),
		Source:          agentplanev1.DecisionSource_DECISION_SOURCE_TASK_ENDED,
		InterruptId:     in.GetInterruptId(),
		CallId:          in.GetCallId(),
		ArgsDigest:      in.GetArgsDigest(),
	}
}

// InterruptResolvedEvent is the event recording a decision.
func InterruptResolvedEvent(d *agentplanev1.Decision) *agentplanev1.InterruptResolved {
	return &agentplanev1.InterruptResolved{InterruptId: d.GetInterruptId(), Decision: d}
}

func cloneInterrupt(in *agentplanev1.Interrupt) *agentplanev1.Interrupt {
	return proto.Clone(in).(*agentplanev1.Interrupt)
}
