package approvals

import (
	"context"
	"fmt"
	"time"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/tasks"
)

// CheckModelCall answers RuntimeService.CheckModelCall under the caller's lease: may
// the task's next model call run, given its budgets (docs/budgets.md, "Approval
// instead of refusal")?
//
// The common case costs no write: in one read transaction, fenced like a write, a call
// id already asked about is answered from its interrupt, and otherwise, while no
// budget with on_limit approve that the task counts against is spent
// (budget.Budgets.Hold), the answer is ALLOW and nothing is recorded. Once one is
// spent, a write transaction raises the call's interrupt (kind MODEL_CALL_APPROVAL,
// id hitl.ModelCallInterruptID): its InterruptRaised event, the task INPUT_REQUIRED
// keeping its lease, exactly as CheckToolCall raises a gated call's, so the inbox, the
// console, the notifications, deadlines and AwaitDecision/SuspendTask treat it alike.
//
// Asking again about a call id that raised an interrupt returns it as it is now: still
// pending (INTERRUPT), approved (ALLOW with the decision). A rejection ended the task
// (resolve, failModelCall), so a later ask is refused by the fence (TASK_TERMINAL).
func (s *Service) CheckModelCall(ctx context.Context, req *agentplanev1.CheckModelCallRequest) (*agentplanev1.CheckModelCallResponse, error) {
	call := hitl.ModelCall{CallID: req.GetCallId(), AgentName: req.GetAgentName(), Model: req.GetModel(), TripIndex: req.GetTripIndex()}
	switch {
	case call.CallID == "" || len(call.CallID) > MaxCallIDBytes:
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "call_id is required (1 to %d bytes): it names the model call and its interrupt", MaxCallIDBytes)
	case call.AgentName == "":
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "agent_name is required: the reviewer's context names it")
	case len(call.Model) > 255:
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "model is longer than 255 bytes")
	}
	id := hitl.ModelCallInterruptID(req.GetLease().GetTaskId(), call.CallID)
	var resp *agentplanev1.CheckModelCallResponse
	var hold *agentplanev1.ModelCallApproval
	err := s.tasks.ViewLeased(ctx, req.GetLease(), func(r store.Reader, task *storagev1.TaskRecord) error {
		var err error
		resp, hold, err = s.modelCallState(r, task, id, s.clock.Now())
		return err
	})
	if err != nil || hold == nil {
		return resp, err
	}
	timer := false
	err = s.tasks.UpdateLeased(ctx, req.GetLease(), func(op *tasks.Op) error {
		timer = false
		var err error
		if resp, hold, err = s.modelCallState(op.Writer(), op.Task(), id, op.Now()); err != nil || hold == nil {
			return err // answered without a raise: asked meanwhile, or the period ended
		}
		spec, err := op.Spec()
		if err != nil {
			return err
		}
		in := hitl.NewModelCallInterrupt(s.meta(op, spec, id), call, hold)
		if err := s.raiseInterrupt(op, in); err != nil {
			return err
		}
		resp = &agentplanev1.CheckModelCallResponse{Outcome: agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT, Interrupt: in}
		timer = in.GetDeadline() != nil
		return nil
	})
	if err != nil {
		return nil, err
	}
	if timer {
		s.kickDeadlines()
	}
	return resp, nil
}

// modelCallState is what CheckModelCall answers about call id of task without a write:
// the call's interrupt as it is now when one was raised, otherwise ALLOW while no
// budget with on_limit approve that the task counts against is spent. When one is,
// resp is nil and hold is that budget: the call's interrupt must be raised.
func (s *Service) modelCallState(r store.Reader, task *storagev1.TaskRecord, id string, now time.Time) (resp *agentplanev1.CheckModelCallResponse, hold *agentplanev1.ModelCallApproval, err error) {
	if err := checkRunning(task); err != nil {
		return nil, nil, err
	}
	switch prev, err := r.GetInterrupt(task.GetTenant(), id); {
	case err == nil:
		return modelCallAnswer(prev.GetInterrupt()), nil, nil
	case !store.IsNotFound(err):
		return nil, nil, err
	}
	if hold, err = s.budgets.Hold(r, task.GetTenant(), task.GetAgentId(), now); err != nil || hold != nil {
		return nil, hold, err
	}
	return &agentplanev1.CheckModelCallResponse{Outcome: agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW}, nil, nil
}

// checkRunning refuses a check of a task that is not running.
func checkRunning(task *storagev1.TaskRecord) error {
	switch task.GetState() {
	case agentplanev1.TaskState_TASK_STATE_WORKING, agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED:
		return nil
	}
	return apierr.FailedPrecondition(apierr.ReasonTaskState, "task %s is %s; model calls are checked while it runs", task.GetTaskId(), task.GetState())
}

// modelCallAnswer is the answer about a model call whose interrupt is in.
func modelCallAnswer(in *agentplanev1.Interrupt) *agentplanev1.CheckModelCallResponse {
	resp := &agentplanev1.CheckModelCallResponse{Outcome: agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT, Interrupt: in, Decision: in.GetDecision()}
	if in.GetState() == agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED {
		resp.Outcome = agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW
		if hitl.Rejected(in.GetDecision()) {
			resp.Outcome = agentplanev1.GateOutcome_GATE_OUTCOME_REJECT
		}
	}
	return resp
}

// failModelCall ends the task of the model-call interrupt in, rejected by d: nothing
// is left for the task to do without the model, so it fails (reason
// budget.model_call_rejected), in the transaction of the decision; the lease, if
// held, is revoked, so its runtime stops (AwaitDecision hands it the rejection).
func failModelCall(op *tasks.Op, in *agentplanev1.Interrupt, d *agentplanev1.Decision) error {
	mc := in.GetApproval().GetModelCall()
	by := "by " + d.GetDecidedBy()
	if d.GetSource() == agentplanev1.DecisionSource_DECISION_SOURCE_DEADLINE {
		by = "by its deadline"
	}
	msg := fmt.Sprintf("model call %s of %s was rejected %s: budget %s is spent for this %s (%s of %s %s used; it resets at %s)",
		in.GetCallId(), in.GetNode(), by, mc.GetBudget(), mc.GetPeriod(), mc.GetUsed(), mc.GetLimit(), mc.GetUnit(),
		mc.GetResetsAt().AsTime().UTC().Format(time.RFC3339))
	if r := d.GetReason(); r != "" && d.GetSource() == agentplanev1.DecisionSource_DECISION_SOURCE_HUMAN {
		msg += ": " + hitl.TruncateUTF8(r, 512)
	}
	op.Task().Failure = &agentplanev1.TaskFailure{Reason: tasks.FailureModelCallRejected, Message: msg}
	return op.SetState(agentplanev1.TaskState_TASK_STATE_FAILED, tasks.FailureModelCallRejected)
}
