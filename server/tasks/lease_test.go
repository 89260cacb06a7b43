package tasks

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/store"
)

func TestLeaseLifecycle(t *testing.T) {
	h := newHarness(t)
	if leases, err := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt"}); err != nil || len(leases) != 0 {
		t.Fatalf("lease of an empty queue = %v, %v", leases, err)
	}
	task := h.start(t, params("acme"))
	l := h.lease(t, "rt-1")
	if l.GetEpoch() != 1 || l.GetAttempt() != 1 || l.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_WORKING ||
		l.GetTask().GetRuntimeId() != "rt-1" || l.GetSpec().GetAgent().GetModel() != "m" || l.GetHistoryCursor() != 3 ||
		!l.GetDeadline().AsTime().Equal(h.clock.Now().Add(10*time.Second)) {
		t.Fatalf("lease = %v", l)
	}
	if tenant, ok := LeaseTenant(l.GetLeaseId()); !ok || tenant != "acme" {
		t.Fatalf("LeaseTenant = %q, %v", tenant, ok)
	}
	if leases, _ := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt-2"}); len(leases) != 0 {
		t.Fatal("a leased task was leased again")
	}

	h.clock.Advance(8 * time.Second)
	hb, err := h.m.Heartbeat(ctx, ref(l))
	if err != nil || hb.Canceled || !hb.Deadline.Equal(h.clock.Now().Add(10*time.Second)) {
		t.Fatalf("Heartbeat = %+v, %v", hb, err)
	}
	h.clock.Advance(8 * time.Second) // past the first deadline, within the extended one
	h.allowCall(t, l, "c1", "search", `"q"`)
	last, err := h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{
		{Payload: &agentplanev1.RuntimeEvent_Message{Message: &agentplanev1.Message{Role: agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, Parts: textParts("hi")}}},
		toolCall("c1", "search", `"q"`),
		{Payload: &agentplanev1.RuntimeEvent_ToolResult{ToolResult: &agentplanev1.ToolResult{CallId: "c1", ToolName: "search"}}},
		note("done thinking"),
	})
	if err != nil || last != 7 {
		t.Fatalf("ReportEvents = %d, %v; want 7", last, err)
	}
	if empty, err := h.m.ReportEvents(ctx, ref(l), Request{}, nil); err != nil || empty != 7 {
		t.Fatalf("empty report = %d, %v", empty, err)
	}
	done, err := h.m.Complete(ctx, ref(l), Request{}, &agentplanev1.TaskOutput{Message: assistantText("42")})
	if err != nil || done.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || MessageText(done.GetOutput().GetMessage()) != "42" ||
		done.GetEndTime() == nil || done.GetRuntimeId() != "" {
		t.Fatalf("Complete = %v, %v", done, err)
	}
	equal(t, "log", kinds(h.events(t, "acme", task.GetTaskId())), []string{
		"submitted", "state:WORKING", "lease:GRANTED", "message", "tool_call", "tool_result", "note",
		"output", "lease:RELEASED", "state:COMPLETED",
	})
	// Writes under the lease that ended the task say so (TASK_TERMINAL), not LEASE_LOST.
	_, err = h.m.Complete(ctx, ref(l), Request{}, nil)
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonTaskTerminal)
	_, err = h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{note("late")})
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonTaskTerminal)
	if !strings.Contains(err.Error(), "COMPLETED") {
		t.Fatalf("ReportEvents after CompleteTask: %v; want the state named", err)
	}
}

func TestFencedWritesRefuseStaleLeases(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	old := h.lease(t, "rt-1")
	if _, err := h.m.Fail(ctx, ref(old), Request{}, "", "", true); err != nil {
		t.Fatal(err)
	}
	current := h.lease(t, "rt-2")
	if current.GetEpoch() != 2 || current.GetAttempt() != 2 {
		t.Fatalf("second lease: epoch %d attempt %d", current.GetEpoch(), current.GetAttempt())
	}
	staleEpoch := ref(current)
	staleEpoch.Epoch = 1
	forged := ref(current)
	forged.LeaseId = "not-a-lease"
	otherTenant := ref(current)
	otherTenant.LeaseId = encodeLeaseID("beta", strings.SplitN(current.GetLeaseId(), ".", 2)[1])
	writes := map[string]func(*agentplanev1.LeaseRef) error{
		"heartbeat": func(r *agentplanev1.LeaseRef) error { _, err := h.m.Heartbeat(ctx, r); return err },
		"report": func(r *agentplanev1.LeaseRef) error {
			_, err := h.m.ReportEvents(ctx, r, Request{}, []*agentplanev1.RuntimeEvent{note("x")})
			return err
		},
		"pause": func(r *agentplanev1.LeaseRef) error {
			_, _, err := h.m.Pause(ctx, r, Request{}, assistantText(""), "", nil)
			return err
		},
		"complete": func(r *agentplanev1.LeaseRef) error { _, err := h.m.Complete(ctx, r, Request{}, nil); return err },
		"fail": func(r *agentplanev1.LeaseRef) error {
			_, err := h.m.Fail(ctx, r, Request{}, "x", "y", false)
			return err
		},
	}
	before := h.get(t, "acme", task.GetTaskId())
	for name, r := range map[string]*agentplanev1.LeaseRef{
		"previous lease": ref(old), "stale epoch": staleEpoch, "forged id": forged, "other tenant": otherTenant,
	} {
		for what, write := range writes {
			t.Run(name+"/"+what, func(t *testing.T) {
				wantErr(t, write(r), codes.FailedPrecondition, apierr.ReasonLeaseLost)
			})
		}
	}
	equal(t, "task after refused writes", h.get(t, "acme", task.GetTaskId()), before)
}

func TestLeaseExpiryRequeuesThenFails(t *testing.T) {
	h := newHarness(t) // MaxAttempts 3
	task := h.start(t, params("acme"))
	var last *agentplanev1.Lease
	for attempt := int32(1); attempt <= 3; attempt++ {
		last = h.lease(t, "rt")
		if last.GetAttempt() != attempt || last.GetEpoch() != int64(attempt) {
			t.Fatalf("lease %d: attempt %d epoch %d", attempt, last.GetAttempt(), last.GetEpoch())
		}
		if _, err := h.m.Heartbeat(ctx, ref(last)); err != nil { // acknowledged: the runtime got it
			t.Fatal(err)
		}
		h.clock.Advance(10 * time.Second) // exactly the deadline: expired
		n, err := h.m.ExpireLeases(ctx)
		if err != nil || n != 1 {
			t.Fatalf("ExpireLeases = %d, %v", n, err)
		}
		if n, _ := h.m.ExpireLeases(ctx); n != 0 {
			t.Fatalf("a second ExpireLeases expired %d more", n)
		}
	}
	got := h.get(t, "acme", task.GetTaskId())
	if got.GetState() != agentplanev1.TaskState_TASK_STATE_FAILED || got.GetFailure().GetReason() != FailureAttemptsExhausted {
		t.Fatalf("after 3 expiries: %v", got)
	}
	if leases, _ := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt"}); len(leases) != 0 {
		t.Fatal("a failed task was leased")
	}
	_, err := h.m.Heartbeat(ctx, ref(last))
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonTaskTerminal)
	equal(t, "log", kinds(h.events(t, "acme", task.GetTaskId())), []string{
		"submitted", "state:WORKING", "lease:GRANTED", "lease:EXPIRED", "state:SUBMITTED",
		"state:WORKING", "lease:GRANTED", "lease:EXPIRED", "state:SUBMITTED",
		"state:WORKING", "lease:GRANTED", "lease:EXPIRED", "state:FAILED",
	})
}

// TestUnacknowledgedLeaseCountsNoAttempt: a lease whose LeaseTasks response never
// reached its runtime (simulated by never calling under it) expires without counting an
// attempt, however often it happens; the first lease the runtime acknowledges is still
// attempt 1, and only acknowledged leases count towards MaxAttempts.
func TestUnacknowledgedLeaseCountsNoAttempt(t *testing.T) {
	h := newHarness(t) // MaxAttempts 3
	task := h.start(t, params("acme"))
	for i := 1; i <= 5; i++ {
		l := h.lease(t, "rt")
		if l.GetAttempt() != 1 || l.GetEpoch() != int64(i) {
			t.Fatalf("offer %d: attempt %d epoch %d; want attempt 1 epoch %d", i, l.GetAttempt(), l.GetEpoch(), i)
		}
		h.clock.Advance(10 * time.Second)
		if n, err := h.m.ExpireLeases(ctx); err != nil || n != 1 {
			t.Fatalf("ExpireLeases = %d, %v", n, err)
		}
	}
	got := h.get(t, "acme", task.GetTaskId())
	if got.GetState() != agentplanev1.TaskState_TASK_STATE_SUBMITTED || got.GetAttempt() != 0 {
		t.Fatalf("after 5 unacknowledged expiries: state %s attempt %d; want SUBMITTED (queued) with no attempt", got.GetState(), got.GetAttempt())
	}
	evs := h.events(t, "acme", task.GetTaskId())
	var expired int
	for _, ev := range evs {
		if l := ev.GetLease(); l.GetKind() == agentplanev1.LeaseChangeKind_LEASE_CHANGE_KIND_EXPIRED {
			expired++
			if !l.GetUnacknowledged() {
				t.Errorf("event %d: an unacknowledged expiry is not marked so", ev.GetSequence())
			}
		}
	}
	if expired != 5 {
		t.Fatalf("%d expiries logged, want 5", expired)
	}
	// A read of the history acknowledges a lease too.
	l := h.lease(t, "rt")
	if _, _, err := h.m.ReadHistory(ctx, ref(l), 0, 0); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(10 * time.Second)
	if _, err := h.m.ExpireLeases(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.get(t, "acme", task.GetTaskId()); got.GetAttempt() != 1 {
		t.Fatalf("an acknowledged lease that expired left attempt %d, want 1", got.GetAttempt())
	}
	if l := h.lease(t, "rt"); l.GetAttempt() != 2 {
		t.Fatalf("the lease after an acknowledged expiry is attempt %d, want 2", l.GetAttempt())
	}
}

func TestExpiredLeaseIsAppliedLazily(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	l := h.lease(t, "rt")
	h.clock.Advance(11 * time.Second)
	_, err := h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{note("late")})
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonLeaseLost)
	// The refusal names the deadline that passed (the lease is released by then).
	deadline := l.GetDeadline().AsTime().Format(time.RFC3339Nano)
	if msg := err.Error(); !strings.Contains(msg, "expired at "+deadline+" without a heartbeat") || !strings.Contains(msg, l.GetLeaseId()) {
		t.Errorf("LEASE_LOST message %q does not name the lease and its deadline %s", msg, deadline)
	}
	got := h.get(t, "acme", task.GetTaskId())
	if got.GetRuntimeId() != "" || got.GetState() != agentplanev1.TaskState_TASK_STATE_SUBMITTED {
		t.Fatalf("after a write with an expired lease: %v", got)
	}
	// The refused write left nothing but the expiry; the next lease is a new attempt.
	next := h.lease(t, "rt-2")
	if next.GetEpoch() != 2 {
		t.Fatalf("next lease epoch %d", next.GetEpoch())
	}
	equal(t, "log", kinds(h.events(t, "acme", task.GetTaskId())), []string{
		"submitted", "state:WORKING", "lease:GRANTED", "lease:EXPIRED", "state:SUBMITTED", "state:WORKING", "lease:GRANTED",
	})
}

func TestLeaseTasksExpiresBeforeLooking(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	h.lease(t, "dead-runtime")
	h.clock.Advance(time.Minute)
	l := h.lease(t, "live-runtime") // no ExpireLeases call: LeaseTasks expires on its own
	if l.GetTask().GetTaskId() != task.GetTaskId() || l.GetEpoch() != 2 {
		t.Fatalf("lease = %v", l)
	}
}

func TestFail(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	l := h.lease(t, "rt")
	retried, err := h.m.Fail(ctx, ref(l), Request{}, "model.timeout", "try again", true)
	if err != nil || retried.GetState() != agentplanev1.TaskState_TASK_STATE_SUBMITTED || retried.GetRuntimeId() != "" {
		t.Fatalf("retry = %v, %v", retried, err)
	}
	l = h.lease(t, "rt")
	failed, err := h.m.Fail(ctx, ref(l), Request{}, "", strings.Repeat("m", 5000), false)
	if err != nil || failed.GetState() != agentplanev1.TaskState_TASK_STATE_FAILED || failed.GetFailure().GetReason() != FailureRuntime ||
		len(failed.GetFailure().GetMessage()) > maxFailureMessage+len("…") {
		t.Fatalf("fail = %v, %v", failed.GetFailure(), err)
	}
	equal(t, "log", kinds(h.events(t, "acme", task.GetTaskId())), []string{
		"submitted", "state:WORKING", "lease:GRANTED", "lease:RELEASED", "state:SUBMITTED", "state:WORKING", "lease:GRANTED", "lease:RELEASED", "state:FAILED",
	})
}

func TestLeaseTasksValidation(t *testing.T) {
	h := newHarness(t)
	for name, req := range map[string]LeaseRequest{
		"no runtime id":     {},
		"negative max":      {RuntimeID: "rt", MaxTasks: -1},
		"negative wait":     {RuntimeID: "rt", Wait: -time.Second},
		"runtime id length": {RuntimeID: strings.Repeat("r", 256)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := h.m.LeaseTasks(ctx, req)
			wantErr(t, err, codes.InvalidArgument, 0)
		})
	}
}

// TestLongPollWakesOnNewWork: a waiting LeaseTasks only claims when woken or at its
// deadline, so getting a lease well within a long wait shows the wake-up works.
func TestLongPollWakesOnNewWork(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxLeaseWait = time.Hour })
	got := make(chan []*agentplanev1.Lease, 1)
	go func() {
		leases, err := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt", Wait: time.Hour})
		if err != nil {
			t.Error(err)
		}
		got <- leases
	}()
	// Start only after the poller is waiting, so the wake-up (not the first look)
	// must find the task.
	waitUntil(t, func() bool { return h.m.work.waiting(store.DefaultQueue) > 0 })
	task := h.start(t, params("acme"))
	select {
	case leases := <-got:
		if len(leases) != 1 || leases[0].GetTask().GetTaskId() != task.GetTaskId() {
			t.Fatalf("woken poll got %v", leases)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the long poll was not woken by new work")
	}

	c, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := h.m.LeaseTasks(c, LeaseRequest{RuntimeID: "rt", Wait: time.Hour}); done <- err }()
	cancel()
	if err := testutil.Within(t, done, "a canceled long poll to return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled poll = %v", err)
	}
}

func TestLeaseRoundRobinAcrossTenants(t *testing.T) {
	h := newHarness(t)
	for range 3 {
		h.start(t, params("acme"))
		h.clock.Advance(time.Millisecond)
	}
	beta := h.start(t, params("beta"))
	leases, err := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt", MaxTasks: 2})
	if err != nil || len(leases) != 2 {
		t.Fatalf("LeaseTasks = %d, %v", len(leases), err)
	}
	tenants := map[string]bool{}
	for _, l := range leases {
		tenants[l.GetTask().GetTenant()] = true
	}
	if !tenants["acme"] || !tenants["beta"] {
		t.Fatalf("two leases went to %v; want one per tenant", tenants)
	}
	only, err := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt", MaxTasks: 10, Tenant: "beta"})
	if err != nil || len(only) != 0 {
		t.Fatalf("beta has nothing left, got %d", len(only))
	}
	rest, err := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt", MaxTasks: 10, Tenant: "acme"})
	if err != nil || len(rest) != 2 {
		t.Fatalf("acme's rest = %d, %v", len(rest), err)
	}
	if rest[0].GetTask().GetCreateTime().AsTime().After(rest[1].GetTask().GetCreateTime().AsTime()) {
		t.Fatal("a tenant's queue is not FIFO")
	}
	_ = beta
}

func TestRestartKeepsQueueAndLeases(t *testing.T) {
	h := newHarness(t)
	first := h.start(t, params("acme"))
	second := h.start(t, params("acme"))
	l := h.lease(t, "rt")
	if l.GetTask().GetTaskId() != first.GetTaskId() {
		t.Fatal("queue is not FIFO")
	}
	h.m.Stop()
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	reopened := reopen(t, h)
	// The lease granted before the restart still fences writes and can be extended.
	if _, err := reopened.m.Heartbeat(ctx, ref(l)); err != nil {
		t.Fatalf("heartbeat after restart: %v", err)
	}
	next := reopened.lease(t, "rt")
	if next.GetTask().GetTaskId() != second.GetTaskId() {
		t.Fatalf("after restart leased %s, want the queued %s", next.GetTask().GetTaskId(), second.GetTaskId())
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestToolCallDecisionIsSpentByTheReport: a decision is not tied to the lease that
// asked for it (a runtime taking over after a lost lease runs the call), but it lets
// the call be reported once, and an unchecked call not at all.
func TestToolCallDecisionIsSpentByTheReport(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	first := h.lease(t, "rt-1")
	q := `"q"`
	h.allowCall(t, first, "c1", "search", q)
	if _, err := h.m.Fail(ctx, ref(first), Request{}, "", "", true); err != nil {
		t.Fatal(err)
	}
	second := h.lease(t, "rt-2")

	_, err := h.m.ReportEvents(ctx, ref(first), Request{}, []*agentplanev1.RuntimeEvent{toolCall("c1", "search", q)})
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonLeaseLost)
	_, err = h.m.ReportEvents(ctx, ref(second), Request{}, []*agentplanev1.RuntimeEvent{note("before"), toolCall("c2", "search", q)})
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonToolCallNotApproved)
	if _, err := h.m.ReportEvents(ctx, ref(second), Request{}, []*agentplanev1.RuntimeEvent{toolCall("c1", "search", q)}); err != nil {
		t.Fatalf("the new lease cannot run the decided call: %v", err)
	}
	var consumed int64
	if err := h.store.View(ctx, func(r store.Reader) error {
		rec, err := r.GetInterrupt("acme", hitl.InterruptID(task.GetTaskId(), "c1"))
		consumed = rec.GetConsumedEpoch()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if consumed != second.GetEpoch() {
		t.Errorf("consumed_epoch = %d, want %d", consumed, second.GetEpoch())
	}
	_, err = h.m.ReportEvents(ctx, ref(second), Request{}, []*agentplanev1.RuntimeEvent{toolCall("c1", "search", q)})
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonToolCallNotApproved)
	logged := 0
	for _, ev := range h.events(t, "acme", task.GetTaskId()) {
		if ev.GetToolCall() != nil {
			logged++
		}
		if ev.GetNote().GetText() == "before" {
			t.Error("a refused report left its note in the log")
		}
	}
	if logged != 1 {
		t.Errorf("%d tool calls logged, want 1", logged)
	}
}
