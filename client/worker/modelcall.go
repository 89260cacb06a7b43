package worker

import (
	"context"
	"errors"
	"fmt"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// ErrModelCallRejected is returned by Task.ModelCall when a person (or the deadline)
// rejected the model call: the control plane has failed the task (reason
// budget.model_call_rejected). The handler returns; nothing more is written.
var ErrModelCallRejected = errors.New("worker: model call rejected; the control plane failed the task")

// ModelCall is a model call a handler is about to make, for Task.ModelCall.
type ModelCall struct {
	// ID names the call: unique in the task, and the same when a later lease replays
	// the turn (derive it from the history, for example the node and the number of
	// model calls it made so far), so that a resumed task finds its approval. Required.
	ID string
	// Node is the agent (graph node) making the call. Required.
	Node string
	// Trip is the zero-based model round-trip index.
	Trip int32
	// Model is the model about to be called, for the reviewer.
	Model string
	// Delivery overrides the worker's Options.Delivery for this call's wait.
	Delivery Delivery
	// OnInterrupt, when set, is called once the call is known to wait for approval.
	OnInterrupt func(*agentplanev1.Interrupt)
}

// ModelCall asks the control plane whether a model call may run, before it is made:
// the task may count against a budget whose on_limit is approve (docs/budgets.md), and
// once that budget is spent each model call waits for a person's approval. It returns
// nil when the call may run. When the lease does not say check_model_calls it returns
// nil at once, without a round trip; while the budget has room the control plane
// answers without a write.
//
// When the call waits, ModelCall waits for the decision (interactive delivery) or gives
// up the lease and returns ErrSuspended (durable), exactly like ToolCall; a later
// lease calling ModelCall with the same ID gets the decision. A rejection returns an
// error wrapping ErrModelCallRejected: the task has failed.
func (t *Task) ModelCall(ctx context.Context, c ModelCall) error {
	if !t.lease.GetCheckModelCalls() {
		return nil
	}
	if c.ID == "" || c.Node == "" {
		return errors.New("worker: ModelCall needs ModelCall.ID and ModelCall.Node")
	}
	req := &agentplanev1.CheckModelCallRequest{Lease: t.ref, CallId: c.ID, AgentName: c.Node, TripIndex: c.Trip, Model: c.Model}
	var resp *agentplanev1.CheckModelCallResponse
	err := t.write(ctx, "check model call", "", func(ctx context.Context) error {
		var err error
		resp, err = t.w.rt.CheckModelCall(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	var gate *Gate
	switch resp.GetOutcome() {
	case agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW:
		return nil
	case agentplanev1.GateOutcome_GATE_OUTCOME_REJECT:
		gate = gateOf(Call{ID: c.ID}, resp.GetDecision())
	case agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT:
		if resp.GetInterrupt().GetInterruptId() == "" {
			return errors.New("worker: CheckModelCall answered INTERRUPT without an interrupt id")
		}
		if gate, err = t.waitOrUse(ctx, Call{ID: c.ID, Node: c.Node, Trip: c.Trip, Delivery: c.Delivery, OnInterrupt: c.OnInterrupt}, resp.GetInterrupt()); err != nil {
			return err
		}
	default:
		return fmt.Errorf("worker: CheckModelCall answered an unknown outcome %v", resp.GetOutcome())
	}
	if gate.Allowed {
		return nil
	}
	t.mu.Lock()
	t.ended = "failed by the control plane: model call rejected"
	t.mu.Unlock()
	return fmt.Errorf("%w: model call %s: %s", ErrModelCallRejected, c.ID, gate.Reason)
}
