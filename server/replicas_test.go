package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/agentplane/agentplane/api/specwire"
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
	rs := startReplicas(t, 3, func(c *config.Config) { c.Tasks.LeaseTTL = config.Duration(time.Second) })
	a := rs[0].Client
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const n = 8
	var ids, gated []string
	for i := range n {
		req := &agentplanev1.StartTaskRequest{
			Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())},
			Input:  client.UserText("move 5"), InterruptPolicy: gatedPolicy(),
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

// startReplicas starts n in-process control planes on one fresh database.
func startReplicas(t *testing.T, n int, mutate func(*config.Config)) []*servertest.Instance {
	t.Helper()
	dsn := pgtest.DSN(t)
	var rs []*servertest.Instance
	for range n {
		rs = append(rs, servertest.Start(t, func(c *config.Config) {
			c.Store.Backend = config.BackendPostgres
			c.Store.Postgres.DSN = dsn
			c.Store.Postgres.MaxConns = 3
			if mutate != nil {
				mutate(c)
			}
		}))
	}
	return rs
}

// TestDeltasAcrossReplicas: message deltas a runtime publishes through replica A
// reach a watcher on replica B, although they are never stored.
func TestDeltasAcrossReplicas(t *testing.T) {
	rs := startReplicas(t, 2, nil)
	a, b := rs[0].Client, rs[1].Client
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	started, err := a.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}, Input: client.UserText("hi")})
	if err != nil {
		t.Fatal(err)
	}
	id := started.GetTask().GetTaskId()
	leases, err := a.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt"})
	if err != nil || len(leases.GetLeases()) != 1 {
		t.Fatalf("lease: %v %v", leases, err)
	}
	l := leases.GetLeases()[0]
	ref := &agentplanev1.LeaseRef{TaskId: id, LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
	watch, err := b.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: id})
	if err != nil {
		t.Fatal(err)
	}
	for { // caught up: the watch is live on B
		resp, err := watch.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetCaughtUp() != nil {
			break
		}
	}
	got := make(chan *agentplanev1.MessageDelta, 1)
	go func() {
		for {
			resp, err := watch.Recv()
			if err != nil {
				return
			}
			if d := resp.GetMessageDelta(); d != nil {
				got <- d
				return
			}
		}
	}()
	// Publish until B has one: the watch on B is subscribed by now, but nothing says
	// when B's listener has seen the first broadcast.
	for i := 0; ; i++ {
		if _, err := a.Runtime.PublishDeltas(ctx, &agentplanev1.PublishDeltasRequest{Lease: ref,
			Deltas: []*agentplanev1.MessageDelta{{MessageId: "m1", TextDelta: "Hel"}}}); err != nil {
			t.Fatal(err)
		}
		select {
		case d := <-got:
			if d.GetMessageId() != "m1" || d.GetTextDelta() != "Hel" {
				t.Fatalf("B's watcher got delta %v", d)
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
		if i > int(testutil.WaitLimit/(100*time.Millisecond)) {
			t.Fatal("no delta published on A reached the watcher on B")
		}
	}
}

// TestIdempotentStartAcrossReplicas: the same StartTask sent at once through three
// replicas creates one task; every caller gets it, and exactly one is told it was
// created.
func TestIdempotentStartAcrossReplicas(t *testing.T) {
	rs := startReplicas(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for round := range 5 {
		req := &agentplanev1.StartTaskRequest{RequestId: fmt.Sprintf("same-%d", round),
			Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}, Input: client.UserText("once")}
		type result struct {
			resp *agentplanev1.StartTaskResponse
			err  error
		}
		results := make(chan result, 6)
		for i := range 6 {
			go func() {
				resp, err := rs[i%3].Client.Tasks.StartTask(ctx, req)
				results <- result{resp, err}
			}()
		}
		ids := map[string]bool{}
		created := 0
		for range 6 {
			r := testutil.Within(t, results, "a StartTask")
			if r.err != nil {
				t.Fatal(r.err)
			}
			ids[r.resp.GetTask().GetTaskId()] = true
			if r.resp.GetCreated() {
				created++
			}
		}
		if len(ids) != 1 || created != 1 {
			t.Fatalf("round %d: tasks %v, %d created; want one task created once", round, ids, created)
		}
	}
}

// TestLeaseWakesAfterASkippedRow: a long poll that finds its queued task locked by
// another transaction (FOR UPDATE SKIP LOCKED skips it) looks again, although the
// holder ends without queueing anything and so wakes nobody.
func TestLeaseWakesAfterASkippedRow(t *testing.T) {
	dsn := pgtest.DSN(t)
	r := servertest.Start(t, func(c *config.Config) {
		c.Store.Backend = config.BackendPostgres
		c.Store.Postgres.DSN = dsn
		c.Store.Postgres.MaxConns = 3
		c.Tasks.MaxLeaseWait = config.Duration(time.Hour)
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	started, err := r.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}, Input: client.UserText("hi")})
	if err != nil {
		t.Fatal(err)
	}
	id := started.GetTask().GetTaskId()

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tag, err := tx.Exec(ctx, "SELECT 1 FROM tasks WHERE task_id = $1 FOR UPDATE", id); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("locking the task's row: %v, %v", tag, err)
	}

	got := make(chan *agentplanev1.LeaseTasksResponse, 1)
	go func() {
		resp, err := r.Client.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt", Wait: durationpb.New(time.Hour)})
		if err != nil {
			t.Errorf("LeaseTasks: %v", err)
		}
		got <- resp
	}()
	time.Sleep(500 * time.Millisecond)
	select {
	case resp := <-got:
		t.Fatalf("leased a task whose row another transaction holds: %v", resp)
	default:
	}
	if err := tx.Rollback(ctx); err != nil { // ends without a change: no notification
		t.Fatal(err)
	}
	resp := testutil.Within(t, got, "the long poll after the row was released")
	if len(resp.GetLeases()) != 1 || resp.GetLeases()[0].GetTask().GetTaskId() != id {
		t.Fatalf("LeaseTasks = %v; want task %s", resp, id)
	}
}
