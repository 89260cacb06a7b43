package tasks

// Tests that pin behaviour a mutation run found unguarded. Each names, in its
// comment, the plausible bug (the mutant) it fails on.

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/apierr"
)

// A lease id is the proof of holding the lease; the epoch is public in the task's
// log. A guessed id of the right tenant with the current epoch must be refused.
//
// Mutant: fence comparing the epoch only.
func TestFenceRefusesAGuessedLeaseIDWithTheCurrentEpoch(t *testing.T) {
	h := newHarness(t)
	h.start(t, params("acme"))
	l := h.lease(t, "rt")
	forged := ref(l)
	forged.LeaseId = encodeLeaseID("acme", newID())
	_, err := h.m.Heartbeat(ctx, forged)
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonLeaseLost)
	_, err = h.m.ReportEvents(ctx, forged, Request{}, []*agentplanev1.RuntimeEvent{note("forged")})
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonLeaseLost)
	_, err = h.m.Complete(ctx, forged, Request{}, nil)
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonLeaseLost)
	if got := h.get(t, "acme", l.GetTask().GetTaskId()); got.GetState() != agentplanev1.TaskState_TASK_STATE_WORKING {
		t.Fatalf("a forged lease changed the task: %v", got.GetState())
	}
	if _, err := h.m.Complete(ctx, ref(l), Request{}, nil); err != nil {
		t.Fatalf("the real lease no longer works: %v", err)
	}
}

// A lease is valid strictly before its deadline: a write at the deadline is too late.
//
// Mutant: fence testing now.After(deadline) instead of !now.Before(deadline).
func TestWriteAtExactlyTheLeaseDeadlineIsRefused(t *testing.T) {
	h := newHarness(t)
	h.start(t, params("acme"))
	l := h.lease(t, "rt")
	h.clock.Advance(h.m.cfg.LeaseTTL - time.Nanosecond)
	if _, err := h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{note("just in time")}); err != nil {
		t.Fatalf("a write a nanosecond before the deadline: %v", err)
	}
	h.clock.Advance(time.Nanosecond)
	_, err := h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{note("too late")})
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonLeaseLost)
}

// A task that ends while queued leaves the queue. Left there, every later lease
// would pick it and fail to move it out of its terminal state, for every task.
//
// Mutant: SetState keeping queue_time on a terminal state.
func TestEndedTaskLeavesTheRunQueue(t *testing.T) {
	h := newHarness(t)
	canceled := h.start(t, params("acme"))
	h.clock.Advance(time.Second)
	queued := h.start(t, params("acme"))
	if _, err := h.m.Cancel(ctx, "acme", canceled.GetTaskId(), "owner", "", Request{}); err != nil {
		t.Fatal(err)
	}
	leases, err := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt", MaxTasks: 2})
	if err != nil || len(leases) != 1 || leases[0].GetTask().GetTaskId() != queued.GetTaskId() {
		t.Fatalf("LeaseTasks = %d leases, %v; want the one queued task", len(leases), err)
	}
}

// An ended task stays ended: Resume (what a decision or a user message does to a
// waiting task) is refused, and the task is not queued.
//
// Mutant: SetState without its check of the allowed transitions.
func TestTerminalTaskIsNotResumed(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	l := h.lease(t, "rt")
	if _, err := h.m.Complete(ctx, ref(l), Request{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.m.UpdateTask(ctx, "acme", task.GetTaskId(), func(op *Op) error { return op.Resume("late decision") }); err == nil {
		t.Fatal("a completed task was resumed")
	}
	if got := h.get(t, "acme", task.GetTaskId()); got.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("state %v after a refused resume", got.GetState())
	}
	if leases, err := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt"}); err != nil || len(leases) != 0 {
		t.Fatalf("LeaseTasks = %d leases, %v; want none", len(leases), err)
	}
}

// A live watcher whose buffer overflowed gets the dropped events from the store. The
// hub marks it lagged; but it may take a newer live event from its channel before it
// looks at that mark, and then the gap itself must send it to the store. The test
// takes the lagged mark away to make that order certain.
//
// Mutant: Watch sending an event after a gap (seq > last+1) as if it were next.
func TestLaggedWatcherFillsTheGapBeforeANewerEvent(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxWatchBuffer = 4 })
	task := h.start(t, params("acme"))
	l := h.lease(t, "rt") // events 1..3
	c := newCollector()
	c.gate, c.blockAfter = make(chan struct{}), 3
	done := h.watch("acme", task.GetTaskId(), 0, c)
	waitUntil(t, func() bool { return c.count() == 3 })
	report := func(n int) {
		t.Helper()
		for i := range n {
			if _, err := h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{note(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	report(1) // 4: taken live, its send blocks
	waitUntil(t, func() bool {
		h.m.hub.mu.Lock()
		defer h.m.hub.mu.Unlock()
		for s := range h.m.hub.subs[watchKey{"acme", task.GetTaskId()}] {
			return s.queued() == 0
		}
		return false
	})
	report(5) // 5..8 fill the buffer, 9 is dropped
	// The fan-out runs off the committing goroutine: wait for it to mark the watcher.
	stolen := 0
	waitUntil(t, func() bool {
		h.m.hub.mu.Lock()
		defer h.m.hub.mu.Unlock()
		for s := range h.m.hub.subs[watchKey{"acme", task.GetTaskId()}] {
			select {
			case <-s.lagged:
				stolen++
			default:
			}
		}
		return stolen > 0
	})
	if stolen != 1 {
		t.Fatalf("%d lagged marks, want the watcher's one", stolen)
	}
	close(c.gate)
	waitUntil(t, func() bool { return c.count() == 8 })
	report(1) // 10 arrives live after the gap
	final, err := h.m.Complete(ctx, ref(l), Request{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.Within(t, done, "Watch to end at the terminal event"); err != nil {
		t.Fatal(err)
	}
	checkRun(t, "watcher", c.seqs, 1, final.GetLastSequence())
}

// The run queue is FIFO within a tenant, also for tasks queued at the same instant of
// the clock (a coarse clock, or the tests' fake one): they go in the order they were
// started, not in the order of their random ids.
//
// Flaky before: TestRestartKeepsQueueAndLeases failed about 3 runs in 10.
func TestQueueIsFIFOAtTheSameInstant(t *testing.T) {
	h := newHarness(t)
	var want []string
	for range 24 {
		want = append(want, h.start(t, params("acme")).GetTaskId())
	}
	leases, err := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt", MaxTasks: len(want)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range leases {
		got = append(got, l.GetTask().GetTaskId())
	}
	equal(t, "lease order", got, want)
}

// Task ids made in a row sort in the order they were made, also within one
// millisecond (where newID's random part alone would order them by chance).
func TestTaskIDsIncreaseWithinAMillisecond(t *testing.T) {
	prev := newTaskID()
	for range 1000 {
		id := newTaskID()
		if len(id) != 26 || id <= prev {
			t.Fatalf("task id %q made after %q does not sort after it", id, prev)
		}
		prev = id
	}
}

// A runtime that names its queues serves those and no other: the default queue is
// what a runtime naming none serves, not something every runtime also takes. A task
// of the default queue stays queued while a gpu-only runtime polls, whether or not
// the gpu queue has work, and is leased by the next runtime that serves it.
//
// Mutant: LeaseTasks building the list of queues from make([]string, 1, n), whose
// zero element "" the store reads as the default queue.
func TestRuntimeNamingQueuesDoesNotLeaseTheDefaultQueue(t *testing.T) {
	h := newHarness(t)
	plain := h.start(t, params("acme"))
	gpuOnly := LeaseRequest{RuntimeID: "gpu", Queues: []string{"gpu"}, MaxTasks: 10}
	equal(t, "a gpu-only runtime, only a default task queued", leaseIDs(t, h, gpuOnly), []string(nil))
	gpu := h.start(t, inQueue("acme", "gpu"))
	equal(t, "a gpu-only runtime, a default and a gpu task queued", leaseIDs(t, h, gpuOnly), []string{gpu.GetTaskId()})
	equal(t, "a runtime naming two other queues", leaseIDs(t, h, LeaseRequest{RuntimeID: "cpu", Queues: []string{"cpu", "tpu"}}), []string(nil))
	equal(t, "a runtime of the default queue", leaseIDs(t, h, LeaseRequest{RuntimeID: "old"}), []string{plain.GetTaskId()})
}

// A long poll finding nothing to do reads, and does not write: with every replica's
// runtimes polling, an idle control plane must not queue empty write transactions.
//
// Mutant: claim going on to its write transaction when the look found no work.
func TestIdleLeasePollDoesNotWrite(t *testing.T) {
	h, fs := newFaultHarness(t)
	h.start(t, inQueue("acme", "gpu"))
	before := fs.updates.Load()
	if leases, err := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt", MaxTasks: 4}); err != nil || len(leases) != 0 {
		t.Fatalf("LeaseTasks = %v, %v; want nothing", leases, err)
	}
	if n := fs.updates.Load() - before; n != 0 {
		t.Fatalf("an idle poll made %d write transactions", n)
	}
}

// A runtime's wait is capped by Config.MaxLeaseWait: asking for an hour, it is
// answered (empty) once the cap has passed, not an hour later.
//
// Mutant: LeaseTasks without its cap on Wait.
func TestLeaseWaitIsCapped(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxLeaseWait = 10 * time.Millisecond })
	done := make(chan error, 1)
	go func() {
		leases, err := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt", Wait: time.Hour})
		if err == nil && len(leases) != 0 {
			err = fmt.Errorf("%d leases of an empty queue", len(leases))
		}
		done <- err
	}()
	if err := testutil.Within(t, done, "LeaseTasks to return at MaxLeaseWait"); err != nil {
		t.Fatal(err)
	}
}

// ExpireLeases expires every overdue lease, at most expireBatch per write
// transaction, so that one pass after an outage does not hold the store's writer for
// one huge transaction.
//
// Mutant: expireDue's scan taking one lease more than its limit.
func TestExpiryIsBatched(t *testing.T) {
	h, fs := newFaultHarness(t)
	for range expireBatch + 1 {
		h.start(t, params("acme"))
	}
	for leased := 0; leased < expireBatch+1; {
		leases, err := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt", MaxTasks: maxLeaseBatch})
		if err != nil || len(leases) == 0 {
			t.Fatalf("LeaseTasks = %d leases, %v", len(leases), err)
		}
		leased += len(leases)
	}
	h.clock.Advance(time.Minute)
	before := fs.updates.Load()
	if n, err := h.m.ExpireLeases(ctx); err != nil || n != expireBatch+1 {
		t.Fatalf("ExpireLeases = %d, %v; want %d", n, err, expireBatch+1)
	}
	if n := fs.updates.Load() - before; n != 2 {
		t.Fatalf("%d leases expired in %d write transactions, want 2 (at most %d each)", expireBatch+1, n, expireBatch)
	}
}

// queued is how many messages wait in s.
func (s *subscription) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}
