package tasks

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
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
// LEASE_LOST.
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
// Config.MaxEventsPerReport events is INVALID_ARGUMENT (LIMIT_EXCEEDED) at once: the
// limit keeps a report under the transport's request cap, whose refusal would not say
// what to do. A message without an id is given one.
//
// Tool calls and results follow the sequence of docs/hitl.md ("Event sequence"): a
// ToolCall is reported under the decision the gate recorded for its call id
// (useDecision): a call that was never checked, still waits, names another tool, has
// other arguments than the decision's (the ruled ones, for a rejected call), or was
// reported before is FAILED_PRECONDITION (TOOL_CALL_NOT_APPROVED). A ToolResult
// answers a call reported before it, once (useResult): anything else is
// FAILED_PRECONDITION (TOOL_RESULT_UNEXPECTED). Either refuses the whole report.
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
		if tr := p.GetToolResult(); tr != nil && tr.GetCallId() == "" {
			return 0, apierr.InvalidArgument(apierr.ReasonEventInvalid, "events[%d]: a tool result needs the call_id of its call", i)
		}
		if msg := p.GetMessage(); msg != nil {
			if err := checkMessage(fmt.Sprintf("events[%d].message", i), msg); err != nil {
				return 0, err
			}
			withID(msg)
		}
		payloads[i] = p
	}
	var last int64
	err := m.UpdateLeasedOnce(ctx, ref, req, func(op *Op) error {
		last = op.rec.GetLastSequence()
		for i, p := range payloads {
			var seq int64
			var err error
			switch {
			case p.GetToolCall() != nil:
				seq, err = op.ReportCall(p.GetToolCall())
			case p.GetToolResult() != nil:
				if err = op.useResult(p.GetToolResult()); err == nil {
					seq, err = op.AppendContent(p)
				}
			default:
				seq, err = op.AppendContent(p)
			}
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

// ReportCall appends the ToolCall tc under the decision the gate recorded for its
// call id, spending it (useDecision): what ReportEvents does for each call it is
// given, and what CheckToolCall does for an allowed call when asked to
// (report_allowed_call).
func (o *Op) ReportCall(tc *agentplanev1.ToolCall) (int64, error) {
	if err := o.useDecision(tc); err != nil {
		return 0, err
	}
	return o.AppendContent(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_ToolCall{ToolCall: tc}})
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
	o.touched = true
	o.rec.OpenCallIds = append(o.rec.OpenCallIds, id)
	// A spent decision is not handed to later leases: the report of its call is in
	// the history they get. This also keeps the task record from growing with every
	// approval of a long turn.
	if i := slices.Index(o.rec.GetResumeInterruptIds(), rec.GetInterrupt().GetInterruptId()); i >= 0 {
		o.touched = true
		o.rec.ResumeInterruptIds = slices.Delete(o.rec.ResumeInterruptIds, i, i+1)
	}
	return o.w.PutInterrupt(rec)
}

// useResult accepts the report of a tool result: it must answer a call reported
// before (in this report or an earlier one) that has no result yet, and fit the
// call's decision (hitl.CheckResult: a rejected call's result is an error). A result
// for a call nobody checked with the gate, or not reported yet, is refused
// (TOOL_RESULT_UNEXPECTED).
func (o *Op) useResult(tr *agentplanev1.ToolResult) error {
	id := tr.GetCallId()
	unexpected := func(format string, args ...any) error {
		return apierr.FailedPrecondition(apierr.ReasonToolResultUnexpected, format, args...).WithMetadata("call_id", id)
	}
	rec, err := o.w.GetInterrupt(o.rec.GetTenant(), hitl.InterruptID(o.rec.GetTaskId(), id))
	switch {
	case store.IsNotFound(err):
		return unexpected("call %q of task %s was never checked; a result answers a call checked with RuntimeService.CheckToolCall and reported as a ToolCall", id, o.rec.GetTaskId())
	case err != nil:
		return err
	case rec.GetConsumedEpoch() == 0:
		return unexpected("call %q was not reported yet; report its ToolCall before its result", id)
	case rec.GetResultReported():
		return unexpected("call %q already has a result; a call has one", id)
	}
	if err := hitl.CheckResult(rec.GetInterrupt(), tr); err != nil {
		return err
	}
	rec.ResultReported = true
	o.touched = true
	o.rec.OpenCallIds = slices.DeleteFunc(o.rec.OpenCallIds, func(c string) bool { return c == id })
	return o.w.PutInterrupt(rec)
}

// checkTurnEnd refuses to end a turn while a reported call has no result, except
// the client's calls (clientCalls), whose outputs the task is about to wait for.
func (o *Op) checkTurnEnd(what string, clientCalls []*agentplanev1.ToolCall) error {
	for _, id := range o.rec.GetOpenCallIds() {
		if !slices.ContainsFunc(clientCalls, func(c *agentplanev1.ToolCall) bool { return c.GetCallId() == id }) {
			return apierr.FailedPrecondition(apierr.ReasonToolResultUnexpected,
				"call %q has no result; report its ToolResult (is_error if it failed or was lost) before %s", id, what).
				WithMetadata("call_id", id)
		}
	}
	return nil
}

// Pause ends a turn: the assistant's last message (if any) is appended, the lease is
// released and the task waits in INPUT_REQUIRED, on a synthetic __auto_pause__
// interrupt (chat mode), or, when clientCalls are given, on one TOOL_OUTPUT_REQUIRED
// interrupt per call (reported calls of function tools the client executes, as
// reported). Only Continue resumes it. The task must be WORKING, and every other
// reported call must have its result (checkTurnEnd). A retry of a pause made under req
// returns the interrupts the first call raised.
func (m *Manager) Pause(ctx context.Context, ref *agentplanev1.LeaseRef, req Request, message *agentplanev1.Message, node string, clientCalls []*agentplanev1.ToolCall) (pause *agentplanev1.Interrupt, waits []*agentplanev1.Interrupt, err error) {
	if message != nil {
		if err := checkMessage("message", message); err != nil {
			return nil, nil, err
		}
		message = proto.CloneOf(message)
		withID(message)
		if message.Role == agentplanev1.MessageRole_MESSAGE_ROLE_UNSPECIFIED {
			message.Role = agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT
		}
		if message.Node == "" {
			message.Node = node
		}
	}
	id := newID()
	err = m.UpdateLeasedOnce(ctx, ref, req, func(op *Op) error {
		pause, waits = nil, nil
		rec := op.Task()
		if rec.GetState() != agentplanev1.TaskState_TASK_STATE_WORKING {
			return apierr.FailedPrecondition(apierr.ReasonTaskState,
				"task %s is %s; only a WORKING task can pause at the end of a turn", rec.GetTaskId(), rec.GetState())
		}
		if err := op.checkTurnEnd("ending the turn", clientCalls); err != nil {
			return err
		}
		if message != nil {
			if _, err := op.AppendContent(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_Message{Message: message}}); err != nil {
				return err
			}
		}
		spec, err := op.Spec()
		if err != nil {
			return err
		}
		meta := hitl.InterruptMeta{
			TaskID: rec.GetTaskId(), Tenant: rec.GetTenant(),
			SessionID: rec.GetSessionId(), OriginalInput: MessageText(spec.GetInput()), Now: op.now,
		}
		var raised []*agentplanev1.Interrupt
		if len(clientCalls) == 0 {
			meta.InterruptID = id
			pause = hitl.NewAutoPauseInterrupt(meta, node)
			raised = append(raised, pause)
		}
		for _, c := range clientCalls {
			if err := op.checkClientCall(c); err != nil {
				return err
			}
			meta.InterruptID = hitl.ToolOutputInterruptID(rec.GetTaskId(), c.GetCallId())
			in := hitl.NewToolOutputInterrupt(meta, node, c)
			waits = append(waits, in)
			raised = append(raised, in)
		}
		for _, in := range raised {
			if err := op.Writer().PutInterrupt(&storagev1.InterruptRecord{
				Interrupt: in, CreateTime: timestamppb.New(op.now), RaisedEpoch: op.epoch,
			}); err != nil {
				return err
			}
			// A client call's interrupt carries the model's arguments: content.
			if _, err := op.AppendContent(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_InterruptRaised{
				InterruptRaised: &agentplanev1.InterruptRaised{Interrupt: in},
			}}); err != nil {
				return err
			}
			rec.PendingInterruptIds = append(rec.PendingInterruptIds, in.GetInterruptId())
		}
		if pause != nil {
			op.SetResult(pause.GetInterruptId(), 0)
		}
		op.HandBack()
		if err := op.ReleaseLease(agentplanev1.LeaseChangeKind_LEASE_CHANGE_KIND_RELEASED); err != nil {
			return err
		}
		reason := StateTurnEnded
		if len(clientCalls) > 0 {
			reason = StateToolOutputRequired
		}
		return op.SetState(agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED, reason)
	}, func(op *Op, a *storagev1.AppliedRequest) error {
		pause, waits = nil, nil
		get := func(id string) (*agentplanev1.Interrupt, error) {
			rec, err := op.Writer().GetInterrupt(op.rec.GetTenant(), id)
			return rec.GetInterrupt(), err
		}
		var err error
		if id := a.GetResultId(); id != "" {
			pause, err = get(id)
			return err
		}
		for _, c := range clientCalls {
			in, err := get(hitl.ToolOutputInterruptID(op.rec.GetTaskId(), c.GetCallId()))
			if err != nil {
				return err
			}
			waits = append(waits, in)
		}
		return nil
	})
	return pause, waits, err
}

// checkClientCall refuses a call PauseTask names as the client's that is not an open
// reported call (ToolCall without ToolResult) the gate let run, or that differs from
// its report.
func (o *Op) checkClientCall(c *agentplanev1.ToolCall) error {
	id := c.GetCallId()
	unexpected := func(format string, args ...any) error {
		return apierr.FailedPrecondition(apierr.ReasonToolResultUnexpected, format, args...).WithMetadata("call_id", id)
	}
	if !slices.Contains(o.rec.GetOpenCallIds(), id) {
		return unexpected("call %q is not a reported call without a result; a client tool call is checked and reported as a ToolCall before the task waits for its output", id)
	}
	rec, err := o.w.GetInterrupt(o.rec.GetTenant(), hitl.InterruptID(o.rec.GetTaskId(), id))
	if err != nil {
		return err
	}
	if hitl.Rejected(rec.GetInterrupt().GetDecision()) {
		return unexpected("call %q was rejected; report its is_error result instead of asking the client to run it", id)
	}
	if err := hitl.CheckRun(rec.GetInterrupt(), c); err != nil {
		return unexpected("call %q is not the call reported: %v", id, err)
	}
	return nil
}

// Complete ends the task as COMPLETED with its output and releases the lease. Every
// reported tool call must have its result (checkTurnEnd). The
// output is bound by Config.MaxEventBytes but not by the task's history limits, so a
// task that reached them can still complete.
func (m *Manager) Complete(ctx context.Context, ref *agentplanev1.LeaseRef, req Request, output *agentplanev1.TaskOutput) (*agentplanev1.Task, error) {
	if output == nil {
		output = &agentplanev1.TaskOutput{}
	}
	if msg := output.GetMessage(); msg != nil {
		if err := checkMessage("output.message", msg); err != nil {
			return nil, err
		}
		output = proto.CloneOf(output)
		withID(output.Message)
		if output.Message.Role == agentplanev1.MessageRole_MESSAGE_ROLE_UNSPECIFIED {
			output.Message.Role = agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT
		}
	}
	return m.endLeased(ctx, ref, req, func(op *Op) error {
		if err := op.checkTurnEnd("completing the task", nil); err != nil {
			return err
		}
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
