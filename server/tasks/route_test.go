package tasks

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
)

func inQueue(tenant, queue string) StartParams {
	p := params(tenant)
	p.Queue = queue
	return p
}

func leaseIDs(t *testing.T, h *harness, req LeaseRequest) []string {
	t.Helper()
	req.MaxTasks = max(req.MaxTasks, 10)
	leases, err := h.m.LeaseTasks(ctx, req)
	if err != nil {
		t.Fatalf("LeaseTasks(%v) = %v", req.Queues, err)
	}
	var ids []string
	for _, l := range leases {
		ids = append(ids, l.GetTask().GetTaskId())
	}
	slices.Sort(ids) // the fake clock queues every task at the same time
	return ids
}

// TestRoutingByQueue: a task is leased only by a runtime serving its queue; a runtime
// naming no queue serves only the default one.
func TestRoutingByQueue(t *testing.T) {
	h := newHarness(t)
	plain := h.start(t, params("acme"))
	gpu := h.start(t, inQueue("acme", "gpu"))
	gpuBeta := h.start(t, inQueue("beta", "gpu"))
	named := h.start(t, inQueue("acme", store.DefaultQueue))
	if plain.GetQueue() != store.DefaultQueue || gpu.GetQueue() != "gpu" || named.GetQueue() != store.DefaultQueue {
		t.Fatalf("queues: %q %q %q", plain.GetQueue(), gpu.GetQueue(), named.GetQueue())
	}

	equal(t, "an old runtime (no queues)", leaseIDs(t, h, LeaseRequest{RuntimeID: "old"}), slices.Sorted(slices.Values([]string{plain.GetTaskId(), named.GetTaskId()})))
	equal(t, "cpu runtime", leaseIDs(t, h, LeaseRequest{RuntimeID: "cpu", Queues: []string{"cpu"}}), []string(nil))
	equal(t, "acme gpu runtime", leaseIDs(t, h, LeaseRequest{RuntimeID: "gpu", Tenant: "acme", Queues: []string{"gpu", "gpu"}}), []string{gpu.GetTaskId()})
	equal(t, "gpu runtime of every tenant", leaseIDs(t, h, LeaseRequest{RuntimeID: "gpu", Queues: []string{"cpu", "gpu"}}), []string{gpuBeta.GetTaskId()})

	// A task handed back returns to its own queue, and only a runtime serving it
	// takes it again.
	again := h.start(t, inQueue("acme", "gpu"))
	leases, err := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "gpu", Queues: []string{"gpu"}})
	if err != nil || len(leases) != 1 || leases[0].GetTask().GetQueue() != "gpu" {
		t.Fatalf("lease = %v, %v", leases, err)
	}
	if _, err := h.m.Fail(ctx, ref(leases[0]), Request{}, "", "", true); err != nil {
		t.Fatal(err)
	}
	equal(t, "old runtime after the retry", leaseIDs(t, h, LeaseRequest{RuntimeID: "old"}), []string(nil))
	equal(t, "gpu runtime after the retry", leaseIDs(t, h, LeaseRequest{RuntimeID: "gpu", Queues: []string{"gpu"}}), []string{again.GetTaskId()})

	// ListTasks filters by queue.
	list, _, err := h.m.List(ctx, "acme", ListQuery{Queue: "gpu"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, task := range list {
		got = append(got, task.GetTaskId())
	}
	want := []string{again.GetTaskId(), gpu.GetTaskId()}
	slices.Sort(got)
	slices.Sort(want)
	equal(t, "acme's gpu tasks", got, want)
}

func TestQueueNamesAreValidated(t *testing.T) {
	h := newHarness(t)
	for _, bad := range []string{"-gpu", "gpu queue", "gpu/a100", "été", strings.Repeat("q", 65)} {
		_, _, err := h.m.Start(ctx, inQueue("acme", bad))
		wantErr(t, err, codes.InvalidArgument, apierr.ReasonInvalidArgument)
		if !strings.Contains(err.Error(), "is not a queue name") {
			t.Fatalf("Start(queue %q) = %v; want the rule stated", bad, err)
		}
		_, err = h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt", Queues: []string{"gpu", bad}})
		wantErr(t, err, codes.InvalidArgument, apierr.ReasonInvalidArgument)
		if !strings.Contains(err.Error(), "queues[1]") {
			t.Fatalf("LeaseTasks(queue %q) = %v; want the queue named", bad, err)
		}
		_, _, err = h.m.List(ctx, "acme", ListQuery{Queue: bad})
		wantErr(t, err, codes.InvalidArgument, apierr.ReasonInvalidArgument)
	}
	for _, good := range []string{"gpu", "a", "team-7.gpu_a100", strings.Repeat("q", 64)} {
		if task := h.start(t, inQueue("acme", good)); task.GetQueue() != good {
			t.Fatalf("queue %q stored as %q", good, task.GetQueue())
		}
	}
	var many []string
	for i := range MaxRuntimeQueues + 1 {
		many = append(many, fmt.Sprintf("q%d", i))
	}
	_, err := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt", Queues: many})
	wantErr(t, err, codes.InvalidArgument, apierr.ReasonInvalidArgument)
}
