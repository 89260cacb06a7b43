package tasks

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/pgstore"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
)

// flowBackends runs a flow-control test on each store: a bbolt file and a PostgreSQL
// database. open opens a Manager on the test's store; called again, it is a restart
// (a new store and Manager on the same data).
func flowBackends(t *testing.T, fc config.Flow, fn func(t *testing.T, open func() *harness)) {
	t.Run("bbolt", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "agentplane.db")
		clock := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
		cfg := testConfig()
		cfg.Flow = fc
		var last *harness
		fn(t, func() *harness {
			if last != nil {
				last.m.Stop()
				_ = last.store.Close()
			}
			last = openHarness(t, path, cfg, clock)
			return last
		})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		clock := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
		cfg := testConfig()
		cfg.Flow = fc
		var last *harness
		fn(t, func() *harness {
			if last != nil {
				last.m.Stop()
				_ = last.store.Close()
			}
			st, err := pgstore.Open(ctx, dsn, pgstore.Options{MaxConns: 4})
			if err != nil {
				t.Fatal(err)
			}
			m, err := New(Options{Store: st, Config: cfg, Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Stop(); _ = st.Close() })
			last = &harness{m: m, clock: clock, store: st}
			return last
		})
	})
}

func labeled(tenant string, labels map[string]string) StartParams {
	p := params(tenant)
	p.Labels = labels
	return p
}

// leaseAll leases what a runtime can get now (up to 16 tasks) and returns the ids.
func (h *harness) leaseAll(t *testing.T, tenant string) ([]string, []*agentplanev1.Lease) {
	t.Helper()
	leases, err := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt", MaxTasks: 16, Tenant: tenant})
	if err != nil {
		t.Fatalf("LeaseTasks: %v", err)
	}
	var ids []string
	for _, l := range leases {
		ids = append(ids, l.GetTask().GetTaskId())
	}
	return ids, leases
}

func complete(t *testing.T, h *harness, l *agentplanev1.Lease) {
	t.Helper()
	if _, err := h.m.Complete(ctx, ref(l), Request{}, &agentplanev1.TaskOutput{}); err != nil {
		t.Fatalf("Complete: %v", err)
	}
}

// TestFlowConcurrencyKey: one running task per customer. Tasks over the cap wait in
// order and are leased when the slot frees: by completion, by a cancellation, by the
// lease's expiry; the slots survive a restart.
func TestFlowConcurrencyKey(t *testing.T) {
	fc := config.Flow{Queues: map[string]config.QueueFlow{
		store.DefaultQueue: {Concurrency: &config.Concurrency{Key: `"customer" in labels ? labels["customer"] : ""`, Limit: 1}},
	}}
	flowBackends(t, fc, func(t *testing.T, open func() *harness) {
		h := open()
		a1 := h.start(t, labeled("acme", map[string]string{"customer": "a"})).GetTaskId()
		a2 := h.start(t, labeled("acme", map[string]string{"customer": "a"})).GetTaskId()
		a3 := h.start(t, labeled("acme", map[string]string{"customer": "a"})).GetTaskId()
		b1 := h.start(t, labeled("acme", map[string]string{"customer": "b"})).GetTaskId()
		free := h.start(t, labeled("acme", nil)).GetTaskId() // no key: not capped
		ids, leases := h.leaseAll(t, "")
		equal(t, "first leases", ids, []string{a1, b1, free})
		if ids, _ := h.leaseAll(t, ""); len(ids) != 0 {
			t.Fatalf("leased %v while customer a's slot is taken", ids)
		}
		complete(t, h, leases[0])
		ids, _ = h.leaseAll(t, "")
		equal(t, "after a1 completed", ids, []string{a2})

		// A restart keeps the slot taken by a2.
		h = open()
		if ids, _ := h.leaseAll(t, ""); len(ids) != 0 {
			t.Fatalf("after a restart, leased %v while a2 holds customer a's slot", ids)
		}
		if _, err := h.m.Cancel(ctx, "acme", a2, "owner", "stop", Request{}); err != nil {
			t.Fatal(err)
		}
		ids, _ = h.leaseAll(t, "")
		equal(t, "after a2 was canceled", ids, []string{a3})

		// An expired lease frees its slot (the task goes back to the end of the queue).
		a4 := h.start(t, labeled("acme", map[string]string{"customer": "a"})).GetTaskId()
		h.clock.Advance(h.m.cfg.LeaseTTL + time.Second)
		ids, _ = h.leaseAll(t, "")
		got := map[string]bool{}
		for _, id := range ids {
			got[id] = true
		}
		if len(ids) != 3 || !got[a4] || !got[b1] || !got[free] {
			t.Fatalf("after the leases expired, leased %v; want a4 %s, b1 %s and %s (a3 %s waits)", ids, a4, b1, free, a3)
		}
	})
}

// TestFlowStartRate: a start rate per key refuses with FLOW_RATE_LIMITED and a
// RetryInfo saying when the bucket holds a token; other keys are not affected, a
// retry of an accepted start is answered, and the bucket survives a restart.
func TestFlowStartRate(t *testing.T) {
	fc := config.Flow{Queues: map[string]config.QueueFlow{
		store.DefaultQueue: {Rate: &config.Rate{Key: `labels["customer"]`, On: config.RateOnStart, PerSecond: 0.5, Burst: 2}},
	}}
	flowBackends(t, fc, func(t *testing.T, open func() *harness) {
		h := open()
		a := func(req string) StartParams {
			p := labeled("acme", map[string]string{"customer": "a"})
			p.RequestID = req
			return p
		}
		h.start(t, a("r1"))
		h.start(t, a("r2"))
		_, _, err := h.m.Start(ctx, a("r3"))
		wantErr(t, err, codes.ResourceExhausted, apierr.ReasonFlowRateLimited)
		st, _ := apierr.ToStatus(err)
		var delay time.Duration
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				if delay != 0 {
					t.Fatal("two RetryInfo details")
				}
				delay = ri.GetRetryDelay().AsDuration()
			}
		}
		if delay != 2*time.Second {
			t.Fatalf("retry_delay = %v, want 2s (one token at 0.5/s)", delay)
		}
		if _, created, err := h.m.Start(ctx, a("r1")); err != nil || created {
			t.Fatalf("retry of an accepted start = created %v, %v; want its task", created, err)
		}
		h.start(t, labeled("acme", map[string]string{"customer": "b"}))
		if _, _, err := h.m.Start(ctx, labeled("acme", nil)); status.Code(toStatusErr(err)) != codes.InvalidArgument {
			t.Fatalf("a start whose key does not evaluate = %v, want INVALID_ARGUMENT", err)
		}

		h = open()
		_, _, err = h.m.Start(ctx, a("r3"))
		wantErr(t, err, codes.ResourceExhausted, apierr.ReasonFlowRateLimited)
		h.clock.Advance(2 * time.Second)
		h.start(t, a("r3"))
	})
}

func toStatusErr(err error) error {
	st, _ := apierr.ToStatus(err)
	return st.Err()
}

// TestFlowLeaseRate: a lease rate lets tasks wait in the queue instead of refusing
// their start.
func TestFlowLeaseRate(t *testing.T) {
	fc := config.Flow{Queues: map[string]config.QueueFlow{
		store.DefaultQueue: {Rate: &config.Rate{On: config.RateOnLease, PerSecond: 1, Burst: 1}},
	}}
	flowBackends(t, fc, func(t *testing.T, open func() *harness) {
		h := open()
		var want []string
		for range 3 {
			want = append(want, h.start(t, params("acme")).GetTaskId())
		}
		ids, _ := h.leaseAll(t, "")
		equal(t, "first lease", ids, want[:1])
		if ids, _ := h.leaseAll(t, ""); len(ids) != 0 {
			t.Fatalf("leased %v with an empty bucket", ids)
		}
		h = open()
		h.clock.Advance(time.Second)
		ids, _ = h.leaseAll(t, "")
		equal(t, "a second later, after a restart", ids, want[1:2])
	})
}

// TestFlowFairness: with two tenants' backlogs in one queue, the leases go by the
// fairness mode: weighted shares 3:1, fifo by queue time, round robin in turn.
func TestFlowFairness(t *testing.T) {
	for _, c := range []struct {
		mode         string
		heavy, light int // leases of the first 20
	}{{config.FairWeighted, 15, 5}, {config.FairFIFO, 20, 0}, {config.FairRoundRobin, 10, 10}} {
		t.Run(c.mode, func(t *testing.T) {
			fc := config.Flow{Fairness: config.Fairness{Mode: c.mode}}
			if c.mode == config.FairWeighted {
				fc.Fairness.Weights = map[string]int{"heavy": 3}
			}
			flowBackends(t, fc, func(t *testing.T, open func() *harness) {
				h := open()
				for _, tenant := range []string{"heavy", "light"} {
					for range 30 {
						h.start(t, params(tenant))
						h.clock.Advance(time.Millisecond)
					}
				}
				got := map[string]int{}
				for range 20 {
					l := h.lease(t, "rt")
					got[l.GetTask().GetTenant()]++
				}
				if got["heavy"] != c.heavy || got["light"] != c.light {
					t.Fatalf("leases by tenant = %v; want heavy %d, light %d", got, c.heavy, c.light)
				}
			})
		})
	}
}

// TestFlowPriority: within a tenant's queue a higher priority is leased first, then
// queue order; a priority out of range is refused.
func TestFlowPriority(t *testing.T) {
	flowBackends(t, config.Flow{}, func(t *testing.T, open func() *harness) {
		h := open()
		at := func(prio int32) string {
			p := params("acme")
			p.Priority = prio
			task := h.start(t, p)
			if task.GetPriority() != prio {
				t.Fatalf("task priority = %d, want %d", task.GetPriority(), prio)
			}
			return task.GetTaskId()
		}
		low, mid1, high, mid2, top := at(-5), at(0), at(2), at(0), at(5)
		var got []string
		for range 5 {
			got = append(got, h.lease(t, "rt").GetTask().GetTaskId())
		}
		equal(t, "lease order", got, []string{top, high, mid1, mid2, low})
		for _, bad := range []int32{-6, 6} {
			p := params("acme")
			p.Priority = bad
			_, _, err := h.m.Start(ctx, p)
			wantErr(t, err, codes.InvalidArgument, apierr.ReasonInvalidArgument)
		}
	})
}

// TestFlowReplicasShareLimits: two Managers on one PostgreSQL database (two
// replicas) leasing and starting at once never exceed a concurrency cap or a start
// bucket between them: the slots and the tokens are rows both lock.
func TestFlowReplicasShareLimits(t *testing.T) {
	dsn := pgtest.DSN(t)
	clock := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	cfg := testConfig()
	cfg.Flow = config.Flow{Queues: map[string]config.QueueFlow{
		store.DefaultQueue: {Concurrency: &config.Concurrency{Key: `labels["customer"]`, Limit: 2}},
		"starts":           {Rate: &config.Rate{On: config.RateOnStart, PerSecond: 0.001, Burst: 5}},
	}}
	var replicas []*Manager
	for range 2 {
		st, err := pgstore.Open(ctx, dsn, pgstore.Options{MaxConns: 8})
		if err != nil {
			t.Fatal(err)
		}
		m, err := New(Options{Store: st, Config: cfg, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Stop(); _ = st.Close() })
		replicas = append(replicas, m)
	}
	for range 12 {
		if _, _, err := replicas[0].Start(ctx, labeled("acme", map[string]string{"customer": "a"})); err != nil {
			t.Fatal(err)
		}
	}
	leased := make(chan int, 8)
	started := make(chan bool, 16)
	for i := range 8 {
		m := replicas[i%2]
		go func() {
			ls, err := m.LeaseTasks(ctx, LeaseRequest{RuntimeID: fmt.Sprint("rt", i), MaxTasks: 3})
			if err != nil {
				t.Error(err)
			}
			leased <- len(ls)
		}()
	}
	for i := range 16 {
		m := replicas[i%2]
		go func() {
			p := params("acme")
			p.Queue = "starts"
			_, _, err := m.Start(ctx, p)
			if err != nil && !apierr.HasReason(err, apierr.ReasonFlowRateLimited) {
				t.Error(err)
			}
			started <- err == nil
		}()
	}
	total, ok := 0, 0
	for range 8 {
		total += <-leased
	}
	for range 16 {
		if <-started {
			ok++
		}
	}
	if total != 2 {
		t.Fatalf("the replicas leased %d tasks of one customer; the cap is 2", total)
	}
	if ok != 5 {
		t.Fatalf("the replicas accepted %d starts; the bucket holds 5", ok)
	}
}

// TestFlowSlotWakesLongPoll: a runtime long-polling a queue whose only queued task
// waits for its key's slot gets that task when the holder completes (woken by the
// release on this replica; on another, by its recheck within a second).
func TestFlowSlotWakesLongPoll(t *testing.T) {
	fc := config.Flow{Queues: map[string]config.QueueFlow{
		store.DefaultQueue: {Concurrency: &config.Concurrency{Key: `labels["customer"]`, Limit: 1}},
	}}
	flowBackends(t, fc, func(t *testing.T, open func() *harness) {
		h := open()
		h.start(t, labeled("acme", map[string]string{"customer": "a"}))
		second := h.start(t, labeled("acme", map[string]string{"customer": "a"})).GetTaskId()
		holder := h.lease(t, "rt1")
		got := make(chan []*agentplanev1.Lease, 1)
		go func() {
			ls, err := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt2", Wait: 10 * time.Second})
			if err != nil {
				t.Error(err)
			}
			got <- ls
		}()
		for h.m.work.waiting(store.DefaultQueue) == 0 { // the poll is waiting
			time.Sleep(time.Millisecond)
		}
		complete(t, h, holder)
		ls := <-got
		if len(ls) != 1 || ls[0].GetTask().GetTaskId() != second {
			t.Fatalf("the long poll got %d leases; want the waiting task %s", len(ls), second)
		}
	})
}
