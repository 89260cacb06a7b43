package main

import (
	"context"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

// A small store from the generator is one the control plane opens and serves as its
// own: the listing and its filters see what was written, a working task's log replays
// in full, a queued task is leased and its runtime reports on it, a completed task
// shows its output.
func TestGeneratedStoreServes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sum, err := generate(ctx, options{dataDir: dir, tasks: 400, batch: 150, span: time.Hour, seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if sum.tasks != 400 || sum.defaultWorking == 0 || sum.defaultSubmitted == 0 {
		t.Fatalf("the mix: %+v", sum)
	}
	if _, err := generate(ctx, options{dataDir: dir, tasks: 1}); err == nil {
		t.Fatal("generate wrote over an existing store")
	}
	in := servertest.Start(t, func(c *config.Config) { c.DataDir = dir })
	c := in.Client

	list := func(req *agentplanev1.ListTasksRequest) []*agentplanev1.Task {
		t.Helper()
		var all []*agentplanev1.Task
		for {
			resp, err := c.Tasks.ListTasks(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, resp.GetTasks()...)
			if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
				return all
			}
		}
	}
	if n := len(list(&agentplanev1.ListTasksRequest{PageSize: 100})); int64(n) != sum.defaultTasks {
		t.Errorf("tenant default lists %d tasks, the generator wrote %d", n, sum.defaultTasks)
	}
	working := list(&agentplanev1.ListTasksRequest{States: []agentplanev1.TaskState{agentplanev1.TaskState_TASK_STATE_WORKING}})
	if int64(len(working)) != sum.defaultWorking {
		t.Errorf("%d working tasks listed, the generator wrote %d", len(working), sum.defaultWorking)
	}
	prod := list(&agentplanev1.ListTasksRequest{LabelSelector: []string{"env=prod"}})
	if len(prod) == 0 {
		t.Error("label filter env=prod listed no task (the generator labels 60% of them so)")
	}
	for _, task := range prod {
		if task.GetLabels()["env"] != "prod" {
			t.Errorf("label filter env=prod listed %s with labels %v", task.GetTaskId(), task.GetLabels())
		}
	}

	// A working task's log replays to its last event, then the watch is live.
	w := working[0]
	stream, err := c.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: w.GetTaskId()})
	if err != nil {
		t.Fatal(err)
	}
	var seq int64
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if up := resp.GetCaughtUp(); up != nil {
			if up.GetLastSequence() != w.GetLastSequence() || seq != w.GetLastSequence() {
				t.Errorf("caught up at %d after replaying to %d, the task's last event is %d", up.GetLastSequence(), seq, w.GetLastSequence())
			}
			break
		}
		if got := resp.GetEvent().GetSequence(); got != seq+1 {
			t.Fatalf("event %d after %d", got, seq)
		} else {
			seq = got
		}
	}

	// A queued task leases, and its runtime completes it.
	var queues []string
	for i := range 8 {
		queues = append(queues, "work-"+string(rune('0'+i)))
	}
	leased, err := c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt", Queues: queues})
	if err != nil || len(leased.GetLeases()) != 1 {
		t.Fatalf("LeaseTasks: %v, %v", leased, err)
	}
	l := leased.GetLeases()[0]
	ref := &agentplanev1.LeaseRef{TaskId: l.GetTask().GetTaskId(), LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
	if _, err := c.Runtime.CompleteTask(ctx, &agentplanev1.CompleteTaskRequest{Lease: ref,
		Output: &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "done")}}); err != nil {
		t.Fatal(err)
	}

	done := list(&agentplanev1.ListTasksRequest{States: []agentplanev1.TaskState{agentplanev1.TaskState_TASK_STATE_COMPLETED}, PageSize: 1})
	got, err := c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: done[len(done)-1].GetTaskId()})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetTask().GetOutput().GetMessage() == nil {
		t.Errorf("a completed task has no output: %v", got.GetTask())
	}
}
