package tasks

import (
	"context"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// maxReasonBytes bounds a caller's cancel reason.
const maxReasonBytes = 1024

func terminalError(rec *storagev1.TaskRecord, what string) error {
	return apierr.FailedPrecondition(apierr.ReasonTaskTerminal, "task %s already ended (%s); %s", rec.GetTaskId(), rec.GetState(), what)
}

// Cancel ends a task as CANCELED, recording who asked and why. A task that a runtime
// holds is canceled at once too; the lease is revoked, so the runtime's writes are
// refused (LEASE_LOST) and its next heartbeat reports the cancellation. A terminal
// task is FAILED_PRECONDITION (TASK_TERMINAL), except for a retry of a cancel made
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
		if err := cancelOp(op, principal, reason); err != nil {
			return err
		}
		return current(op, nil)
	}, current)
	return task, err
}

// cancelOp ends a task that has not ended as CANCELED.
func cancelOp(op *Op, principal, reason string) error {
	rec := op.Task()
	held := rec.GetLease() != nil && !rec.GetLease().GetRevoked()
	rec.Cancellation = &storagev1.Cancellation{Reason: reason, RequestedBy: principal, Time: timestamppb.New(op.now), RuntimeHeld: held}
	if err := op.Append(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_CancelRequested{
		CancelRequested: &agentplanev1.CancelRequested{Reason: reason, RequestedBy: principal},
	}}); err != nil {
		return err
	}
	return op.SetState(agentplanev1.TaskState_TASK_STATE_CANCELED, StateCanceled)
}

// CancelIn is Cancel inside the caller's transaction w (now fixed before it), for a
// task that the caller found not terminal; a terminal one is left as it is. reason
// is the caller's (at most 1024 bytes).
func (m *Manager) CancelIn(w store.Writer, now time.Time, tenant, taskID, principal, reason string) error {
	rec, err := w.GetTask(tenant, taskID)
	if err != nil || isTerminal(rec.GetState()) {
		return err
	}
	op := m.newOp(w, now, rec)
	if err := cancelOp(op, principal, reason); err != nil {
		return err
	}
	return op.flush()
}

// Continue resumes a task waiting in INPUT_REQUIRED for its caller, with exactly
// one of message and outputs:
//
//   - message, for a chat-mode pause (its __auto_pause__ interrupt): the message is
//     logged and handed to the next lease;
//   - outputs, for a task waiting for the outputs of client-executed tool calls (its
//     TOOL_OUTPUT_REQUIRED interrupts): one output per pending call, each logged as
//     the call's ToolResult and handed to the next lease.
//
// The pause is resolved and the task goes back to the queue in SUBMITTED. A task
// waiting for a reviewer's decision, or in any other state, is FAILED_PRECONDITION;
// so is the wrong kind of input, or outputs naming a call the task does not wait for
// or missing one it does (TASK_TOOL_OUTPUTS_MISMATCH). A message over
// Config.MaxInputBytes is RESOURCE_EXHAUSTED. A retry of a continue made under req
// returns the task as it is now and delivers nothing, whatever the task did since.
func (m *Manager) Continue(ctx context.Context, tenant, taskID, principal string, message *agentplanev1.Message, outputs *agentplanev1.ToolOutputs, req Request) (*agentplanev1.Task, error) {
	switch {
	case message == nil && outputs == nil:
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "a message or tool_outputs is required")
	case message != nil:
		if err := CheckUserMessage("message", message, m.cfg.MaxInputBytes); err != nil {
			return nil, err
		}
		message = userMessage(message)
	default:
		seen := map[string]bool{}
		for i, o := range outputs.GetOutputs() {
			switch id := o.GetCallId(); {
			case id == "":
				return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "tool_outputs.outputs[%d].call_id is required", i)
			case seen[id]:
				return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "tool_outputs names call %q twice", id)
			default:
				seen[id] = true
			}
		}
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
		var waiting []*storagev1.InterruptRecord // TOOL_OUTPUT_REQUIRED, in pending order
		for _, id := range rec.GetPendingInterruptIds() {
			in, err := op.Writer().GetInterrupt(rec.GetTenant(), id)
			if err != nil {
				return err
			}
			switch in.GetInterrupt().GetKind() {
			case agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE:
				pause = in
			case agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED:
				waiting = append(waiting, in)
			default:
				return apierr.FailedPrecondition(apierr.ReasonTaskState,
					"task %s waits for a decision on interrupt %s; resolve it with HitlService.ResolveInterrupt", rec.GetTaskId(), id).
					WithMetadata(apierr.MetaTaskID, rec.GetTaskId()).WithMetadata(apierr.MetaInterruptID, id).
					WithMetadata(apierr.MetaResolveWith, apierr.ResolveWithResolveInterrupt)
			}
		}
		if (pause == nil && len(waiting) == 0) || rec.GetLease() != nil {
			return apierr.FailedPrecondition(apierr.ReasonTaskState, "task %s is not paused at the end of a turn", rec.GetTaskId())
		}
		resolved := []*storagev1.InterruptRecord{pause}
		if message != nil {
			if len(waiting) > 0 {
				return outputsMismatch(rec, waiting, "task %s waits for the outputs of client tool calls %s, not a message; continue it with tool_outputs",
					rec.GetTaskId(), strings.Join(callIDs(waiting), ", "))
			}
			if _, err := op.AppendContent(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_Message{Message: message}}); err != nil {
				return err
			}
			rec.ContinueMessages = append(rec.ContinueMessages, message)
		} else {
			if len(waiting) == 0 {
				return outputsMismatch(rec, nil, "task %s waits for a user message at the end of its turn, not for tool outputs; continue it with a message", rec.GetTaskId())
			}
			byCall := map[string]*agentplanev1.ToolOutput{}
			for _, o := range outputs.GetOutputs() {
				byCall[o.GetCallId()] = o
			}
			ids := callIDs(waiting)
			for _, o := range outputs.GetOutputs() {
				if !slices.Contains(ids, o.GetCallId()) {
					return outputsMismatch(rec, waiting, "task %s does not wait for the output of call %q; it waits for %s", rec.GetTaskId(), o.GetCallId(), strings.Join(ids, ", "))
				}
			}
			for _, id := range ids {
				if byCall[id] == nil {
					return outputsMismatch(rec, waiting, "tool_outputs has no output for call %q; the task waits for %s", id, strings.Join(ids, ", "))
				}
			}
			resolved = waiting
			for _, in := range waiting {
				o := byCall[in.GetInterrupt().GetCallId()]
				res := &agentplanev1.ToolResult{
					CallId: o.GetCallId(), ToolName: in.GetInterrupt().GetToolOutput().GetToolName(),
					Result: o.GetResult(), IsError: o.GetIsError(), Node: in.GetInterrupt().GetNode(),
				}
				if err := op.useResult(res); err != nil {
					return err
				}
				if _, err := op.AppendContent(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_ToolResult{ToolResult: res}}); err != nil {
					return err
				}
				rec.ContinueToolResults = append(rec.ContinueToolResults, res)
			}
		}
		for _, in := range resolved {
			decision, err := hitl.DecideContinue(in.GetInterrupt(), principal, op.now)
			if err != nil {
				return err
			}
			in.Interrupt = hitl.Resolved(in.GetInterrupt(), decision)
			if err := op.Writer().PutInterrupt(in); err != nil {
				return err
			}
			if err := op.Append(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_InterruptResolved{
				InterruptResolved: hitl.InterruptResolvedEvent(decision),
			}}); err != nil {
				return err
			}
			rec.PendingInterruptIds = slices.DeleteFunc(rec.PendingInterruptIds, func(id string) bool {
				return id == in.GetInterrupt().GetInterruptId()
			})
		}
		if err := op.Resume(StateContinued); err != nil {
			return err
		}
		return current(op, nil)
	}, current)
	return task, err
}

func callIDs(ins []*storagev1.InterruptRecord) []string {
	ids := make([]string, len(ins))
	for i, in := range ins {
		ids[i] = in.GetInterrupt().GetCallId()
	}
	return ids
}

// outputsMismatch refuses a ContinueTask whose input is not what the task waits for.
func outputsMismatch(rec *storagev1.TaskRecord, waiting []*storagev1.InterruptRecord, format string, args ...any) error {
	return apierr.FailedPrecondition(apierr.ReasonToolOutputsMismatch, format, args...).
		WithMetadata(apierr.MetaTaskID, rec.GetTaskId()).
		WithMetadata("pending_call_ids", strings.Join(callIDs(waiting), ","))
}
