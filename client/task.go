package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// TaskHandle is one task, for the calls a caller makes on it: watch it, wait for it,
// continue it, cancel it. Start returns one; Task makes one for an existing task id.
// The low-level stubs (c.Tasks, c.Hitl) stay available for everything else.
type TaskHandle struct {
	c *Client
	// ID is the task's id.
	ID string
	// Started is StartTask's response (nil for a handle made by Task).
	Started *agentplanev1.StartTaskResponse
}

// Start starts a task (StartTask; a request id is added when req has none) and returns
// its handle.
func (c *Client) Start(ctx context.Context, req *agentplanev1.StartTaskRequest) (*TaskHandle, error) {
	resp, err := c.Tasks.StartTask(ctx, req)
	if err != nil {
		return nil, err
	}
	return &TaskHandle{c: c, ID: resp.GetTask().GetTaskId(), Started: resp}, nil
}

// Task returns the handle of an existing task; it makes no call.
func (c *Client) Task(id string) *TaskHandle { return &TaskHandle{c: c, ID: id} }

// Get returns the task as it is now.
func (h *TaskHandle) Get(ctx context.Context) (*agentplanev1.Task, error) {
	resp, err := h.c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: h.ID})
	return resp.GetTask(), err
}

// Watch follows the task's events from its first one (Client.Watch: a dropped stream
// is reopened after the last event delivered, so no event is missed or repeated). The
// stream ends with io.EOF after the terminal event.
func (h *TaskHandle) Watch(ctx context.Context) (agentplanev1.TaskService_WatchTaskClient, error) {
	return h.c.Watch(ctx, h.ID, 0)
}

// WaitOption changes what Wait waits for.
type WaitOption func(*waitOptions)

type waitOptions struct{ inputRequired bool }

// UntilInputRequired makes Wait return also when the task is INPUT_REQUIRED (an
// interrupt to resolve, a chat turn, tool outputs to send).
func UntilInputRequired() WaitOption { return func(o *waitOptions) { o.inputRequired = true } }

// Wait returns the task once it is in a terminal state (COMPLETED, FAILED, CANCELED),
// or, with UntilInputRequired, INPUT_REQUIRED. A task that waits for input is not
// terminal: without the option Wait keeps waiting while someone else answers it. Wait
// reads the state with GetTask whenever the watch reports a change, so what it returns
// is the state the task is in, never one it passed through earlier. A broken watch is
// reopened as Client.Watch does (a server restart costs nothing); the error of a watch
// that could not be reopened (as Watch gives up) is returned.
func (h *TaskHandle) Wait(ctx context.Context, opts ...WaitOption) (*agentplanev1.Task, error) {
	var o waitOptions
	for _, opt := range opts {
		opt(&o)
	}
	done := func(t *agentplanev1.Task) bool {
		return Terminal(t.GetState()) || (o.inputRequired && t.GetState() == agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := h.Watch(ctx)
	if err != nil {
		return nil, err
	}
	// Read the state once the stream is open, so that no change falls in between.
	t, err := h.Get(ctx)
	if err != nil || done(t) {
		return t, err
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			if t, err := h.Get(ctx); err != nil || done(t) {
				return t, err
			}
			return nil, fmt.Errorf("client: the watch of task %s ended before it was done", h.ID)
		}
		if err != nil {
			return nil, err
		}
		if sc := m.GetEvent().GetStateChanged(); sc != nil && done(&agentplanev1.Task{State: sc.GetToState()}) {
			if t, err := h.Get(ctx); err != nil || done(t) {
				return t, err
			}
		}
	}
}

// Terminal reports whether a task in state s has ended for good.
func Terminal(s agentplanev1.TaskState) bool {
	switch s {
	case agentplanev1.TaskState_TASK_STATE_COMPLETED, agentplanev1.TaskState_TASK_STATE_FAILED, agentplanev1.TaskState_TASK_STATE_CANCELED:
		return true
	}
	return false
}

// CallOption sets the request id of a helper's call: choose one and send it again to
// repeat a call safely (the server answers the first call's result). Without it every
// call gets a fresh one.
type CallOption func(*callOptions)

type callOptions struct{ requestID, reason, digest string }

// WithRequestID sets the call's request id.
func WithRequestID(id string) CallOption { return func(o *callOptions) { o.requestID = id } }

func callOpts(opts []CallOption) callOptions {
	var o callOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.requestID == "" {
		o.requestID = NewRequestID()
	}
	return o
}

// Cancel cancels the task (CancelTask) and returns it.
func (h *TaskHandle) Cancel(ctx context.Context, reason string, opts ...CallOption) (*agentplanev1.Task, error) {
	o := callOpts(opts)
	resp, err := h.c.Tasks.CancelTask(ctx, &agentplanev1.CancelTaskRequest{TaskId: h.ID, Reason: reason, RequestId: o.requestID})
	return resp.GetTask(), err
}

// Continue answers a chat pause with the user's next message (ContinueTask); UserText
// makes one from text.
func (h *TaskHandle) Continue(ctx context.Context, msg *agentplanev1.Message, opts ...CallOption) (*agentplanev1.Task, error) {
	o := callOpts(opts)
	resp, err := h.c.Tasks.ContinueTask(ctx, &agentplanev1.ContinueTaskRequest{
		TaskId: h.ID, Input: &agentplanev1.ContinueTaskRequest_Message{Message: msg}, RequestId: o.requestID,
	})
	return resp.GetTask(), err
}

// ContinueToolOutputs sends the outputs of the client-executed tool calls the task waits
// for (ContinueTask), one per pending call.
func (h *TaskHandle) ContinueToolOutputs(ctx context.Context, outputs []*agentplanev1.ToolOutput, opts ...CallOption) (*agentplanev1.Task, error) {
	o := callOpts(opts)
	resp, err := h.c.Tasks.ContinueTask(ctx, &agentplanev1.ContinueTaskRequest{
		TaskId: h.ID, Input: &agentplanev1.ContinueTaskRequest_ToolOutputs{ToolOutputs: &agentplanev1.ToolOutputs{Outputs: outputs}}, RequestId: o.requestID,
	})
	return resp.GetTask(), err
}

// WithReason sets the audit note of an approval or an edit.
func WithReason(reason string) CallOption { return func(o *callOptions) { o.reason = reason } }

// WithArgsDigest resolves against the digest the reviewer saw (Interrupt.args_digest)
// instead of the one the helper reads.
func WithArgsDigest(digest string) CallOption { return func(o *callOptions) { o.digest = digest } }

// Approve lets a gated call run with its arguments unchanged. Like Reject and Edit it
// reads the interrupt first and resolves against its argument digest (or the one
// WithArgsDigest gives), so a call whose arguments changed in between is refused
// (FAILED_PRECONDITION, INTERRUPT_ARGS_MISMATCH) instead of approved; and it sends a
// request id (WithRequestID to choose it), so that repeating it is safe.
func (c *Client) Approve(ctx context.Context, interruptID string, opts ...CallOption) (*agentplanev1.Interrupt, error) {
	return c.resolve(ctx, interruptID, opts, func(o callOptions) *agentplanev1.ResolveInterruptRequest {
		d := &agentplanev1.ApproveDecision{}
		if o.reason != "" {
			d.Reason = &o.reason
		}
		return &agentplanev1.ResolveInterruptRequest{Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: d}}
	})
}

// Reject refuses a gated call: it does not run and the model sees reason (required).
func (c *Client) Reject(ctx context.Context, interruptID, reason string, opts ...CallOption) (*agentplanev1.Interrupt, error) {
	if reason == "" {
		return nil, errors.New("client: Reject needs a reason")
	}
	return c.resolve(ctx, interruptID, opts, func(callOptions) *agentplanev1.ResolveInterruptRequest {
		return &agentplanev1.ResolveInterruptRequest{Decision: &agentplanev1.ResolveInterruptRequest_Reject{Reject: &agentplanev1.RejectDecision{Reason: reason}}}
	})
}

// Edit runs a gated call with new arguments: args is marshaled to JSON (a
// json.RawMessage is sent as it is) and must satisfy the tool's parameter schema.
func (c *Client) Edit(ctx context.Context, interruptID string, args any, opts ...CallOption) (*agentplanev1.Interrupt, error) {
	text, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("client: Edit arguments: %w", err)
	}
	return c.resolve(ctx, interruptID, opts, func(o callOptions) *agentplanev1.ResolveInterruptRequest {
		d := &agentplanev1.EditDecision{ArgumentsJson: string(text)}
		if o.reason != "" {
			d.Reason = &o.reason
		}
		return &agentplanev1.ResolveInterruptRequest{Decision: &agentplanev1.ResolveInterruptRequest_Edit{Edit: d}}
	})
}

func (c *Client) resolve(ctx context.Context, interruptID string, opts []CallOption, decide func(callOptions) *agentplanev1.ResolveInterruptRequest) (*agentplanev1.Interrupt, error) {
	o := callOpts(opts)
	if o.digest == "" {
		got, err := c.Hitl.GetInterrupt(ctx, &agentplanev1.GetInterruptRequest{InterruptId: interruptID})
		if err != nil {
			return nil, err
		}
		o.digest = got.GetInterrupt().GetArgsDigest()
	}
	req := decide(o)
	req.InterruptId, req.ArgsDigest, req.RequestId = interruptID, o.digest, o.requestID
	resp, err := c.Hitl.ResolveInterrupt(ctx, req)
	return resp.GetInterrupt(), err
}

// Interrupts returns the task's pending interrupts (ListInterrupts, first page: a task
// has few at a time): the calls that wait for a decision, a chat turn, tool outputs.
func (h *TaskHandle) Interrupts(ctx context.Context) ([]*agentplanev1.Interrupt, error) {
	resp, err := h.c.Hitl.ListInterrupts(ctx, &agentplanev1.ListInterruptsRequest{
		TaskId: h.ID, States: []agentplanev1.InterruptState{agentplanev1.InterruptState_INTERRUPT_STATE_PENDING},
	})
	return resp.GetInterrupts(), err
}
