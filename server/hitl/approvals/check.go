package approvals

import (
	"context"
	"time"

	storagev1 "github.com/agentplane/agentplane/gen/agentplane/storage/v1"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/tasks"
)

// MaxCallIDBytes bounds a runtime's call id.
const MaxCallIDBytes = 256

// CheckToolCall answers RuntimeService.CheckToolCall under the caller's lease: allow,
// interrupt or reject, with the answer (ToolGated) in the task's log in the same
// transaction. An interrupt is stored with its InterruptRaised event, the task moves
// to INPUT_REQUIRED and keeps its lease: the runtime then waits (AwaitDecision) or
// gives the lease up (SuspendTask).
//
// The call id is required. Asking again about a call id already gated returns the
// interrupt raised the first time (pending or decided) and records nothing new; asking
// with other arguments is FAILED_PRECONDITION (interrupt.args_mismatch). A stale lease
// is lease.lost.
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
		if res.Outcome != agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT {
			resp = &agentplanev1.CheckToolCallResponse{Outcome: res.Outcome, Decision: res.Decision, Reason: res.Reason}
			return op.Append(toolGated(call, res, ""))
		}
		in, fresh, err := s.raise(op, spec, call, res)
		if err != nil {
			return err
		}
		resp = &agentplanev1.CheckToolCallResponse{Outcome: res.Outcome, Interrupt: in, Reason: res.Reason}
		if fresh && in.GetDeadline() != nil {
			deadline = in.GetDeadline().AsTime()
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

// raise stores the interrupt of a gated call, or finds the one an earlier check of
// the same call raised (fresh is then false).
func (s *Service) raise(op *tasks.Op, spec *storagev1.TaskSpecRecord, call hitl.Call, res hitl.GateResult) (in *agentplanev1.Interrupt, fresh bool, err error) {
	task := op.Task()
	id := interruptID(task.GetTaskId(), call.CallID)
	switch prev, err := op.Writer().GetInterrupt(task.GetTenant(), id); {
	case err == nil:
		if prev.GetInterrupt().GetArgsDigest() != res.ArgsDigest {
			return nil, false, apierr.FailedPrecondition(apierr.ReasonArgsMismatch,
				"call %q of task %s was already gated with other arguments (interrupt %s); give a changed call a new call_id",
				call.CallID, task.GetTaskId(), id)
		}
		return prev.GetInterrupt(), false, nil
	case !store.IsNotFound(err):
		return nil, false, err
	}
	in = hitl.NewToolInterrupt(hitl.InterruptMeta{
		InterruptID:   id,
		TaskID:        task.GetTaskId(),
		Tenant:        task.GetTenant(),
		SessionID:     task.GetSessionId(),
		OriginalInput: spec.GetInput(),
		Now:           op.Now(),
		Timeout:       s.timeout(spec),
	}, call, res)
	// Events are buffered by the Op and checked against the limits first, so that a
	// refusal happens before anything is written.
	if err := op.Append(toolGated(call, res, id)); err != nil {
		return nil, false, err
	}
	// The raised interrupt carries the model's arguments, so it counts against the
	// task's history limits like the runtime's other content.
	if _, err := op.AppendContent(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_InterruptRaised{
		InterruptRaised: &agentplanev1.InterruptRaised{Interrupt: in},
	}}); err != nil {
		return nil, false, err
	}
	if err := op.Writer().PutInterrupt(&storagev1.InterruptRecord{
		Interrupt: in, CreateTime: ts(op.Now()), RaisedEpoch: op.Epoch(),
	}); err != nil {
		return nil, false, err
	}
	task.PendingInterruptIds = append(task.PendingInterruptIds, id)
	if err := op.SetState(agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED, "interrupt.raised"); err != nil {
		return nil, false, err
	}
	return in, true, nil
}
