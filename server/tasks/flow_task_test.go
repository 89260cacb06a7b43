package tasks

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/store"
)

// capped is a start of tenant's with labels and a concurrency cap of its own.
func capped(tenant string, labels map[string]string, key string, limit int32) StartParams {
	p := labeled(tenant, labels)
	p.Concurrency = &agentplanev1.ConcurrencyLimit{Key: key, Limit: limit}
	return p
}

// leaseOne leases at most one task now, returning its id ("" when none).
func (h *harness) leaseOne(t *testing.T) (string, *agentplanev1.Lease) {
	t.Helper()
	leases, err := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt", MaxTasks: 1})
	if err != nil {
		t.Fatalf("LeaseTasks: %v", err)
	}
	if len(leases) == 0 {
		return "", nil
	}
	return leases[0].GetTask().GetTaskId(), leases[0]
}

// TestFlowTaskConcurrency: a task's own concurrency cap (StartTaskRequest.concurrency)
// in a queue with no policies: one running task per customer; the tasks over the cap
// wait in order while a lease of one task looks past them; a cancellation frees the
// slot; the slot survives a restart; the task shows its cap and key.
func TestFlowTaskConcurrency(t *testing.T) {
	flowBackends(t, config.Flow{}, func(t *testing.T, open func() *harness) {
		h := open()
		key := `labels["customer"]`
		a1 := h.start(t, capped("acme", map[string]string{"customer": "a"}, key, 1))
		a2 := h.start(t, capped("acme", map[string]string{"customer": "a"}, key, 1)).GetTaskId()
		h.start(t, capped("acme", map[string]string{"customer": "a"}, key, 1))
		free := h.start(t, labeled("acme", nil)).GetTaskId()
		if c := a1.GetConcurrency(); c.GetKey() != key || c.GetLimit() != 1 || a1.GetConcurrencyKey() != "a" {
			t.Fatalf("task shows concurrency %v key %q", c, a1.GetConcurrencyKey())
		}
		id, _ := h.leaseOne(t)
		equal(t, "first lease", id, a1.GetTaskId())
		// One lease at a time: a2 and a3 wait for customer a's slot, and free, behind
		// them, is not held up.
		id, _ = h.leaseOne(t)
		equal(t, "second lease", id, free)
		if id, _ := h.leaseOne(t); id != "" {
			t.Fatalf("leased %s while a1 holds customer a's slot", id)
		}
		if _, err := h.m.Cancel(ctx, "acme", a1.GetTaskId(), "owner", "stop", Request{}); err != nil {
			t.Fatal(err)
		}
		id, _ = h.leaseOne(t)
		equal(t, "after a1 was canceled", id, a2)

		h = open()
		if id, _ := h.leaseOne(t); id != "" {
			t.Fatalf("after a restart, leased %s while a2 holds customer a's slot", id)
		}
		// Another tenant's customer a has its own slots.
		other := h.start(t, capped("globex", map[string]string{"customer": "a"}, key, 1)).GetTaskId()
		id, _ = h.leaseOne(t)
		equal(t, "globex's customer a", id, other)
	})
}

// TestFlowTaskAndQueueConcurrency: a task's own cap and its queue's cap both must
// have room; a lease takes a slot of each and its end frees both.
func TestFlowTaskAndQueueConcurrency(t *testing.T) {
	fc := config.Flow{Queues: map[string]config.QueueFlow{
		store.DefaultQueue: {Concurrency: &config.Concurrency{Key: `labels["customer"]`, Limit: 1}},
	}}
	flowBackends(t, fc, func(t *testing.T, open func() *harness) {
		h := open()
		nightly := func(customer string) StartParams {
			return capped("acme", map[string]string{"customer": customer}, `"nightly"`, 2)
		}
		t1 := h.start(t, nightly("a")).GetTaskId()
		t2 := h.start(t, nightly("b")).GetTaskId()
		t3 := h.start(t, nightly("c")).GetTaskId()                                        // waits for the task cap
		t4 := h.start(t, labeled("acme", map[string]string{"customer": "a"})).GetTaskId() // waits for the queue cap
		t5 := h.start(t, labeled("acme", map[string]string{"customer": "d"})).GetTaskId()
		ids, leases := h.leaseAll(t, "")
		equal(t, "first leases", ids, []string{t1, t2, t5})
		complete(t, h, leases[0]) // t1: frees customer a's slot and one of "nightly"'s
		ids, _ = h.leaseAll(t, "")
		equal(t, "after t1 completed", ids, []string{t3, t4})
	})
}

// TestFlowTaskConcurrencyRefused: a bad cap refuses the start with REQUEST_INVALID
// and the field in a BadRequest, and creates nothing.
func TestFlowTaskConcurrencyRefused(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		name, key string
		limit     int32
		field     string
	}{
		{"syntax", `labels[`, 1, "concurrency.key"},
		{"not a string", `size(labels)`, 1, "concurrency.key"},
		{"unknown variable", `customer`, 1, "concurrency.key"},
		{"missing label", `labels["customer"]`, 1, "concurrency.key"},
		{"empty", ``, 1, "concurrency.key"},
		{"too costly", `input.split("").map(a, input.split("").map(b, a + b)).size() > 0 ? "x" : "y"`, 1, "concurrency.key"},
		{"limit 0", `"x"`, 0, "concurrency.limit"},
		{"limit over", `"x"`, config.MaxConcurrencyLimit + 1, "concurrency.limit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := capped("acme", nil, c.key, c.limit)
			p.Input = userText(strings.Repeat("x", 200))
			_, _, err := h.m.Start(ctx, p)
			wantErr(t, err, codes.InvalidArgument, apierr.ReasonInvalidArgument)
			st, _ := apierr.ToStatus(err)
			var fields []string
			for _, d := range st.Details() {
				if br, ok := d.(*errdetails.BadRequest); ok {
					for _, v := range br.GetFieldViolations() {
						fields = append(fields, v.GetField())
					}
				}
			}
			equal(t, "fields of "+err.Error(), fields, []string{c.field})
		})
	}
	if ids, _ := h.leaseAll(t, ""); len(ids) != 0 {
		t.Fatalf("a refused start created %v", ids)
	}
}

// TestFlowFullKeysPerTenant: within one claim serving every tenant, one tenant's key
// found full does not hold up another tenant's key of the same name.
func TestFlowFullKeysPerTenant(t *testing.T) {
	fc := config.Flow{Fairness: config.Fairness{Mode: config.FairFIFO}, Queues: map[string]config.QueueFlow{
		store.DefaultQueue: {Concurrency: &config.Concurrency{Key: `labels["customer"]`, Limit: 1}},
	}}
	flowBackends(t, fc, func(t *testing.T, open func() *harness) {
		h := open()
		a1 := h.start(t, labeled("acme", map[string]string{"customer": "a"})).GetTaskId()
		h.start(t, labeled("acme", map[string]string{"customer": "a"}))
		ids, _ := h.leaseAll(t, "acme")
		equal(t, "acme's first lease", ids, []string{a1})
		h.clock.Advance(time.Second) // fifo: acme's waiting task goes first
		g1 := h.start(t, labeled("globex", map[string]string{"customer": "a"})).GetTaskId()
		ids, _ = h.leaseAll(t, "")
		equal(t, "globex's customer a, behind acme's waiting one", ids, []string{g1})
	})
}

// TestFlowKeyFairness: flow.queues.<queue>.fairness shares a tenant's queue between
// keys: a customer that queued 50 tasks delays another's 5 by its share only (one
// lease each, in turn), also for tasks started after some were leased and after a
// restart (the virtual time is read from the queue's head); a weight of 2 gives two
// leases per turn.
func TestFlowKeyFairness(t *testing.T) {
	fc := config.Flow{Queues: map[string]config.QueueFlow{
		store.DefaultQueue: {Fairness: &config.KeyFairness{Key: `labels["customer"]`, Weights: map[string]int{"heavy": 2}}},
	}}
	flowBackends(t, fc, func(t *testing.T, open func() *harness) {
		h := open()
		customer := func(c string) StartParams { return labeled("acme", map[string]string{"customer": c}) }
		isSmall := map[string]bool{}
		startSmall := func(n int) {
			for range n {
				isSmall[h.start(t, customer("small")).GetTaskId()] = true
			}
		}
		// smallIn leases n tasks and counts the small customer's among them.
		smallIn := func(n int) int {
			got := 0
			for range n {
				id, _ := h.leaseOne(t)
				if id == "" {
					t.Fatal("nothing to lease")
				}
				if isSmall[id] {
					got++
				}
			}
			return got
		}
		for range 50 {
			h.start(t, customer("big"))
		}
		startSmall(5)
		equal(t, "small's tasks among the first 10 leases", smallIn(10), 5)

		smallIn(10) // big's only
		h = open()
		startSmall(3)
		equal(t, "after a restart, small's tasks among the next 6 leases", smallIn(6), 3)

		// heavy has weight 2: of globex's first 15 leases, 10 are heavy's and 5 small's.
		for range 30 {
			h.start(t, labeled("globex", map[string]string{"customer": "heavy"}))
		}
		for range 10 {
			h.start(t, labeled("globex", map[string]string{"customer": "small"}))
		}
		leases, err := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt", MaxTasks: 15, Tenant: "globex"})
		if err != nil {
			t.Fatal(err)
		}
		heavy := 0
		for _, l := range leases {
			if l.GetTask().GetLabels()["customer"] == "heavy" {
				heavy++
			}
		}
		equal(t, "heavy's among 15 leases", heavy, 10)
	})
}
