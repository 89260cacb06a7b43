package tasks

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// maxFailureMessage bounds FailTask's message as stored.
const maxFailureMessage = 4096

// HeartbeatResult is what a heartbeat tells the runtime.
type HeartbeatResult struct {
	// Deadline is the lease's new deadline.
	Deadline time.Time
	// Canceled says the task was canceled: stop work and let the lease go.
	Canceled bool
	// CancelReason is the caller's reason, when Canceled.
	CancelReason string
}

// Heartbeat extends a lease to now + Config.LeaseTTL. When the task was canceled while
// the runtime held the lease, it reports Canceled (and keeps doing so) instead of
// failing, so the runtime learns why it must stop. A stale or expired lease is
// lease.lost.
func (m *Manager) Heartbeat(ctx context.Context, ref *agentplanev1.LeaseRef) (HeartbeatResult, error) {
	var res HeartbeatResult
	err := m.updateLeased(ctx, ref, true, Request{}, func(op *Op) error {
		l := op.rec.GetLease()
		if l.GetRevoked() {
			res = HeartbeatResult{Deadline: l.GetDeadline().AsTime(), Canceled: true, CancelReason: op.rec.GetCancellation().GetReason()}
			return nil
		}
		op.touched = true
		l.Deadline = timestamppb.New(op.now.Add(op.m.cfg.LeaseTTL))
		res = HeartbeatResult{Deadline: l.GetDeadline().AsTime()}
		return nil
	}, nil)
	return res, err
}

// runtimePayload turns a reported event into a log payload.
func runtimePayload(ev *agentplanev1.RuntimeEvent) (*agentplanev1.TaskEvent, error) {
	switch p := ev.GetPayload().(type) {
	case *agentplanev1.RuntimeEvent_Message:
		return &agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_Message{Message: p.Message}}, nil
	case *agentplanev1.RuntimeEvent_ToolCall:
		return &agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_ToolCall{ToolCall: p.ToolCall}}, nil
	case *agentplanev1.RuntimeEvent_ToolResult:
		return &agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_ToolResult{ToolResult: p.ToolResult}}, nil
	case *agentplanev1.RuntimeEvent_Note:
		return &agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_Note{Note: p.Note}}, nil
	}
	return nil, apierr.InvalidArgument(apierr.ReasonEventInvalid, "an event needs exactly one of message, tool_call, tool_result, note")
}

// ReportEvents appends a runtime's events, in order, in one transaction, and returns
// the sequence of the last one. Either all are appended or none: one event that is
// malformed or over a limit (RESOURCE_EXHAUSTED) refuses the whole report. More than
// Config.MaxEventsPerReport events is INVALID_ARGUMENT (limit.exceeded) at once: the
// limit keeps a report under the transport's request cap, whose refusal would not say
// what to do.
//
// A tool call (ToolCall event) runs under the decision the gate recorded for its call
// id (useDecision): a call that was never checked, still waits, was rejected, names
// another tool, has other arguments than the decision's, or was reported before is
// FAILED_PRECONDITION (tool_call.not_approved), and so is the whole report.
//
// A report made under req that the task already appended is not appended again: it
// returns the sequence the first report returned.
func (m *Manager) ReportEvents(ctx context.Context, ref *agentplanev1.LeaseRef, req Request, events []*agentplanev1.RuntimeEvent) (int64, error) {
	if n := m.cfg.MaxEventsPerReport; n > 0 && len(events) > n {
		return 0, apierr.New(codes.InvalidArgument, apierr.ReasonResourceExhausted,
			"%d events in one report; at most %d are allowed (limits.max_events_per_report): split the batch", len(events), m.cfg.MaxEventsPerReport)
	}
	payloads := make([]*agentplanev1.TaskEvent, len(events))
	for i, ev := range events {
		p, err := runtimePayload(ev)
		if err != nil {
			return 0, apierr.InvalidArgument(apierr.ReasonEventInvalid, "events[%d]: an event needs exactly one of message, tool_call, tool_result, note", i)
		}
		if tc := p.GetToolCall(); tc != nil && (tc.GetCallId() == "" || tc.GetToolName() == "") {
			return 0, apierr.InvalidArgument(apierr.ReasonEventInvalid, "events[%d]: a tool call needs the call_id and tool_name it was checked with", i)
		}
		payloads[i] = p
	}
	var last int64
	err := m.UpdateLeasedOnce(ctx, ref, req, func(op *Op) error {
		last = op.rec.GetLastSequence()
		for i, p := range payloads {
			if tc := p.GetToolCall(); tc != nil {
				if err := op.useDecision(tc); err != nil {
					return fmt.Errorf("events[%d]: %w", i, err)
				}
			}
			seq, err := op.AppendContent(p)
			if err != nil {
				return fmt.Errorf("events[%d]: %w", i, err)
			}
			last = seq
		}
		op.SetResult("", last)
		return nil
	}, func(_ *Op, a *storagev1.AppliedRequest) error {
		last = a.GetResultSequence()
		return nil
	})
	return last, err
}

// useDecision spends the decision tc runs under. Every call is asked about before it
// runs (RuntimeService.CheckToolCall), and every answer is recorded under
// hitl.InterruptID(task, call id): an interrupt a person decides, or the record of a
// call decided at once (ALLOW, or a rejection). A call without such a record was
// never asked about, so no policy saw it: it is refused like a rejected one, since
// accepting it would let a runtime run any call by not asking. The decision is
// single-use: InterruptRecord.consumed_epoch is set to the lease epoch that reported
// the call, and a second report of the call id is refused.
func (o *Op) useDecision(tc *agentplanev1.ToolCall) error {
	id := tc.GetCallId()
	rec, err := o.w.GetInterrupt(o.rec.GetTenant(), hitl.InterruptID(o.rec.GetTaskId(), id))
	switch {
	case store.IsNotFound(err):
		return hitl.NotApproved(id, "call %q of task %s was never checked; ask RuntimeService.CheckToolCall before running a tool", id, o.rec.GetTaskId())
	case err != nil:
		return err
	}
	if err := hitl.CheckRun(rec.GetInterrupt(), tc); err != nil {
		return err
	}
	if e := rec.GetConsumedEpoch(); e != 0 {
		return hitl.NotApproved(id, "call %q was already reported (under lease epoch %d): a decision lets a call run once; give a new call a new call_id", id, e)
	}
	rec.ConsumedEpoch = o.epoch
	// A spent decision is not handed to later leases: the report of its call is in
	// the history they get. This also keeps the task record from growing with every
	// approval of a long turn.
	if i := slices.Index(o.rec.GetResumeInterruptIds(), rec.GetInterrupt().GetInterruptId()); i >= 0 {
		o.touched = true
		o.rec.ResumeInterruptIds = slices.Delete(o.rec.ResumeInterruptIds, i, i+1)
	}
	return o.w.PutInterrupt(rec)
}

// Pause ends a chat turn: the assistant's last message (if any) is appended, the task
// waits in INPUT_REQUIRED on a synthetic __auto_pause__ interrupt, and the lease is
// released. Only Continue resumes it. The task must be WORKING. A retry of a pause made
// under req returns the interrupt the first call raised.
func (m *Manager) Pause(ctx context.Context, ref *agentplanev1.LeaseRef, req Request, message, node string) (*agentplanev1.Interrupt, error) {
	id := newID()
	var in *agentplanev1.Interrupt
	err := m.UpdateLeasedOnce(ctx, ref, req, func(op *Op) error {
		in = nil
		rec := op.Task()
		if rec.GetState() != agentplanev1.TaskState_TASK_STATE_WORKING {
			return apierr.FailedPrecondition(apierr.ReasonTaskState,
				"task %s is %s; only a WORKING task can pause at the end of a turn", rec.GetTaskId(), rec.GetState())
		}
		if message != "" {
			if _, err := op.AppendContent(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_Message{Message: &agentplanev1.ChatMessage{
				Role: agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, Text: message, Node: node,
			}}}); err != nil {
				return err
			}
		}
		spec, err := op.Spec()
		if err != nil {
			return err
		}
		in = hitl.NewAutoPauseInterrupt(hitl.InterruptMeta{
			InterruptID: id, TaskID: rec.GetTaskId(), Tenant: rec.GetTenant(),
			SessionID: rec.GetSessionId(), OriginalInput: spec.GetInput(), Now: op.now,
		}, node)
		if err := op.Writer().PutInterrupt(&storagev1.InterruptRecord{
			Interrupt: in, CreateTime: timestamppb.New(op.now), RaisedEpoch: op.epoch,
		}); err != nil {
			return err
		}
		if err := op.Append(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_InterruptRaised{
			InterruptRaised: &agentplanev1.InterruptRaised{Interrupt: in},
		}}); err != nil {
			return err
		}
		rec.PendingInterruptIds = append(rec.PendingInterruptIds, id)
		op.SetResult(id, 0)
		op.HandBack()
		if err := op.ReleaseLease(agentplanev1.LeaseChangeKind_LEASE_CHANGE_KIND_RELEASED); err != nil {
			return err
		}
		return op.SetState(agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED, StateTurnEnded)
	}, func(op *Op, a *storagev1.AppliedRequest) error {
		rec, err := op.Writer().GetInterrupt(op.rec.GetTenant(), a.GetResultId())
		in = rec.GetInterrupt()
		return err
	})
	return in, err
}

// Complete ends the task as COMPLETED with its output and releases the lease. The
// output is bound by Config.MaxEventBytes but not by the task's history limits, so a
// task that reached them can still complete.
func (m *Manager) Complete(ctx context.Context, ref *agentplanev1.LeaseRef, req Request, output *agentplanev1.TaskOutput) (*agentplanev1.Task, error) {
	if output == nil {
		output = &agentplanev1.TaskOutput{}
	}
	return m.endLeased(ctx, ref, req, func(op *Op) error {
		if _, err := op.append(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_Output{Output: output}}, limitSize); err != nil {
			return err
		}
		op.Task().Output = output
		if err := op.ReleaseLease(agentplanev1.LeaseChangeKind_LEASE_CHANGE_KIND_RELEASED); err != nil {
			return err
		}
		return op.SetState(agentplanev1.TaskState_TASK_STATE_COMPLETED, StateCompleted)
	})
}

// Fail ends the task as FAILED with reason (default runtime.error) and message, or,
// with retry, releases the lease and returns the task to the queue; a retry counts as
// a lost attempt, so past Config.MaxAttempts it fails with lease.attempts_exhausted.
func (m *Manager) Fail(ctx context.Context, ref *agentplanev1.LeaseRef, req Request, reason, message string, retry bool) (*agentplanev1.Task, error) {
	if reason == "" {
		reason = FailureRuntime
	}
	if len(reason) > 128 {
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "reason is longer than 128 bytes; put details in message")
	}
	if len(message) > maxFailureMessage {
		message = message[:maxFailureMessage] + "…"
	}
	return m.endLeased(ctx, ref, req, func(op *Op) error {
		rec := op.Task()
		runtimeID := rec.GetLease().GetRuntimeId()
		if err := op.ReleaseLease(agentplanev1.LeaseChangeKind_LEASE_CHANGE_KIND_RELEASED); err != nil {
			return err
		}
		if retry {
			return op.lostAttempt(fmt.Sprintf("runtime %q gave the task back (%s: %s)", runtimeID, reason, message))
		}
		rec.Failure = &agentplanev1.TaskFailure{Reason: reason, Message: message}
		return op.SetState(agentplanev1.TaskState_TASK_STATE_FAILED, reason)
	})
}

// endLeased runs a fenced change made under req and returns the task as it is after
// it; a retry of it returns the task as it is now.
func (m *Manager) endLeased(ctx context.Context, ref *agentplanev1.LeaseRef, req Request, fn func(*Op) error) (*agentplanev1.Task, error) {
	var task *agentplanev1.Task
	current := func(op *Op) error {
		var err error
		task, err = op.APITask()
		return err
	}
	err := m.UpdateLeasedOnce(ctx, ref, req, func(op *Op) error {
		task = nil
		if err := fn(op); err != nil {
			return err
		}
		return current(op)
	}, func(op *Op, _ *storagev1.AppliedRequest) error { return current(op) })
	return task, err
}
