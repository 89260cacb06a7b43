package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// StepAttr is the attribute of the runtime note that records a step (Step): its value
// is the step's name, and StepResultAttr holds the step's result as JSON. The
// TypeScript and Python SDKs write and read the same note, so a task started by a
// runtime in one language resumes on another without repeating its steps.
const (
	StepAttr       = "agentplane.step"
	StepResultAttr = "agentplane.step.result"
)

// Step runs fn once per task and returns its result; when the task's history already
// records step name (an earlier lease ran it, before a durable wait, a hand-back on
// stop, or a crash after the record), it returns the recorded result without
// calling fn. Use it for what a handler does before it may lose its lease and that
// must not happen twice: a message to the user, a call to another system.
//
//	_, err := worker.Step(ctx, t, "ack", func(ctx context.Context) (struct{}, error) {
//		return struct{}{}, t.Say(ctx, "working on it")
//	})
//
// The record is a runtime note (StepAttr, StepResultAttr) reported after fn
// returned; the result must survive encoding/json and should be small (an id, not a
// document: the note travels in one ReportEvents request). A runtime that dies
// between fn and the record runs fn again on the next lease, so fn should be safe to
// repeat where it can be (a request id of its own); a durable wait, a pause or a stop
// always come after the record. name must be unique in the task (a chat task's later
// turns need their own names). A failed fn records nothing.
func Step[T any](ctx context.Context, t *Task, name string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	if name == "" {
		return zero, errors.New("worker: Step needs a name")
	}
	rec, done, err := t.recordedStep(ctx, name)
	if err != nil {
		return zero, err
	}
	if done {
		var v T
		if err := json.Unmarshal([]byte(rec), &v); err != nil {
			return zero, fmt.Errorf("worker: step %q: decoding its recorded result: %w", name, err)
		}
		return v, nil
	}
	v, err := fn(ctx)
	if err != nil {
		return zero, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return zero, fmt.Errorf("worker: step %q: encoding its result: %w", name, err)
	}
	if _, err := t.Report(ctx, stepEvent(name, string(b))); err != nil {
		return zero, fmt.Errorf("worker: step %q: recording it: %w", name, err)
	}
	t.mu.Lock()
	t.steps[name] = string(b)
	t.mu.Unlock()
	return v, nil
}

// stepEvent is the note that records step name with its JSON result.
func stepEvent(name, resultJSON string) *agentplanev1.RuntimeEvent {
	return &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_Note{Note: &agentplanev1.RuntimeNote{
		Text:       "step " + name + " done",
		Attributes: map[string]string{StepAttr: name, StepResultAttr: resultJSON},
	}}}
}

// recordedStep returns the recorded result of step name, reading the task's history
// for step records on the first call of the lease.
func (t *Task) recordedStep(ctx context.Context, name string) (string, bool, error) {
	t.mu.Lock()
	steps := t.steps
	t.mu.Unlock()
	if steps == nil {
		read := map[string]string{}
		err := t.History(ctx, 0, 0, func(ev *agentplanev1.TaskEvent) bool {
			if a := ev.GetNote().GetAttributes(); a[StepAttr] != "" {
				read[a[StepAttr]] = a[StepResultAttr]
			}
			return true
		})
		if err != nil {
			return "", false, fmt.Errorf("worker: step %q: reading the task's history: %w", name, err)
		}
		t.mu.Lock()
		if t.steps == nil {
			t.steps = read
		}
		steps = t.steps
		t.mu.Unlock()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	rec, ok := steps[name]
	return rec, ok, nil
}
