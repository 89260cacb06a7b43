package server_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
)

// history reads a task's log up to the caught-up marker (or its end).
func history(ctx context.Context, t *testing.T, c *client.Client, taskID string) []*agentplanev1.TaskEvent {
	t.Helper()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := c.Tasks.WatchTask(wctx, &agentplanev1.WatchTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	var evs []*agentplanev1.TaskEvent
	for {
		resp, err := s.Recv()
		if errors.Is(err, io.EOF) || resp.GetCaughtUp() != nil {
			return evs
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev := resp.GetEvent(); ev != nil {
			evs = append(evs, ev)
		}
	}
}

// TestSweepsFireOnceAcrossReplicas runs three replicas on one database, each with
// its background loops (lease expiry, interrupt deadlines) on a one-second lease and
// a one-second interrupt deadline. Abandoned leases and overdue interrupts are swept
// by whichever replica comes first, and never twice: every lease ends with exactly
// one expiry, every interrupt with exactly one deadline decision.
func TestSweepsFireOnceAcrossReplicas(t *testing.T) {
	dsn := pgtest.DSN(t)
	var rs []*servertest.Instance
	for range 3 {
		rs = append(rs, servertest.Start(t, func(c *config.Config) {
			c.Store.Backend = config.BackendPostgres
			c.Store.Postgres.DSN = dsn
			c.Store.Postgres.MaxConns = 3
			c.Tasks.LeaseTTL = config.Duration(time.Second)
		}))
	}
	a := rs[0].Client
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const n = 8
	var ids, gated []string
	for i := range n {
		req := &agentplanev1.StartTaskRequest{
			Spec:  &agentplanev1.StartTaskRequest_Agent{Agent: tenancyAgent()},
			Input: client.UserText("move 5"), InterruptPolicy: gatedPolicy(),
			InterruptTimeout: durationpb.New(time.Second),
		}
		started, err := rs[i%3].Client.Tasks.StartTask(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, started.GetTask().GetTaskId())
	}
	leases, err := a.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt-gone", MaxTasks: n})
	if err != nil || len(leases.GetLeases()) != n {
		t.Fatalf("LeaseTasks = %d leases, %v; want %d", len(leases.GetLeases()), err, n)
	}
	// Half the tasks raise an interrupt before their runtime goes away.
	for i, l := range leases.GetLeases()[:n/2] {
		ref := &agentplanev1.LeaseRef{TaskId: l.GetTask().GetTaskId(), LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
		checked, err := rs[i%3].Client.Runtime.CheckToolCall(ctx, &agentplanev1.CheckToolCallRequest{Lease: ref, CallId: "c1",
			ToolName: gatedTool, AgentName: "teller", ArgumentsJson: `{"n": 5}`})
		if err != nil || checked.GetInterrupt() == nil {
			t.Fatalf("CheckToolCall = %v, %v", checked, err)
		}
		gated = append(gated, ref.TaskId)
	}

	// Wait until every lease has expired and every interrupt is decided, without a
	// runtime or a reader asking (the replicas' loops do it), then read each log.
	deadline := time.Now().Add(testutil.WaitLimit)
	for {
		swept := 0
		for _, id := range ids {
			task, err := rs[1].Client.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: id})
			if err != nil {
				t.Fatal(err)
			}
			if task.GetTask().GetState() == agentplanev1.TaskState_TASK_STATE_SUBMITTED && len(task.GetTask().GetPendingInterruptIds()) == 0 {
				swept++
			}
		}
		if swept == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d tasks swept after %s", swept, n, testutil.WaitLimit)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, id := range ids {
		expired, decided := 0, 0
		for _, ev := range history(ctx, t, rs[2].Client, id) {
			if ev.GetLease().GetKind() == agentplanev1.LeaseChangeKind_LEASE_CHANGE_KIND_EXPIRED {
				expired++
			}
			if ev.GetInterruptResolved() != nil {
				decided++
			}
		}
		wantDecided := 0
		for _, g := range gated {
			if g == id {
				wantDecided = 1
			}
		}
		if expired != 1 || decided != wantDecided {
			t.Errorf("task %s: %d lease expiries and %d deadline decisions; want 1 and %d", id, expired, decided, wantDecided)
		}
	}
}
