package tasks

import (
	"context"
	"slices"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// maxReasonBytes bounds a caller's cancel reason.
const maxReasonBytes = 1024

func terminalError(rec *storagev1.TaskRecord, what string) error {
	return apierr.FailedPrecondition(apierr.ReasonTaskTerminal, "task %s already ended (%s); %s", rec.GetTaskId(), rec.GetState(), what)
}

// Cancel ends a task as CANCELED, recording who asked and why. A task that a runtime
// holds is canceled at once too; the lease is revoked, so the runtime's writes are
// refused (lease.lost) and its next heartbeat reports the cancellation. A terminal
// task is FAILED_PRECONDITION (task.terminal), except for a retry of a cancel made
// under req, which returns the task as it is now.
func (m *Manager) Cancel(ctx context.Context, tenant, taskID, principal, reason string, req Request) (*agentplanev1.Task, error) {
	if len(reason) > maxReasonBytes {
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "reason is longer than %d bytes", maxReasonBytes)
	}
	var task *agentplanev1.Task
	current := func(op *Op, _ *storagev1.AppliedRequest) error {
		var err error
		task, err = op.APITask()
		return err
	}
	err := m.UpdateTaskOnce(ctx, tenant, taskID, req, func(op *Op) error {
		task = nil
		rec := op.Task()
		if isTerminal(rec.GetState()) {
			return terminalError(rec, "there is nothing to cancel")
		}
		held := rec.GetLease() != nil && !rec.GetLease().GetRevoked()
		rec.Cancellation = &storagev1.Cancellation{Reason: reason, RequestedBy: principal, Time: timestamppb.New(op.now), RuntimeHeld: held}
		if err := op.Append(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_CancelRequested{
			CancelRequested: &agentplanev1.CancelRequested{Reason: reason, RequestedBy: principal},
		}}); err != nil {
			return err
		}
		if err := op.SetState(agentplanev1.TaskState_TASK_STATE_CANCELED, StateCanceled); err != nil {
			return err
		}
		return current(op, nil)
	}, current)
	return task, err
}

// Continue resumes a task paused at the end of a chat turn (INPUT_REQUIRED on its
// __auto_pause__ interrupt) with the user's next message: the message is logged, the
// pause is resolved, and the task goes back to the queue in SUBMITTED; the next lease
// carries the message. A task waiting for a reviewer's decision, or in any other
// state, is FAILED_PRECONDITION. A message over Config.MaxInputBytes is
// RESOURCE_EXHAUSTED. A retry of a continue made under req returns the task as it is
// now and delivers nothing, whatever the task did since.
func (m *Manager) Continue(ctx context.Context, tenant, taskID, principal, message string, req Request) (*agentplanev1.Task, error) {
	switch {
	case message == "":
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "message is required")
	case int64(len(message)) > m.cfg.MaxInputBytes:
		return nil, apierr.ResourceExhausted("message of %d bytes exceeds the %d-byte limit (limits.max_input_bytes)", len(message), m.cfg.MaxInputBytes)
	}
	var task *agentplanev1.Task
	current := func(op *Op, _ *storagev1.AppliedRequest) error {
		var err error
		task, err = op.APITask()
		return err
	}
	err := m.UpdateTaskOnce(ctx, tenant, taskID, req, func(op *Op) error {
		task = nil
		rec := op.Task()
		switch {
		case isTerminal(rec.GetState()):
			return terminalError(rec, "start a new task instead")
		case rec.GetState() != agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED:
			return apierr.FailedPrecondition(apierr.ReasonTaskState,
				"task %s is %s; ContinueTask resumes a task paused at the end of a turn (INPUT_REQUIRED)", rec.GetTaskId(), rec.GetState()).
				WithMetadata(apierr.MetaTaskID, rec.GetTaskId()).WithMetadata(apierr.MetaState, rec.GetState().String()).
				WithMetadata(apierr.MetaWantState, agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED.String())
		}
		var pause *storagev1.InterruptRecord
		for _, id := range rec.GetPendingInterruptIds() {
			in, err := op.Writer().GetInterrupt(rec.GetTenant(), id)
			if err != nil {
				return err
			}
			if in.GetInterrupt().GetKind() != agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE {
				return apierr.FailedPrecondition(apierr.ReasonTaskState,
					"task %s waits for a decision on interrupt %s; resolve it with HitlService.ResolveInterrupt", rec.GetTaskId(), id).
					WithMetadata(apierr.MetaTaskID, rec.GetTaskId()).WithMetadata(apierr.MetaInterruptID, id).
					WithMetadata(apierr.MetaResolveWith, apierr.ResolveWithResolveInterrupt)
			}
			pause = in
		}
		if pause == nil || rec.GetLease() != nil {
			return apierr.FailedPrecondition(apierr.ReasonTaskState, "task %s is not paused at the end of a turn", rec.GetTaskId())
		}
		decision, err := hitl.DecideContinue(pause.GetInterrupt(), principal, op.now)
		if err != nil {
			return err
		}
		if _, err := op.AppendContent(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_Message{Message: &agentplanev1.ChatMessage{
			Role: agentplanev1.MessageRole_MESSAGE_ROLE_USER, Text: message,
		}}}); err != nil {
			return err
		}
		pause.Interrupt = hitl.Resolved(pause.GetInterrupt(), decision)
		if err := op.Writer().PutInterrupt(pause); err != nil {
			return err
		}
		if err := op.Append(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_InterruptResolved{
			InterruptResolved: hitl.InterruptResolvedEvent(decision),
		}}); err != nil {
			return err
		}
		rec.PendingInterruptIds = slices.DeleteFunc(rec.PendingInterruptIds, func(id string) bool {
			return id == pause.GetInterrupt().GetInterruptId()
		})
		rec.ContinueMessages = append(rec.ContinueMessages, message)
		if err := op.Resume(StateContinued); err != nil {
			return err
		}
		return current(op, nil)
	}, current)
	return task, err
}
