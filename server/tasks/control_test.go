package tasks

import (
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

func TestCancelQueuedTask(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	_, err := h.m.Cancel(ctx, "beta", task.GetTaskId(), "intruder", "", Request{})
	wantErr(t, err, codes.NotFound, apierr.ReasonTaskNotFound)
	got, err := h.m.Cancel(ctx, "acme", task.GetTaskId(), "owner", "changed my mind", Request{})
	if err != nil || got.GetState() != agentplanev1.TaskState_TASK_STATE_CANCELED || got.GetCancelRequested() || got.GetEndTime() == nil {
		t.Fatalf("Cancel = %v, %v", got, err)
	}
	if leases, _ := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt"}); len(leases) != 0 {
		t.Fatal("a canceled task stayed in the queue")
	}
	_, err = h.m.Cancel(ctx, "acme", task.GetTaskId(), "owner", "", Request{})
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonTaskTerminal)
	evs := h.events(t, "acme", task.GetTaskId())
	equal(t, "log", kinds(evs), []string{"submitted", "cancel_requested", "state:CANCELED"})
	if cr := evs[1].GetCancelRequested(); cr.GetReason() != "changed my mind" || cr.GetRequestedBy() != "owner" {
		t.Fatalf("cancel event = %v", cr)
	}
}

func TestCancelReachesTheRuntime(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	l := h.lease(t, "rt")
	got, err := h.m.Cancel(ctx, "acme", task.GetTaskId(), "owner", "stop", Request{})
	if err != nil || got.GetState() != agentplanev1.TaskState_TASK_STATE_CANCELED || !got.GetCancelRequested() || got.GetRuntimeId() != "" {
		t.Fatalf("Cancel = %v, %v", got, err)
	}
	for range 2 { // and it keeps saying so
		hb, err := h.m.Heartbeat(ctx, ref(l))
		if err != nil || !hb.Canceled || hb.CancelReason != "stop" {
			t.Fatalf("Heartbeat after cancel = %+v, %v", hb, err)
		}
	}
	_, err = h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{note("still going")})
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonLeaseLost)
	_, err = h.m.Complete(ctx, ref(l), Request{}, nil)
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonLeaseLost)
	h.clock.Advance(time.Hour)
	if n, _ := h.m.ExpireLeases(ctx); n != 0 {
		t.Fatal("the revoked lease of a canceled task expired")
	}
	st, err := h.store.Stats(ctx)
	if err != nil || st.ActiveLeases != 0 {
		t.Fatalf("active leases = %d, %v", st.ActiveLeases, err)
	}
}

func TestPauseAndContinue(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	_, err := h.m.Continue(ctx, "acme", task.GetTaskId(), "owner", userText("too early"), nil, Request{})
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonTaskState)

	l := h.lease(t, "rt")
	in, _, err := h.m.Pause(ctx, ref(l), Request{}, assistantText("what next?"), "main", nil)
	if err != nil || in.GetKind() != agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE ||
		in.GetTurnEnd().GetAgentName() != "main" || in.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_PENDING {
		t.Fatalf("Pause = %v, %v", in, err)
	}
	paused := h.get(t, "acme", task.GetTaskId())
	if paused.GetState() != agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED || paused.GetRuntimeId() != "" ||
		len(paused.GetPendingInterruptIds()) != 1 || paused.GetPendingInterruptIds()[0] != in.GetInterruptId() {
		t.Fatalf("paused task = %v", paused)
	}
	_, err = h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{note("after pause")})
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonLeaseLost)
	if leases, _ := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt"}); len(leases) != 0 {
		t.Fatal("a paused task was leased")
	}
	for name, msg := range map[string]string{"empty": "", "too long": strings.Repeat("x", 1025)} {
		t.Run(name, func(t *testing.T) {
			if _, err := h.m.Continue(ctx, "acme", task.GetTaskId(), "owner", userText(msg), nil, Request{}); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	_, err = h.m.Continue(ctx, "beta", task.GetTaskId(), "owner", userText("hi"), nil, Request{})
	wantErr(t, err, codes.NotFound, apierr.ReasonTaskNotFound)

	resumed, err := h.m.Continue(ctx, "acme", task.GetTaskId(), "alice", userText("tell me more"), nil, Request{})
	// Continued, the task is queued (SUBMITTED) until a runtime leases it (WORKING):
	// clients tell waiting from running by the state.
	if err != nil || resumed.GetState() != agentplanev1.TaskState_TASK_STATE_SUBMITTED || len(resumed.GetPendingInterruptIds()) != 0 ||
		resumed.GetRuntimeId() != "" {
		t.Fatalf("Continue = %v, %v", resumed, err)
	}
	_, err = h.m.Continue(ctx, "acme", task.GetTaskId(), "alice", userText("again"), nil, Request{})
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonTaskState)

	next := h.lease(t, "rt")
	if s := h.get(t, "acme", task.GetTaskId()).GetState(); s != agentplanev1.TaskState_TASK_STATE_WORKING {
		t.Fatalf("leased after continue: %v", s)
	}
	equal(t, "continue messages", texts(next.GetContinueMessages()), []string{"tell me more"})
	if next.GetAttempt() != 2 || next.GetEpoch() != 2 {
		t.Fatalf("lease after continue: attempt %d epoch %d", next.GetAttempt(), next.GetEpoch())
	}
	var stored *storagev1.InterruptRecord
	if err := h.store.View(ctx, func(r store.Reader) error {
		var err error
		stored, err = r.GetInterrupt("acme", in.GetInterruptId())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if d := stored.GetInterrupt().GetDecision(); stored.GetInterrupt().GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED ||
		d.GetSource() != agentplanev1.DecisionSource_DECISION_SOURCE_CONTINUE || d.GetDecidedBy() != "alice" {
		t.Fatalf("pause interrupt after continue = %v", stored)
	}
	// The next turn end clears the delivered messages.
	if _, _, err := h.m.Pause(ctx, ref(next), Request{}, assistantText(""), "main", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := h.m.Continue(ctx, "acme", task.GetTaskId(), "alice", userText("third"), nil, Request{}); err != nil {
		t.Fatal(err)
	}
	equal(t, "messages of the third turn", texts(h.lease(t, "rt").GetContinueMessages()), []string{"third"})
	equal(t, "log", kinds(h.events(t, "acme", task.GetTaskId()))[:13], []string{
		"submitted", "state:WORKING", "lease:GRANTED", "message", "interrupt_raised", "lease:RELEASED", "state:INPUT_REQUIRED",
		"message", "interrupt_resolved", "state:SUBMITTED", "state:WORKING", "lease:GRANTED", "interrupt_raised",
	})
}

func TestContinueRefusesApprovalWaits(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	l := h.lease(t, "rt")
	// What the gate does for a gated call: a pending approval interrupt, INPUT_REQUIRED.
	err := h.m.UpdateLeased(ctx, ref(l), func(op *Op) error {
		if err := raiseApproval(op, "i1"); err != nil {
			return err
		}
		return op.SetState(agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED, "interrupt.raised")
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.m.Continue(ctx, "acme", task.GetTaskId(), "owner", userText("go on"), nil, Request{})
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonTaskState)

	// Canceling closes the pending interrupt: it leaves the inbox.
	if _, err := h.m.Cancel(ctx, "acme", task.GetTaskId(), "owner", "", Request{}); err != nil {
		t.Fatal(err)
	}
	st, err := h.store.Stats(ctx)
	if err != nil || st.PendingInterrupts != 0 {
		t.Fatalf("pending interrupts after cancel = %d, %v", st.PendingInterrupts, err)
	}
}

func TestLeaseExpiryParksATaskWaitingForADecision(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	l := h.lease(t, "rt")
	if err := h.m.UpdateLeased(ctx, ref(l), func(op *Op) error {
		if err := raiseApproval(op, "i1"); err != nil {
			return err
		}
		return op.SetState(agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED, "interrupt.raised")
	}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Minute)
	if n, err := h.m.ExpireLeases(ctx); err != nil || n != 1 {
		t.Fatalf("ExpireLeases = %d, %v", n, err)
	}
	got := h.get(t, "acme", task.GetTaskId())
	if got.GetState() != agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED || got.GetRuntimeId() != "" {
		t.Fatalf("task = %v", got)
	}
	if leases, _ := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt"}); len(leases) != 0 {
		t.Fatal("a task waiting for a decision was queued")
	}
	// The decision arriving resumes it (what HITL does through UpdateTask).
	if err := h.m.UpdateTask(ctx, "acme", task.GetTaskId(), func(op *Op) error {
		op.Task().PendingInterruptIds = nil
		op.Task().ResumeInterruptIds = []string{"i1"}
		return op.Resume("interrupt.resolved")
	}); err != nil {
		t.Fatal(err)
	}
	next := h.lease(t, "rt")
	if len(next.GetResolvedInterrupts()) != 1 || next.GetResolvedInterrupts()[0].GetInterruptId() != "i1" {
		t.Fatalf("lease after the decision = %v", next.GetResolvedInterrupts())
	}
}

func TestHistoryLimits(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.MaxEventBytes = 100
		c.MaxTaskEvents = 6
	})
	task := h.start(t, params("acme"))
	l := h.lease(t, "rt") // log: submitted, state, lease = 3 events
	_, err := h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{note(strings.Repeat("x", 200))})
	wantErr(t, err, codes.ResourceExhausted, apierr.ReasonResourceExhausted)
	if !strings.Contains(err.Error(), "limits.max_event_bytes") {
		t.Fatalf("error does not name the limit: %v", err)
	}
	// Four events would make 7; the whole report is refused, nothing appended.
	_, err = h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{note("a"), note("b"), note("c"), note("d")})
	wantErr(t, err, codes.ResourceExhausted, apierr.ReasonResourceExhausted)
	if got := h.get(t, "acme", task.GetTaskId()).GetLastSequence(); got != 3 {
		t.Fatalf("a refused report appended: last_sequence %d", got)
	}
	if last, err := h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{note("a"), note("b"), note("c")}); err != nil || last != 6 {
		t.Fatalf("report up to the limit = %d, %v", last, err)
	}
	_, err = h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{note("one too many")})
	wantErr(t, err, codes.ResourceExhausted, apierr.ReasonResourceExhausted)
	// A task at its limit can still end.
	if _, err := h.m.Complete(ctx, ref(l), Request{}, &agentplanev1.TaskOutput{Message: assistantText("done")}); err != nil {
		t.Fatalf("Complete at the limit: %v", err)
	}

	h2 := newHarness(t, func(c *Config) { c.MaxTaskHistoryBytes = 150 })
	h2.start(t, params("acme"))
	l2 := h2.lease(t, "rt")
	_, err = h2.m.ReportEvents(ctx, ref(l2), Request{}, []*agentplanev1.RuntimeEvent{note(strings.Repeat("y", 120))})
	wantErr(t, err, codes.ResourceExhausted, apierr.ReasonResourceExhausted)
	if !strings.Contains(err.Error(), "limits.max_task_history_bytes") {
		t.Fatalf("error does not name the limit: %v", err)
	}
	_, err = h2.m.ReportEvents(ctx, ref(l2), Request{}, []*agentplanev1.RuntimeEvent{{}})
	wantErr(t, err, codes.InvalidArgument, apierr.ReasonEventInvalid)
}

func TestCancelResolvesThePause(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	l := h.lease(t, "rt")
	in, _, err := h.m.Pause(ctx, ref(l), Request{}, assistantText("what next?"), "main", nil)
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Minute)
	if _, err := h.m.Cancel(ctx, "acme", task.GetTaskId(), "owner", "done chatting", Request{}); err != nil {
		t.Fatal(err)
	}
	var stored *storagev1.InterruptRecord
	if err := h.store.View(ctx, func(r store.Reader) error {
		var err error
		stored, err = r.GetInterrupt("acme", in.GetInterruptId())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	got := stored.GetInterrupt()
	d := got.GetDecision()
	if got.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED || stored.GetClosedReason() != "task.canceled" ||
		d.GetSource() != agentplanev1.DecisionSource_DECISION_SOURCE_TASK_ENDED || d.GetType() != agentplanev1.DecisionType_DECISION_TYPE_REJECT ||
		d.GetDecidedBy() != hitl.SystemPrincipal || !d.GetDecideTime().AsTime().Equal(h.clock.Now()) || d.GetInterruptId() != in.GetInterruptId() {
		t.Fatalf("pause after cancel = %v", stored)
	}
	evs := h.events(t, "acme", task.GetTaskId())
	equal(t, "log tail", kinds(evs)[len(evs)-3:], []string{"cancel_requested", "interrupt_resolved", "state:CANCELED"})
	equal(t, "logged decision", evs[len(evs)-2].GetInterruptResolved().GetDecision(), d)
	if st, err := h.store.Stats(ctx); err != nil || st.PendingInterrupts != 0 {
		t.Fatalf("pending interrupts after cancel = %d, %v", st.PendingInterrupts, err)
	}
}

func TestOnTaskEndHooks(t *testing.T) {
	h := newHarness(t)
	type call struct {
		tenant, taskID string
		resolved       []*agentplanev1.Decision
	}
	var mu sync.Mutex
	var calls []call
	for range 2 { // every hook is called
		h.m.OnTaskEnd(func(tenant, taskID string, resolved []*agentplanev1.Decision) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, call{tenant, taskID, resolved})
		})
	}
	took := func() []call {
		mu.Lock()
		defer mu.Unlock()
		out := calls
		calls = nil
		return out
	}

	paused := h.start(t, params("acme"))
	l := h.lease(t, "rt")
	in, _, err := h.m.Pause(ctx, ref(l), Request{}, assistantText(""), "main", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := took(); len(got) != 0 {
		t.Fatalf("hooks called for changes that did not end a task: %v", got)
	}
	if _, err := h.m.Cancel(ctx, "acme", paused.GetTaskId(), "owner", "", Request{}); err != nil {
		t.Fatal(err)
	}
	got := took()
	if len(got) != 2 || got[0].tenant != "acme" || got[0].taskID != paused.GetTaskId() || len(got[0].resolved) != 1 ||
		got[0].resolved[0].GetInterruptId() != in.GetInterruptId() ||
		got[0].resolved[0].GetSource() != agentplanev1.DecisionSource_DECISION_SOURCE_TASK_ENDED {
		t.Fatalf("hooks after cancel = %v", got)
	}

	done := h.start(t, params("acme"))
	if _, err := h.m.Complete(ctx, ref(h.lease(t, "rt")), Request{}, nil); err != nil {
		t.Fatal(err)
	}
	if got := took(); len(got) != 2 || got[1].taskID != done.GetTaskId() || len(got[1].resolved) != 0 {
		t.Fatalf("hooks after complete = %v", got)
	}
	// A refused change ends nothing and calls nothing.
	if _, err := h.m.Cancel(ctx, "acme", done.GetTaskId(), "owner", "", Request{}); err == nil {
		t.Fatal("canceled an ended task")
	}
	if got := took(); len(got) != 0 {
		t.Fatalf("hooks called for a refused change: %v", got)
	}
}

// TestChangesReturnTheTaskAsStored: what a change returns (Op.APITask) is what a
// read after it shows.
func TestChangesReturnTheTaskAsStored(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name   string
		change func(t *testing.T, l *agentplanev1.Lease) (*agentplanev1.Task, error)
	}{
		{"cancel", func(t *testing.T, l *agentplanev1.Lease) (*agentplanev1.Task, error) {
			return h.m.Cancel(ctx, "acme", l.GetTask().GetTaskId(), "owner", "stop", Request{})
		}},
		{"complete", func(t *testing.T, l *agentplanev1.Lease) (*agentplanev1.Task, error) {
			return h.m.Complete(ctx, ref(l), Request{}, &agentplanev1.TaskOutput{Message: assistantText("42")})
		}},
		{"fail with retry", func(t *testing.T, l *agentplanev1.Lease) (*agentplanev1.Task, error) {
			return h.m.Fail(ctx, ref(l), Request{}, "", "again", true)
		}},
		{"continue", func(t *testing.T, l *agentplanev1.Lease) (*agentplanev1.Task, error) {
			if _, _, err := h.m.Pause(ctx, ref(l), Request{}, assistantText(""), "main", nil); err != nil {
				t.Fatal(err)
			}
			h.clock.Advance(time.Second)
			return h.m.Continue(ctx, "acme", l.GetTask().GetTaskId(), "owner", userText("go on"), nil, Request{})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.start(t, params("acme"))
			l := h.lease(t, "rt")
			h.clock.Advance(time.Second)
			got, err := tt.change(t, l)
			if err != nil {
				t.Fatal(err)
			}
			equal(t, "returned task", got, h.get(t, "acme", l.GetTask().GetTaskId()))
			if !got.GetUpdateTime().AsTime().Equal(h.clock.Now()) {
				t.Errorf("update_time %v, want %v", got.GetUpdateTime().AsTime(), h.clock.Now())
			}
			if tt.name == "fail with retry" || tt.name == "continue" {
				h.lease(t, "rt") // out of the queue, so the next case leases its own task
				if _, err := h.m.Cancel(ctx, "acme", l.GetTask().GetTaskId(), "owner", "", Request{}); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
