package approvals

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/tasks"
)

// MaxCallIDBytes bounds a runtime's call id.
const MaxCallIDBytes = 256

// CheckToolCall answers RuntimeService.CheckToolCall under the caller's lease: allow,
// interrupt or reject, with the answer (ToolGated) in the task's log in the same
// transaction. An interrupt is stored with its InterruptRaised event, the task moves
// to INPUT_REQUIRED and keeps its lease: the runtime then waits (AwaitDecision) or
// gives the lease up (SuspendTask). An answer given at once (ALLOW, or REJECT by a
// disabled HITL mode) is stored too, as a resolved record under the same derived id
// (hitl.DecidedCall): the task domain checks the runtime's report of the call against
// whichever decision the call got, so nothing runs that was not decided.
//
// The call id is required. Asking again about a call id already answered returns the
// first answer (for an interrupt, as it is now: pending or decided), says whether the
// call was reported already (call_reported: a replaying runtime must not run it
// again), and records nothing new; asking about it with another tool, other arguments, or inputs that
// the gate now answers differently is FAILED_PRECONDITION (INTERRUPT_ARGS_MISMATCH):
// a changed call needs a new call id. A stale lease is LEASE_LOST.
//
// With report_allowed_call, an ALLOW also reports the call (tasks.Op.ReportCall) in
// the same transaction, and says so (reported_with_check); asking again under the
// same lease before its result is reported says so again, since that lease has not
// run it (its answer was lost), while a later lease finds it call_reported.
func (s *Service) CheckToolCall(ctx context.Context, req *agentplanev1.CheckToolCallRequest) (*agentplanev1.CheckToolCallResponse, error) {
	call := hitl.CallFromRequest(req)
	switch {
	case call.CallID == "" || len(call.CallID) > MaxCallIDBytes:
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "call_id is required (1 to %d bytes): it names the call in the log and in its interrupt", MaxCallIDBytes)
	case call.AgentName == "":
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "agent_name is required: the HITL mode and the reviewer's context depend on it")
	}
	var resp *agentplanev1.CheckToolCallResponse
	var deadline time.Time
	err := s.tasks.UpdateLeased(ctx, req.GetLease(), func(op *tasks.Op) error {
		resp, deadline = nil, time.Time{}
		task := op.Task()
		switch task.GetState() {
		case agentplanev1.TaskState_TASK_STATE_WORKING, agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED:
		default:
			return apierr.FailedPrecondition(apierr.ReasonTaskState, "task %s is %s; tool calls are checked while it runs", task.GetTaskId(), task.GetState())
		}
		spec, err := op.Spec()
		if err != nil {
			return err
		}
		res, err := s.gate.Check(ctx, hitl.TaskGating{
			Policy:    spec.GetInterruptPolicy(),
			Spec:      spec.GetResolvedSpec(),
			ToolAxes:  spec.GetToolAxes(),
			SessionID: task.GetSessionId(),
		}, call, op.Now())
		if err != nil {
			return err
		}
		reportAllowed := req.GetReportAllowedCall() && res.Outcome == agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW
		id := hitl.InterruptID(task.GetTaskId(), call.CallID)
		switch prev, err := op.Writer().GetInterrupt(task.GetTenant(), id); {
		case err == nil:
			resp, err = answerAgain(task, prev.GetInterrupt(), call, res)
			if resp != nil {
				resp.CallReported = prev.GetConsumedEpoch() != 0
				resp.ResultReported = prev.GetResultReported()
				// This lease reported the call with an earlier check whose answer was
				// lost: it has not run it yet.
				if reportAllowed && prev.GetConsumedEpoch() == op.Epoch() && !prev.GetResultReported() {
					resp.CallReported, resp.ReportedWithCheck = false, true
				}
			}
			return err
		case !store.IsNotFound(err):
			return err
		}
		meta := s.meta(op, spec, id)
		if res.Outcome != agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT {
			if err := op.Append(toolGated(call, res, "")); err != nil {
				return err
			}
			if err := op.Writer().PutInterrupt(&storagev1.InterruptRecord{
				Interrupt: hitl.DecidedCall(meta, call, res), CreateTime: ts(op.Now()), RaisedEpoch: op.Epoch(),
			}); err != nil {
				return err
			}
			resp = &agentplanev1.CheckToolCallResponse{Outcome: res.Outcome, Decision: res.Decision, Reason: res.Reason}
			if reportAllowed {
				if _, err := op.ReportCall(&agentplanev1.ToolCall{
					CallId: call.CallID, ToolName: call.ToolName, ArgumentsJson: call.ArgumentsJSON,
					Node: call.AgentName, TripIndex: req.GetTripIndex(), MessageId: req.GetMessageId(),
				}); err != nil {
					return err
				}
				resp.ReportedWithCheck = true
			}
			return nil
		}
		in, err := s.raise(ctx, op, meta, call, res)
		if err != nil {
			return err
		}
		resp = &agentplanev1.CheckToolCallResponse{Outcome: res.Outcome, Interrupt: in, Reason: res.Reason}
		if in.GetDeadline() != nil || in.GetRequirement().GetRemindTime() != nil || in.GetRequirement().GetEscalateTime() != nil {
			deadline = op.Now() // a new timer: the loop looks again
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !deadline.IsZero() {
		s.kickDeadlines()
	}
	return resp, nil
}

func toolGated(c hitl.Call, r hitl.GateResult, interruptID string) *agentplanev1.TaskEvent {
	return &agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_ToolGated{ToolGated: hitl.ToolGatedEvent(c, r, interruptID)}}
}

// meta is what the record of a call of the task in op carries besides the call.
func (s *Service) meta(op *tasks.Op, spec *storagev1.TaskSpecRecord, id string) hitl.InterruptMeta {
	task := op.Task()
	return hitl.InterruptMeta{
		InterruptID:   id,
		TaskID:        task.GetTaskId(),
		Tenant:        task.GetTenant(),
		SessionID:     task.GetSessionId(),
		OriginalInput: tasks.MessageText(spec.GetInput()),
		Now:           op.Now(),
		Timeout:       s.timeout(spec),
	}
}

// answerAgain answers a call id that was already answered (prev): with the first
// answer, when the call is the same one.
func answerAgain(task *storagev1.TaskRecord, prev *agentplanev1.Interrupt, call hitl.Call, res hitl.GateResult) (*agentplanev1.CheckToolCallResponse, error) {
	outcome := hitl.OutcomeOf(prev)
	if prev.GetArgsDigest() != res.ArgsDigest || prev.GetApproval().GetToolName() != call.ToolName || outcome != res.Outcome {
		return nil, apierr.FailedPrecondition(apierr.ReasonArgsMismatch,
			"call %q of task %s was already answered (%s for tool %q with args digest %s); give a changed call a new call_id",
			call.CallID, task.GetTaskId(), outcome, prev.GetApproval().GetToolName(), prev.GetArgsDigest())
	}
	resp := &agentplanev1.CheckToolCallResponse{Outcome: outcome, Reason: res.Reason}
	switch outcome {
	case agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT:
		resp.Interrupt = prev
	case agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW:
		// The record keeps the digest only; the call's text has that digest.
		d := proto.CloneOf(prev.GetDecision())
		d.ArgumentsJson = call.ArgumentsJSON
		resp.Decision = d
	default:
		resp.Decision = prev.GetDecision()
	}
	return resp, nil
}

// raise stores the interrupt of a gated call that has none yet.
func (s *Service) raise(ctx context.Context, op *tasks.Op, meta hitl.InterruptMeta, call hitl.Call, res hitl.GateResult) (*agentplanev1.Interrupt, error) {
	task := op.Task()
	in := hitl.NewToolInterrupt(meta, call, res)
	in.Requirement = s.rules.requirement(ctx, in, task.GetCreatedBy(), task.GetSessionId(), op.Now())
	// Events are buffered by the Op and checked against the limits first, so that a
	// refusal happens before anything is written.
	if err := op.Append(toolGated(call, res, meta.InterruptID)); err != nil {
		return nil, err
	}
	return in, s.raiseInterrupt(op, in)
}

// raiseInterrupt stores the pending interrupt in of the task in op, with its
// InterruptRaised event, and moves the task to INPUT_REQUIRED (it keeps its lease).
func (s *Service) raiseInterrupt(op *tasks.Op, in *agentplanev1.Interrupt) error {
	task := op.Task()
	// The raised interrupt carries the model's arguments, so it counts against the
	// task's history limits like the runtime's other content.
	if _, err := op.AppendContent(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_InterruptRaised{
		InterruptRaised: &agentplanev1.InterruptRaised{Interrupt: in},
	}}); err != nil {
		return err
	}
	if err := op.Writer().PutInterrupt(&storagev1.InterruptRecord{
		Interrupt: in, CreateTime: ts(op.Now()), RaisedEpoch: op.Epoch(),
	}); err != nil {
		return err
	}
	task.PendingInterruptIds = append(task.PendingInterruptIds, in.GetInterruptId())
	return op.SetState(agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED, tasks.StateInterruptRaised)
}
