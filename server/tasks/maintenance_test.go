package tasks

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

func TestPurge(t *testing.T) {
	h := newHarness(t)
	old := params("acme")
	old.RequestID = "old-request"
	oldTask := h.start(t, old)
	l := h.lease(t, "rt")
	if _, err := h.m.Complete(ctx, ref(l), Request{}, nil); err != nil {
		t.Fatal(err)
	}
	oldCanceled := h.start(t, params("beta"))
	if _, err := h.m.Cancel(ctx, "beta", oldCanceled.GetTaskId(), "owner", "", Request{}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(48 * time.Hour)
	recent := h.start(t, params("acme"))
	if _, err := h.m.Cancel(ctx, "acme", recent.GetTaskId(), "owner", "", Request{}); err != nil {
		t.Fatal(err)
	}
	running := h.start(t, params("acme"))

	dry, err := h.m.Purge(ctx, 24*time.Hour, true)
	if err != nil || dry.Tasks != 2 || dry.Events != 6+3 {
		t.Fatalf("dry run = %+v, %v; want 2 tasks, 9 events", dry, err)
	}
	if _, err := h.m.Get(ctx, "acme", oldTask.GetTaskId(), ViewFull); err != nil {
		t.Fatal("a dry run deleted")
	}
	res, err := h.m.Purge(ctx, 24*time.Hour, false)
	if err != nil || res != dry {
		t.Fatalf("Purge = %+v, %v; want %+v", res, err, dry)
	}
	for _, gone := range []struct{ tenant, id string }{{"acme", oldTask.GetTaskId()}, {"beta", oldCanceled.GetTaskId()}} {
		_, err := h.m.Get(ctx, gone.tenant, gone.id, ViewFull)
		wantErr(t, err, codes.NotFound, apierr.ReasonTaskNotFound)
	}
	for _, kept := range []string{recent.GetTaskId(), running.GetTaskId()} {
		if _, err := h.m.Get(ctx, "acme", kept, ViewFull); err != nil {
			t.Fatalf("%s was purged: %v", kept, err)
		}
	}
	// A purged task's request id may be used again.
	if _, created, err := h.m.Start(ctx, old); err != nil || !created {
		t.Fatalf("reusing a purged request id = %v, created=%v", err, created)
	}
	st, err := h.store.Stats(ctx)
	if err != nil || st.TasksByState[agentplanev1.TaskState_TASK_STATE_COMPLETED] != 0 {
		t.Fatalf("stats after purge = %+v, %v", st, err)
	}
	_, err = h.m.Purge(ctx, 0, false)
	wantErr(t, err, codes.InvalidArgument, 0)
}

func TestPurgeInBatches(t *testing.T) {
	h := newHarness(t)
	const n = purgeBatch*2 + 5
	for range n {
		task := h.start(t, params("acme"))
		if _, err := h.m.Cancel(ctx, "acme", task.GetTaskId(), "owner", "", Request{}); err != nil {
			t.Fatal(err)
		}
	}
	h.clock.Advance(time.Hour)
	res, err := h.m.Purge(ctx, time.Minute, false)
	if err != nil || res.Tasks != n {
		t.Fatalf("Purge = %+v, %v; want %d tasks", res, err, n)
	}
	if tasks, _, _ := h.m.List(ctx, "acme", ListQuery{}); len(tasks) != 0 {
		t.Fatalf("%d tasks left", len(tasks))
	}
}

func TestMaintenanceExpiresLeases(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.LeaseTTL = 100 * time.Millisecond })
	task := h.start(t, params("acme"))
	h.lease(t, "rt")
	h.m.StartMaintenance()
	h.clock.Advance(time.Second)
	waitUntil(t, func() bool {
		got, err := h.m.Get(ctx, "acme", task.GetTaskId(), ViewFull)
		return err == nil && got.GetRuntimeId() == "" && got.GetState() == agentplanev1.TaskState_TASK_STATE_SUBMITTED
	})
	h.m.Stop()
	h.m.Stop() // idempotent
}
