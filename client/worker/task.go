package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Task is one leased task as a handler sees it: what the lease carries, and fenced
// writes under the lease. Its methods are safe for concurrent use.
type Task struct {
	w      *Worker
	lease  *agentplanev1.Lease
	ref    *agentplanev1.LeaseRef
	log    *slog.Logger
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	deadline time.Time
	ended    string                             // how this runtime ended the task, "" while it runs
	resolved map[string]*agentplanev1.Interrupt // by call id, until used
	pending  map[string]*agentplanev1.Interrupt // by call id
	// waitStopped is set when the worker's stop ended an AwaitDecision: the task is
	// handed back by suspending it.
	waitStopped bool
	steps       map[string]string // recorded step results by name (Step); nil until read
}

func newTask(w *Worker, l *agentplanev1.Lease) *Task {
	t := &Task{
		w:        w,
		lease:    l,
		ref:      &agentplanev1.LeaseRef{TaskId: l.GetTask().GetTaskId(), LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()},
		cancel:   func(error) {},
		deadline: l.GetDeadline().AsTime(),
		resolved: byCallID(l.GetResolvedInterrupts()),
		pending:  byCallID(l.GetPendingInterrupts()),
	}
	t.log = w.log.With("task_id", t.ref.GetTaskId(), "lease_id", t.ref.GetLeaseId(), "epoch", t.ref.GetEpoch())
	return t
}

func byCallID(its []*agentplanev1.Interrupt) map[string]*agentplanev1.Interrupt {
	m := make(map[string]*agentplanev1.Interrupt)
	for _, it := range its {
		if it.GetKind() == agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL && it.GetCallId() != "" {
			m[it.GetCallId()] = it
		}
	}
	return m
}

// ID is the task id.
func (t *Task) ID() string { return t.ref.GetTaskId() }

// Lease is the lease as granted: the task, its resolved spec, the history cursor, the
// attempt, and what a resumed task needs (resolved and pending interrupts, continue
// messages). Do not modify it.
func (t *Task) Lease() *agentplanev1.Lease { return t.lease }

// Input is the user's message that started the task.
func (t *Task) Input() *agentplanev1.Message { return t.lease.GetTask().GetInput() }

// InputText is the text of the user's message that started the task.
func (t *Task) InputText() string { return client.MessageText(t.Input()) }

// Spec is the resolved spec to run.
func (t *Task) Spec() *agentplanev1.ResolvedSpec { return t.lease.GetSpec() }

// Attempt is the attempt number of this lease, from 1.
func (t *Task) Attempt() int32 { return t.lease.GetAttempt() }

// ContinueMessages are the user messages ContinueTask delivered since the task last
// paused (chat mode: what the user said after the turn ended).
func (t *Task) ContinueMessages() []*agentplanev1.Message { return t.lease.GetContinueMessages() }

// ContinueToolResults are the outputs of client-executed tool calls ContinueTask
// delivered since the task last paused (WaitForToolOutputs), as logged.
func (t *Task) ContinueToolResults() []*agentplanev1.ToolResult {
	return t.lease.GetContinueToolResults()
}

// ResolvedInterrupts are the interrupts decided while the task was suspended.
// ToolCall consults them by call id; they are here for handlers that rebuild their
// state some other way.
func (t *Task) ResolvedInterrupts() []*agentplanev1.Interrupt { return t.lease.GetResolvedInterrupts() }

// PendingInterrupts are interrupts still waiting for a decision; their calls must not
// run. ToolCall waits on them by call id.
func (t *Task) PendingInterrupts() []*agentplanev1.Interrupt { return t.lease.GetPendingInterrupts() }

// Ref is a copy of the lease reference, for RPCs the Task does not wrap.
func (t *Task) Ref() *agentplanev1.LeaseRef { return proto.CloneOf(t.ref) }

// Deadline is when the lease expires unless a heartbeat extends it.
func (t *Task) Deadline() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deadline
}

func (t *Task) setDeadline(d time.Time) {
	t.mu.Lock()
	t.deadline = d
	t.mu.Unlock()
}

// stop cancels the task's context with cause.
func (t *Task) stop(cause error) {
	t.log.Info("stopping task", "cause", cause)
	t.cancel(cause)
}

func (t *Task) stoppedWaiting() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.waitStopped
}

func (t *Task) endedAs() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ended
}

// write makes one fenced call. A refusal that means the task is no longer ours
// (LEASE_LOST, TASK_TERMINAL) also stops the task, and the error wraps ErrLeaseLost
// or ErrCanceled. A successful call that ends the task (end != "") marks it ended.
//
// A call that fails transiently (retryable: UNAVAILABLE, DEADLINE_EXCEEDED, or an
// error the server marks retryable, such as STORE_UNAVAILABLE while the database
// restarts) is made again, after the worker's backoff, while ctx lasts and the lease
// may still be renewed: until its deadline, which the heartbeats keep moving while
// they succeed. Every call the Task makes is safe to repeat (writes carry a request id
// that the caller builds once, outside call, so that every attempt sends the same one).
// A call still failing at the deadline stops the task with ErrLeaseLost: the lease
// expires and the control plane queues the task again, so an outage of the control
// plane or its database does not fail the task.
func (t *Task) write(ctx context.Context, what, end string, call func(context.Context) error) error {
	t.mu.Lock()
	ended := t.ended
	t.mu.Unlock()
	if ended != "" {
		return fmt.Errorf("%s: %w (%s)", what, ErrEnded, ended)
	}
	err := call(ctx)
	for failures := 1; err != nil && retryable(err) && ctx.Err() == nil; failures++ {
		left := time.Until(t.Deadline())
		if left <= 0 {
			cause := fmt.Errorf("%w: %s kept failing until the lease deadline (last error: %v)", ErrLeaseLost, what, err)
			t.stop(cause)
			return fmt.Errorf("%s: %w", what, cause)
		}
		t.log.Debug("call failed; repeating it", "call", what, "err", err)
		if !sleep(ctx, min(t.w.o.Backoff.Delay(failures), left)) {
			break
		}
		err = call(ctx)
	}
	if err == nil {
		if end != "" {
			t.mu.Lock()
			t.ended = end
			t.mu.Unlock()
		}
		return nil
	}
	if cause := stopCause(err); cause != nil {
		t.stop(cause)
		return fmt.Errorf("%s: %w: %w", what, cause, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Report appends events to the task's log in one transaction and returns the
// sequence of the last one. One call takes at most the deployment's
// Capabilities.limits.max_events_per_report events (4 with the default limits), so
// that it always fits the request size cap; more is INVALID_ARGUMENT LIMIT_EXCEEDED
// and appends nothing. Report a longer batch in several calls.
// A report repeated after a lost response is not appended twice.
func (t *Task) Report(ctx context.Context, events ...*agentplanev1.RuntimeEvent) (int64, error) {
	var last int64
	req := &agentplanev1.ReportEventsRequest{Lease: t.ref, Events: events, RequestId: client.NewRequestID()}
	err := t.write(ctx, "report events", "", func(ctx context.Context) error {
		resp, err := t.w.rt.ReportEvents(ctx, req)
		last = resp.GetLastSequence()
		return err
	})
	return last, err
}

// History reads the task's log after sequence after, oldest first, up to sequence
// until (0: up to the newest event when the read starts), calling fn for each event
// until fn returns false. It pages through RuntimeService.ReadTaskHistory under the
// lease: runtimes may not call WatchTask. A resumed handler reads up to
// Lease().GetHistoryCursor() to rebuild its state.
func (t *Task) History(ctx context.Context, after, until int64, fn func(*agentplanev1.TaskEvent) bool) error {
	for {
		var resp *agentplanev1.ReadTaskHistoryResponse
		err := t.write(ctx, "read history", "", func(ctx context.Context) error {
			var err error
			resp, err = t.w.rt.ReadTaskHistory(ctx, &agentplanev1.ReadTaskHistoryRequest{Lease: t.ref, AfterSequence: after})
			return err
		})
		if err != nil {
			return err
		}
		if until <= 0 {
			until = resp.GetLastSequence()
		}
		for _, ev := range resp.GetEvents() {
			if ev.GetSequence() > until || !fn(ev) {
				return nil
			}
			after = ev.GetSequence()
		}
		if len(resp.GetEvents()) == 0 || after >= until {
			return nil
		}
	}
}

// Say reports an assistant message.
func (t *Task) Say(ctx context.Context, text string) error {
	_, err := t.Report(ctx, MessageEvent(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, text, ""))
	return err
}

// Note reports a runtime note (progress, diagnostics).
func (t *Task) Note(ctx context.Context, text string, attrs map[string]string) error {
	_, err := t.Report(ctx, &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_Note{
		Note: &agentplanev1.RuntimeNote{Text: text, Attributes: attrs},
	}})
	return err
}

// MessageEvent builds a message event of one text part.
func MessageEvent(role agentplanev1.MessageRole, text, node string) *agentplanev1.RuntimeEvent {
	m := client.TextMessage(role, text)
	m.Node = node
	return &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_Message{Message: m}}
}

// Call is a tool call the model wants to make.
type Call struct {
	// ID is chosen by the runtime, unique in the task, and stable across replays:
	// a resumed task finds its decision by it.
	ID string
	// Name is the tool's name.
	Name string
	// Description is the tool's description, for the policy and the reviewer.
	Description string
	// ArgumentsJSON is the arguments exactly as the model produced them (JSON text,
	// possibly malformed); decisions bind its SHA-256.
	ArgumentsJSON string
	// Node is the agent (graph node) making the call.
	Node string
	// Trip is the zero-based model round-trip index.
	Trip int32
	// MessageID is the id of the assistant message (Message.message_id) whose model
	// call made this call, when the runtime reported one; it is carried on the
	// reported ToolCall event so the transcript ties the call to its message.
	MessageID string
	// Annotations are the MCP tool annotations, for an MCP tool.
	Annotations *agentplanev1.McpToolAnnotations
	// Delivery overrides the worker's Options.Delivery for this call.
	Delivery Delivery
	// OnInterrupt, when set, is called once the call is known to wait for a decision,
	// before waiting or suspending (for example to tell a person what to approve).
	OnInterrupt func(*agentplanev1.Interrupt)
}

// Gate is the answer to a tool call.
type Gate struct {
	// Call is the call asked about.
	Call Call
	// Allowed says the tool may run, with exactly ArgumentsJSON.
	Allowed bool
	// ArgumentsJSON is the arguments to run with: as produced, or as a reviewer
	// approved or edited them. Empty when not allowed.
	ArgumentsJSON string
	// Interrupt is the interrupt the call waited on, if it was gated.
	Interrupt *agentplanev1.Interrupt
	// Decision is the decision that allowed or rejected it, when there was one.
	Decision *agentplanev1.Decision
	// Reason says why the call may not run, in the form meant for the model.
	Reason string
	// Reported is set when the call was reported to the task's log already, by an
	// earlier lease of this task (the handler is replaying its turn after a lost
	// lease): the tool ran, or was running, then. Do not run it again; its result, if
	// it was reported (ResultReported), is in the history; if not, report one (an
	// is_error result saying it was lost will do) before ending the turn. Allowed is
	// false.
	Reported bool
	// ResultReported is set with Reported when the call's result is in the history too.
	ResultReported bool

	// reportedWithCheck is set when the control plane reported the allowed call with
	// its answer (CheckToolCallRequest.report_allowed_call), so ToolCall does not.
	reportedWithCheck bool
}

// ToolCall asks the control plane whether a tool call may run, waits for a decision
// when it is gated, and, when it may run, reports the call (with the arguments to
// run) to the task's log. Running the tool and reporting its result (ToolResult) is
// the caller's. A rejected call is reported too, with its error result (the reason
// the model is shown), so the transcript has both (docs/hitl.md, "Event sequence");
// the caller reports nothing more for it.
//
// When the call waits durably, ToolCall gives up the lease and returns ErrSuspended;
// the handler should return. When the task is leased again, calling ToolCall with the
// same Call.ID returns the decision carried by the new lease. A call an earlier lease
// already reported comes back with Gate.Reported set, and is not reported again.
func (t *Task) ToolCall(ctx context.Context, c Call) (*Gate, error) {
	if c.ID == "" || c.Name == "" {
		return nil, errors.New("worker: ToolCall needs Call.ID and Call.Name")
	}
	var gate *Gate
	if it := t.takeInterrupt(c.ID); it != nil {
		g, err := t.waitOrUse(ctx, c, it)
		if err != nil {
			return nil, err
		}
		gate = g
	} else {
		g, err := t.check(ctx, c)
		if err != nil {
			return nil, err
		}
		gate = g
	}
	switch {
	case gate.Reported, gate.reportedWithCheck:
	case gate.Allowed:
		_, err := t.Report(ctx, &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_ToolCall{
			ToolCall: &agentplanev1.ToolCall{CallId: c.ID, ToolName: c.Name, ArgumentsJson: gate.ArgumentsJSON, Node: c.Node, TripIndex: c.Trip, MessageId: c.MessageID},
		}})
		if err != nil {
			return nil, err
		}
	default:
		_, err := t.Report(ctx, &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_ToolCall{
			ToolCall: &agentplanev1.ToolCall{CallId: c.ID, ToolName: c.Name, ArgumentsJson: c.ArgumentsJSON, Node: c.Node, TripIndex: c.Trip, MessageId: c.MessageID},
		}}, &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_ToolResult{
			ToolResult: &agentplanev1.ToolResult{CallId: c.ID, ToolName: c.Name, Result: structpb.NewStringValue(gate.Reason), IsError: true, Node: c.Node},
		}})
		if err != nil {
			return nil, err
		}
	}
	return gate, nil
}

// takeInterrupt returns the interrupt this lease carries for call id: a resolved one
// (consumed, since a decision is single-use) or a pending one.
func (t *Task) takeInterrupt(callID string) *agentplanev1.Interrupt {
	t.mu.Lock()
	defer t.mu.Unlock()
	if it, ok := t.resolved[callID]; ok {
		delete(t.resolved, callID)
		return it
	}
	return t.pending[callID]
}

func (t *Task) check(ctx context.Context, c Call) (*Gate, error) {
	req := &agentplanev1.CheckToolCallRequest{
		Lease:         t.ref,
		CallId:        c.ID,
		ToolName:      c.Name,
		ArgumentsJson: c.ArgumentsJSON,
		AgentName:     c.Node,
		TripIndex:     c.Trip,
		Annotations:   c.Annotations,
		// An allowed call is reported by the check itself: one round trip fewer.
		ReportAllowedCall: true,
		MessageId:         c.MessageID,
	}
	if c.Description != "" {
		req.ToolDescription = &c.Description
	}
	var resp *agentplanev1.CheckToolCallResponse
	err := t.write(ctx, "check tool call", "", func(ctx context.Context) error {
		var err error
		resp, err = t.w.rt.CheckToolCall(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	if resp.GetCallReported() {
		return &Gate{Call: c, Reported: true, ResultReported: resp.GetResultReported(), Interrupt: resp.GetInterrupt(), Decision: resp.GetDecision(),
			Reason: fmt.Sprintf("call %s was already run under an earlier lease of this task; see its result in the history", c.ID)}, nil
	}
	switch resp.GetOutcome() {
	case agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW:
		// ALLOW runs the call's own text.
		return &Gate{Call: c, Allowed: true, ArgumentsJSON: c.ArgumentsJSON, Decision: resp.GetDecision(), reportedWithCheck: resp.GetReportedWithCheck()}, nil
	case agentplanev1.GateOutcome_GATE_OUTCOME_REJECT:
		g := gateOf(c, resp.GetDecision())
		if g.Reason == "" {
			g.Reason = resp.GetReason()
		}
		return g, nil
	case agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT:
		if resp.GetInterrupt().GetInterruptId() == "" {
			return nil, errors.New("worker: gate answered INTERRUPT without an interrupt id")
		}
		return t.waitOrUse(ctx, c, resp.GetInterrupt())
	}
	return nil, fmt.Errorf("worker: gate answered an unknown outcome %v", resp.GetOutcome())
}

// waitOrUse turns an interrupt into a gate: its decision when it has one, otherwise
// a wait on AwaitDecision (interactive) or a suspension (durable).
func (t *Task) waitOrUse(ctx context.Context, c Call, it *agentplanev1.Interrupt) (*Gate, error) {
	dec := it.GetDecision()
	if it.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED || dec == nil {
		if c.OnInterrupt != nil {
			c.OnInterrupt(it)
		}
		delivery := c.Delivery
		if delivery == DeliveryDefault {
			delivery = t.w.o.Delivery
		}
		if delivery == Durable {
			if err := t.Suspend(ctx); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("%w (interrupt %s, call %s)", ErrSuspended, it.GetInterruptId(), c.ID)
		}
		var err error
		if dec, err = t.AwaitDecision(ctx, it.GetInterruptId()); err != nil {
			return nil, err
		}
	}
	g := gateOf(c, dec)
	g.Interrupt = it
	if g.Allowed && dec.GetType() == agentplanev1.DecisionType_DECISION_TYPE_APPROVE {
		g.ArgumentsJSON = c.ArgumentsJSON // approve means unchanged
	}
	return g, nil
}

func gateOf(c Call, dec *agentplanev1.Decision) *Gate {
	g := &Gate{Call: c, Decision: dec}
	switch dec.GetType() {
	case agentplanev1.DecisionType_DECISION_TYPE_APPROVE, agentplanev1.DecisionType_DECISION_TYPE_EDIT:
		g.Allowed = true
		g.ArgumentsJSON = dec.GetArgumentsJson()
	default:
		g.Reason = dec.GetModelReason()
		if g.Reason == "" {
			g.Reason = dec.GetReason()
		}
	}
	return g
}

// AwaitDecision waits for the decision on an interrupt of this task (interactive
// delivery). Heartbeats keep the lease meanwhile; a dropped stream is reopened. When
// the worker stops and its drain time runs out during the wait, the task is
// suspended: it waits for the decision without a lease, and the next lease carries it.
func (t *Task) AwaitDecision(ctx context.Context, interruptID string) (_ *agentplanev1.Decision, err error) {
	defer func() {
		if err != nil && errors.Is(context.Cause(ctx), ErrStopping) {
			t.mu.Lock()
			t.waitStopped = true
			t.mu.Unlock()
		}
	}()
	failures := 0
	for {
		var dec *agentplanev1.Decision
		err := t.write(ctx, "await decision", "", func(ctx context.Context) error {
			var err error
			dec, err = t.awaitOnce(ctx, interruptID)
			return err
		})
		if err == nil {
			return dec, nil
		}
		if errors.Is(err, ErrCanceled) {
			t.stop(err)
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) && !IsTransient(err) {
			return nil, err
		}
		failures++
		t.log.Warn("decision stream dropped; reopening", "interrupt_id", interruptID, "err", err)
		if !sleep(ctx, t.w.o.Backoff.Delay(failures)) {
			return nil, context.Cause(ctx)
		}
	}
}

// awaitOnce reads one AwaitDecision stream to its end: the decision, or the task's
// cancellation (an error wrapping ErrCanceled). Pending and keepalive messages only
// say the stream is alive.
func (t *Task) awaitOnce(ctx context.Context, interruptID string) (*agentplanev1.Decision, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := t.w.rt.AwaitDecision(ctx, &agentplanev1.AwaitDecisionRequest{Lease: t.ref, InterruptId: interruptID})
	if err != nil {
		return nil, err
	}
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF // the stream must carry the decision before it ends
		}
		if err != nil {
			return nil, err
		}
		switch k := resp.GetKind().(type) {
		case *agentplanev1.AwaitDecisionResponse_Decision:
			return k.Decision, nil
		case *agentplanev1.AwaitDecisionResponse_Canceled:
			return nil, fmt.Errorf("%w: %s", ErrCanceled, k.Canceled.GetReason())
		case *agentplanev1.AwaitDecisionResponse_Pending, *agentplanev1.AwaitDecisionResponse_Keepalive:
		default:
			// A kind this SDK does not know yet: nothing to act on.
		}
	}
}

// ToolResult reports what a tool returned for an allowed call (isError when it
// failed). A rejected call's result is reported by ToolCall.
func (t *Task) ToolResult(ctx context.Context, c Call, result *structpb.Value, isError bool) error {
	_, err := t.Report(ctx, &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_ToolResult{
		ToolResult: &agentplanev1.ToolResult{CallId: c.ID, ToolName: c.Name, Result: result, IsError: isError, Node: c.Node},
	}})
	return err
}

// RecordVerdict records an evaluator node's verdict; the lease is filled in.
func (t *Task) RecordVerdict(ctx context.Context, req *agentplanev1.RecordVerdictRequest) (*agentplanev1.RecordVerdictResponse, error) {
	req = proto.CloneOf(req)
	req.Lease = t.ref
	if req.GetRequestId() == "" {
		req.RequestId = client.NewRequestID()
	}
	var resp *agentplanev1.RecordVerdictResponse
	err := t.write(ctx, "record verdict", "", func(ctx context.Context) error {
		var err error
		resp, err = t.w.rt.RecordVerdict(ctx, req)
		return err
	})
	return resp, err
}

// Suspend gives up the lease while an interrupt is pending (durable delivery). The
// task is leased again once the decision exists. It ends the task for this runtime.
func (t *Task) Suspend(ctx context.Context) error {
	req := &agentplanev1.SuspendTaskRequest{Lease: t.ref, RequestId: client.NewRequestID()}
	return t.write(ctx, "suspend task", "suspended", func(ctx context.Context) error {
		_, err := t.w.rt.SuspendTask(ctx, req)
		return err
	})
}

// Pause ends a chat turn: message (if not empty) is appended as the turn's last
// assistant message, the task waits in INPUT_REQUIRED for ContinueTask, and the lease
// is released. The next lease carries the user's message in ContinueMessages.
func (t *Task) Pause(ctx context.Context, message, node string) (*agentplanev1.Interrupt, error) {
	req := &agentplanev1.PauseTaskRequest{Lease: t.ref, Node: node, RequestId: client.NewRequestID()}
	if message != "" {
		req.Message = client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, message)
	}
	var it *agentplanev1.Interrupt
	err := t.write(ctx, "pause task", "paused", func(ctx context.Context) error {
		resp, err := t.w.rt.PauseTask(ctx, req)
		it = resp.GetInterrupt()
		return err
	})
	return it, err
}

// WaitForToolOutputs ends a turn whose calls (allowed and reported by ToolCall, with
// the arguments it ran them with) are function tools the client executes: the task
// waits in INPUT_REQUIRED on one TOOL_OUTPUT_REQUIRED interrupt per call until
// ContinueTask supplies their outputs, and the lease is released. The next lease
// carries the outputs in ContinueToolResults.
func (t *Task) WaitForToolOutputs(ctx context.Context, node string, gates ...*Gate) ([]*agentplanev1.Interrupt, error) {
	req := &agentplanev1.PauseTaskRequest{Lease: t.ref, Node: node, RequestId: client.NewRequestID()}
	for _, g := range gates {
		req.ToolOutputCalls = append(req.ToolOutputCalls, &agentplanev1.ToolCall{
			CallId: g.Call.ID, ToolName: g.Call.Name, ArgumentsJson: g.ArgumentsJSON, Node: g.Call.Node, TripIndex: g.Call.Trip,
		})
	}
	var its []*agentplanev1.Interrupt
	err := t.write(ctx, "pause task for tool outputs", "paused", func(ctx context.Context) error {
		resp, err := t.w.rt.PauseTask(ctx, req)
		its = resp.GetToolOutputInterrupts()
		return err
	})
	return its, err
}

// Complete ends the task as COMPLETED with output.
func (t *Task) Complete(ctx context.Context, output *agentplanev1.TaskOutput) error {
	req := &agentplanev1.CompleteTaskRequest{Lease: t.ref, Output: output, RequestId: client.NewRequestID()}
	return t.write(ctx, "complete task", "completed", func(ctx context.Context) error {
		_, err := t.w.rt.CompleteTask(ctx, req)
		return err
	})
}

// Fail ends the task as FAILED, or with retry returns it to the queue (counting an
// attempt).
func (t *Task) Fail(ctx context.Context, reason, message string, retry bool) error {
	end := "failed"
	if retry {
		end = "handed back"
	}
	req := &agentplanev1.FailTaskRequest{Lease: t.ref, Reason: reason, Message: message, Retry: retry, RequestId: client.NewRequestID()}
	return t.write(ctx, "fail task", end, func(ctx context.Context) error {
		_, err := t.w.rt.FailTask(ctx, req)
		return err
	})
}

// PublishDeltas hands fragments of a message being produced (a model's streamed
// tokens) to the task's live watchers, and returns how many there were. Nothing is
// stored: report the complete message with Report when it is done, with the same
// message id. Watchers that connect later, or read too slowly, never see the deltas.
func (t *Task) PublishDeltas(ctx context.Context, deltas ...*agentplanev1.MessageDelta) (int, error) {
	var n int
	err := t.write(ctx, "publish deltas", "", func(ctx context.Context) error {
		resp, err := t.w.rt.PublishDeltas(ctx, &agentplanev1.PublishDeltasRequest{Lease: t.ref, Deltas: deltas})
		n = int(resp.GetWatchers())
		return err
	})
	return n, err
}
