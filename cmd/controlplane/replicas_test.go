package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
)

// replica is one controlplane process of the test and a client connected to it.
type replica struct {
	name string
	proc *process
	c    *client.Client
}

// startReplicas starts n controlplane processes on the PostgreSQL database the
// AGENTPLANE_POSTGRES_DSN of the test names.
func startReplicas(t *testing.T, bin, configFile string, names ...string) []*replica {
	t.Helper()
	var rs []*replica
	for _, name := range names {
		p := startBinary(t, bin, t.TempDir(), configFile)
		t.Cleanup(func() {
			if p.cmd.ProcessState == nil {
				_ = p.cmd.Process.Kill()
				<-p.done
			}
		})
		c, err := client.Dial(context.Background(), p.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		rs = append(rs, &replica{name: name, proc: p, c: c})
	}
	return rs
}

const replicaTool = "transfer_funds"

func inQueue(req *agentplanev1.StartTaskRequest, queue string) *agentplanev1.StartTaskRequest {
	req.Queue = queue
	return req
}

func replicaStart(reqID, input string) *agentplanev1.StartTaskRequest {
	params, err := structpb.NewStruct(map[string]any{
		"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}},
		"required": []any{"n"}, "additionalProperties": false,
	})
	if err != nil {
		panic(err)
	}
	return &agentplanev1.StartTaskRequest{
		RequestId: reqID,
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(&agentplanev1.AgentSpec{
			ApiVersion:   "qar/v1",
			Kind:         "AgentSpec",
			Name:         proto.String("teller"),
			Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "Ask before moving money."}},
			Model:        "test-model",
			Tools: []*agentplanev1.FunctionTool{{Type: "function", Function: &agentplanev1.FunctionDef{
				Name: replicaTool, Description: proto.String("moves money"), Parameters: params,
			}}},
		})},
		Input: client.UserText(input),
		InterruptPolicy: &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Allowlist{
			Allowlist: &agentplanev1.ToolListPolicy{Tools: []string{replicaTool}},
		}},
	}
}

// TestReplicas runs three controlplane processes on one PostgreSQL database, reached
// through a TCP proxy the test can cut:
//   - a task started on A is watched live on B and leased by a runtime long-polling
//     on C; the runtime's gated call waits (AwaitDecision) on B and is approved on A;
//     a retried start on B returns the same task, the same request id with another
//     request is refused on C, and a page token from A pages on B;
//   - under concurrent starts and runtime work on every replica, A is SIGKILLed while
//     it holds a lease and serves a watch: no acknowledged start or report is lost,
//     no start is duplicated, the lease expires and a runtime on another replica
//     finishes the task, and the watch resumes on B without a gap;
//   - the database goes away: calls fail UNAVAILABLE (STORE_UNAVAILABLE), health is
//     NOT_SERVING, and both come back by themselves when the database does.
func TestReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs three processes on PostgreSQL")
	}
	dsn := pgtest.DSN(t)
	proxy := pgtest.NewProxy(t, pgtest.AdminAddr(t))
	t.Setenv("AGENTPLANE_POSTGRES_DSN", proxy.DSN(t, dsn))
	configFile := writeConfig(t, `store:
  backend: postgres
  postgres:
    max_conns: 4
    poll_interval: 200ms
tasks:
  lease_ttl: 5s
  max_lease_wait: 1h
`)
	bin := buildBinary(t)
	rs := startReplicas(t, bin, configFile, "A", "B", "C")
	a, b, c := rs[0], rs[1], rs[2]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("one task across replicas", func(t *testing.T) { oneTaskAcross(ctx, t, a, b, c) })
	t.Run("SIGKILL under load", func(t *testing.T) { killUnderLoad(ctx, t, a, b, c) })
	t.Run("database outage", func(t *testing.T) { databaseOutage(ctx, t, proxy, b, c) })
}

func oneTaskAcross(ctx context.Context, t *testing.T, a, b, c *replica) {
	// The runtime on C waits for work before there is any: only a wake-up from A's
	// commit can hand it the task within its hour-long poll.
	type leased struct {
		resp *agentplanev1.LeaseTasksResponse
		err  error
	}
	got := make(chan leased, 1)
	go func() {
		resp, err := c.c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt-c", Wait: durationpb.New(time.Hour)})
		got <- leased{resp, err}
	}()
	// Let the poll reach C and find nothing, so the wake-up, not its first look,
	// must find the task. (Were it slower, the test would still pass, proving less.)
	time.Sleep(300 * time.Millisecond)

	req := replicaStart("across-1", "move 5")
	started, err := a.c.Tasks.StartTask(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	id := started.GetTask().GetTaskId()
	again, err := b.c.Tasks.StartTask(ctx, req)
	if err != nil || again.GetTask().GetTaskId() != id || again.GetCreated() {
		t.Fatalf("StartTask retried on B = %v, %v; want task %s, not created", again, err, id)
	}
	other := replicaStart("across-1", "move 6")
	if _, err := c.c.Tasks.StartTask(ctx, other); status.Code(err) != codes.AlreadyExists || reasons.Of(err) != agentplanev1.ErrorReason_ERROR_REASON_TASK_REQUEST_ID_REUSED {
		t.Fatalf("the same request id with another request on C = %v; want ALREADY_EXISTS TASK_REQUEST_ID_REUSED", err)
	}

	watch, err := b.c.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: id})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan *agentplanev1.TaskEvent, 64)
	go func() {
		defer close(events)
		for {
			resp, err := watch.Recv()
			if err != nil {
				return
			}
			if ev := resp.GetEvent(); ev != nil {
				events <- ev
			}
		}
	}()

	l := testutil.Within(t, got, "the runtime's long poll on C")
	if l.err != nil || len(l.resp.GetLeases()) != 1 || l.resp.GetLeases()[0].GetTask().GetTaskId() != id {
		t.Fatalf("LeaseTasks on C = %v, %v; want task %s", l.resp, l.err, id)
	}
	lease := l.resp.GetLeases()[0]
	ref := &agentplanev1.LeaseRef{TaskId: id, LeaseId: lease.GetLeaseId(), Epoch: lease.GetEpoch()}
	const args = `{"n": 5}`
	checked, err := c.c.Runtime.CheckToolCall(ctx, &agentplanev1.CheckToolCallRequest{Lease: ref, CallId: "c1", ToolName: replicaTool, AgentName: "teller", ArgumentsJson: args})
	if err != nil || checked.GetInterrupt() == nil {
		t.Fatalf("CheckToolCall on C = %v, %v; want an interrupt", checked, err)
	}
	iid := checked.GetInterrupt().GetInterruptId()
	await, err := b.c.Runtime.AwaitDecision(ctx, &agentplanev1.AwaitDecisionRequest{Lease: ref, InterruptId: iid})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := await.Recv(); err != nil || first.GetPending() == nil {
		t.Fatalf("AwaitDecision on B first sent %v, %v; want pending", first, err)
	}
	if _, err := a.c.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{InterruptId: iid,
		Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}}}); err != nil {
		t.Fatalf("ResolveInterrupt on A: %v", err)
	}
	for {
		resp, err := await.Recv()
		if err != nil {
			t.Fatalf("AwaitDecision on B after the approval on A: %v", err)
		}
		if d := resp.GetDecision(); d != nil {
			if d.GetType() != agentplanev1.DecisionType_DECISION_TYPE_APPROVE {
				t.Fatalf("decision %v, want approve", d)
			}
			break
		}
	}
	if _, err := c.c.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref, Events: []*agentplanev1.RuntimeEvent{
		{Payload: &agentplanev1.RuntimeEvent_ToolCall{ToolCall: &agentplanev1.ToolCall{CallId: "c1", ToolName: replicaTool, ArgumentsJson: args}}},
		{Payload: &agentplanev1.RuntimeEvent_ToolResult{ToolResult: &agentplanev1.ToolResult{CallId: "c1"}}},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.c.Runtime.CompleteTask(ctx, &agentplanev1.CompleteTaskRequest{Lease: ref,
		Output: &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "moved")}}); err != nil {
		t.Fatal(err)
	}

	// The watch on B followed it all live, in order, to the terminal event.
	var seqs []int64
	for ev := range events {
		seqs = append(seqs, ev.GetSequence())
	}
	final, err := a.c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: id})
	if err != nil {
		t.Fatal(err)
	}
	if final.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("task ended %v", final.GetTask().GetState())
	}
	if int64(len(seqs)) != final.GetTask().GetLastSequence() {
		t.Fatalf("the watch on B got sequences %v; the task has %d events", seqs, final.GetTask().GetLastSequence())
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("the watch on B got sequences %v: a gap or a repeat", seqs)
		}
	}

	// A page token issued by A pages on B.
	if _, err := a.c.Tasks.StartTask(ctx, replicaStart("across-2", "move 7")); err != nil {
		t.Fatal(err)
	}
	p1, err := a.c.Tasks.ListTasks(ctx, &agentplanev1.ListTasksRequest{PageSize: 1})
	if err != nil || p1.GetNextPageToken() == "" {
		t.Fatalf("ListTasks on A = %v, %v; want one task and a token", p1, err)
	}
	p2, err := b.c.Tasks.ListTasks(ctx, &agentplanev1.ListTasksRequest{PageSize: 1, PageToken: p1.GetNextPageToken()})
	if err != nil || len(p2.GetTasks()) != 1 || p2.GetTasks()[0].GetTaskId() == p1.GetTasks()[0].GetTaskId() {
		t.Fatalf("ListTasks on B with A's token = %v, %v; want the next task", p2, err)
	}
}

// workLoop is a runtime on one replica: it leases, reports three steps and completes,
// recording what was acknowledged, until ctx ends or the replica is gone. A lease
// lost to expiry is left (the task is someone else's now).
func workLoop(ctx context.Context, r *replica, acked *ledger, name string) {
	for ctx.Err() == nil {
		resp, err := r.c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: name, MaxTasks: 2, Wait: durationpb.New(200 * time.Millisecond)})
		if status.Code(err) == codes.Unavailable || ctx.Err() != nil {
			return
		}
		if err != nil {
			acked.mu.Lock()
			acked.failures[status.Code(err)]++
			acked.mu.Unlock()
			continue
		}
		for _, lease := range resp.GetLeases() {
			ref := &agentplanev1.LeaseRef{TaskId: lease.GetTask().GetTaskId(), LeaseId: lease.GetLeaseId(), Epoch: lease.GetEpoch()}
			ok := true
			for j := 0; j < 3 && ok; j++ {
				rep, err := r.c.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref, Events: []*agentplanev1.RuntimeEvent{
					{Payload: &agentplanev1.RuntimeEvent_Message{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, fmt.Sprintf("%s step %d", name, j))}},
				}})
				if ok = err == nil; ok {
					acked.mu.Lock()
					acked.events[ref.TaskId] = max(acked.events[ref.TaskId], rep.GetLastSequence())
					acked.reports++
					acked.mu.Unlock()
				}
			}
			if ok {
				_, _ = r.c.Runtime.CompleteTask(ctx, &agentplanev1.CompleteTaskRequest{Lease: ref,
					Output: &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "done")}})
			}
		}
	}
}

func killUnderLoad(ctx context.Context, t *testing.T, a, b, c *replica) {
	// A task A holds a lease on when it dies, and a watch on A of a task that goes on
	// after A is gone.
	held, err := a.c.Tasks.StartTask(ctx, inQueue(startRequest("held-by-A"), "held"))
	if err != nil {
		t.Fatal(err)
	}
	heldID := held.GetTask().GetTaskId()
	resp, err := a.c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt-a-dies", Wait: durationpb.New(time.Minute), Queues: []string{"held"}})
	if err != nil || len(resp.GetLeases()) != 1 || resp.GetLeases()[0].GetTask().GetTaskId() != heldID {
		t.Fatalf("lease on A = %v, %v; want %s", resp, err, heldID)
	}
	heldEpoch := resp.GetLeases()[0].GetEpoch()

	watched, err := b.c.Tasks.StartTask(ctx, inQueue(startRequest("watched"), "watched"))
	if err != nil {
		t.Fatal(err)
	}
	watchedID := watched.GetTask().GetTaskId()
	wresp, err := c.c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt-c-slow", Wait: durationpb.New(time.Minute), Queues: []string{"watched"}})
	if err != nil || len(wresp.GetLeases()) != 1 || wresp.GetLeases()[0].GetTask().GetTaskId() != watchedID {
		t.Fatalf("lease on C = %v, %v; want %s", wresp, err, watchedID)
	}
	wl := wresp.GetLeases()[0]
	wref := &agentplanev1.LeaseRef{TaskId: watchedID, LeaseId: wl.GetLeaseId(), Epoch: wl.GetEpoch()}
	// The slow runtime reports a step at a time on C until A is dead, and ten more
	// after, then completes: the watch on A is always cut in the middle of the task.
	const stepsAfterKill = 10
	aDead := make(chan struct{})
	slowDone := make(chan error, 1)
	go func() {
		after := -1
		for j := 0; after < 0 || j-after < stepsAfterKill; j++ {
			if _, err := c.c.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: wref, Events: []*agentplanev1.RuntimeEvent{
				{Payload: &agentplanev1.RuntimeEvent_Message{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, fmt.Sprintf("slow %d", j))}},
			}}); err != nil {
				slowDone <- err
				return
			}
			select {
			case <-aDead:
				if after < 0 {
					after = j
				}
			default:
			}
			time.Sleep(25 * time.Millisecond)
		}
		_, err := c.c.Runtime.CompleteTask(ctx, &agentplanev1.CompleteTaskRequest{Lease: wref,
			Output: &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "done")}})
		slowDone <- err
	}()
	var seen []int64
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	watchOnA, err := a.c.Tasks.WatchTask(wctx, &agentplanev1.WatchTaskRequest{TaskId: watchedID})
	if err != nil {
		t.Fatal(err)
	}
	firstOnA := make(chan struct{})
	watchErr := make(chan error, 1)
	go func() {
		for {
			resp, err := watchOnA.Recv()
			if err != nil {
				watchErr <- err
				return
			}
			if ev := resp.GetEvent(); ev != nil {
				seen = append(seen, ev.GetSequence())
				if len(seen) == 1 {
					close(firstOnA)
				}
			}
		}
	}()
	testutil.Within(t, firstOnA, "the watch on A")

	// Load on every replica: starts (acknowledged ones recorded) and runtimes.
	acked := newLedger()
	lctx, lcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, r := range []*replica{a, b, c} {
		for w := 0; w < 2; w++ {
			wg.Go(func() { startLoop(lctx, r.c, acked, 1, 10*i+w) })
		}
		wg.Go(func() { workLoop(lctx, r, acked, "rt-"+r.name) })
	}
	time.Sleep(2 * time.Second) // let load build up before the kill
	a.proc.kill(t)
	close(aDead)
	time.Sleep(2 * time.Second) // and carry on without A
	lcancel()
	wg.Wait()
	t.Logf("%d starts and %d reports acknowledged", acked.taskCount(), acked.eventCount())
	if len(acked.failures) > 0 {
		// Only UNAVAILABLE (the killed replica) is an acceptable failure: three
		// replicas leasing from one queue at once must not surface store conflicts.
		t.Errorf("failed LeaseTasks calls by code: %v", acked.failures)
	}
	if acked.taskCount() == 0 || acked.eventCount() == 0 {
		t.Fatal("no acknowledged writes to check")
	}

	// Nothing acknowledged is lost or duplicated: every start retried on B returns its
	// task, not a new one; every acknowledged report is in a gap-free log.
	acked.verify(t, b.c, 1)

	// The watch on A ended with A; resuming on B after the last event seen loses
	// nothing.
	if err := testutil.Within(t, watchErr, "the watch on A ending with A"); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("the watch on A ended with %v; want an error", err)
	}
	if err := testutil.Within(t, slowDone, "the slow runtime on C"); err != nil {
		t.Fatalf("the runtime on C: %v", err)
	}
	last := seen[len(seen)-1]
	bctx, bcancel := context.WithTimeout(ctx, testutil.WaitLimit)
	defer bcancel()
	watchOnB, err := b.c.Tasks.WatchTask(bctx, &agentplanev1.WatchTaskRequest{TaskId: watchedID, AfterSequence: last})
	if err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := watchOnB.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the watch resumed on B: %v", err)
		}
		if ev := resp.GetEvent(); ev != nil {
			seen = append(seen, ev.GetSequence())
		}
	}
	for i, s := range seen {
		if s != int64(i+1) {
			t.Fatalf("watch on A then B got %v: a gap or a repeat at %d", seen, i)
		}
	}
	wt, err := b.c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: watchedID})
	if err != nil || int64(len(seen)) != wt.GetTask().GetLastSequence() {
		t.Fatalf("the watch saw %d events; the task has %v (%v)", len(seen), wt.GetTask().GetLastSequence(), err)
	}

	// A's lease on the held task expires and a runtime on another replica takes it.
	deadline := time.Now().Add(testutil.WaitLimit)
	for {
		resp, err := c.c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt-c-after", Wait: durationpb.New(time.Second), Queues: []string{"held"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range resp.GetLeases() {
			if l.GetTask().GetTaskId() == heldID {
				if l.GetEpoch() <= heldEpoch {
					t.Fatalf("the held task was leased again at epoch %d, not after A's %d", l.GetEpoch(), heldEpoch)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task A held was not leased elsewhere within %s", testutil.WaitLimit)
		}
	}
}

func databaseOutage(ctx context.Context, t *testing.T, proxy *pgtest.Proxy, b, c *replica) {
	once, err := client.Dial(ctx, b.proc.addr, client.WithRetry(client.Retry{Attempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer once.Close()
	if st := servingStatus(ctx, t, once); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health before the outage: %v", st)
	}

	proxy.Cut()
	waitUntil(t, "B reporting NOT_SERVING", func() bool { return servingStatus(ctx, t, once) == healthpb.HealthCheckResponse_NOT_SERVING })
	_, err = once.Tasks.StartTask(ctx, startRequest("during-outage"))
	if status.Code(err) != codes.Unavailable || reasons.Of(err) != agentplanev1.ErrorReason_ERROR_REASON_STORE_UNAVAILABLE {
		t.Fatalf("StartTask during the outage = %v; want UNAVAILABLE STORE_UNAVAILABLE", err)
	}

	proxy.Restore()
	waitUntil(t, "B serving again", func() bool { return servingStatus(ctx, t, once) == healthpb.HealthCheckResponse_SERVING })
	waitUntil(t, "C serving again", func() bool { return servingStatus(ctx, t, c.c) == healthpb.HealthCheckResponse_SERVING })
	for _, r := range []*client.Client{once, c.c} {
		if _, err := r.Tasks.StartTask(ctx, startRequest("after-outage")); err != nil {
			t.Fatalf("StartTask after the outage: %v", err)
		}
	}
}

// TestPostgresRestart crashes PostgreSQL itself under two replicas while they serve
// (a private cluster: pg_ctl stop -m immediate, then start): calls fail UNAVAILABLE
// with STORE_UNAVAILABLE and health says NOT_SERVING while it is down; both replicas
// come back by themselves, without a restart of their own; no acknowledged start is
// lost or duplicated across the crash (starts are retried with their request id until
// acknowledged); and the replicas wake each other again afterwards (their
// notification connection reconnected: the fallback poll is an hour).
func TestPostgresRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a PostgreSQL server of its own")
	}
	cluster := pgtest.NewCluster(t)
	t.Setenv("AGENTPLANE_POSTGRES_DSN", cluster.DSN())
	configFile := writeConfig(t, `store:
  backend: postgres
  postgres:
    max_conns: 4
    poll_interval: 1h
tasks:
  max_lease_wait: 1h
`)
	rs := startReplicas(t, buildBinary(t), configFile, "A", "B")
	a, b := rs[0], rs[1]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	once, err := client.Dial(ctx, b.proc.addr, client.WithRetry(client.Retry{Attempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer once.Close()

	acked := newLedger()
	var unavailable atomic.Int64
	lctx, lcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, r := range rs {
		for w := 0; w < 2; w++ {
			wg.Go(func() { startUntilAcked(lctx, r.c, acked, &unavailable, 10*i+w) })
		}
	}
	time.Sleep(time.Second)
	before := acked.taskCount()

	cluster.Crash(t)
	down := waitUntil(t, "B reporting NOT_SERVING", func() bool { return servingStatus(ctx, t, once) == healthpb.HealthCheckResponse_NOT_SERVING })
	_, err = once.Tasks.StartTask(ctx, startRequest("during-the-crash"))
	if status.Code(err) != codes.Unavailable || reasons.Of(err) != agentplanev1.ErrorReason_ERROR_REASON_STORE_UNAVAILABLE {
		t.Fatalf("StartTask while PostgreSQL is down = %v; want UNAVAILABLE STORE_UNAVAILABLE", err)
	}
	t.Logf("NOT_SERVING %s after the crash: %v", down.Round(time.Millisecond), err)
	time.Sleep(time.Second) // the load goes on failing

	cluster.Start(t)
	upB := waitUntil(t, "B serving again", func() bool { return servingStatus(ctx, t, once) == healthpb.HealthCheckResponse_SERVING })
	upA := waitUntil(t, "A serving again", func() bool { return servingStatus(ctx, t, a.c) == healthpb.HealthCheckResponse_SERVING })
	t.Logf("serving again %s (B) and %s more (A) after PostgreSQL accepted connections", upB.Round(time.Millisecond), upA.Round(time.Millisecond))
	restarted := acked.taskCount()
	time.Sleep(time.Second)
	lcancel()
	wg.Wait()
	t.Logf("%d starts acknowledged before the crash, %d by the restart, %d in all; %d UNAVAILABLE answers retried",
		before, restarted, acked.taskCount(), unavailable.Load())
	if len(acked.failures) > 0 {
		t.Errorf("failed StartTask calls other than UNAVAILABLE, by code: %v", acked.failures)
	}
	if before == 0 || acked.taskCount() <= restarted {
		t.Fatalf("starts acknowledged: %d before the crash, %d at the restart, %d at the end; want progress before and after",
			before, restarted, acked.taskCount())
	}
	acked.verify(t, b.c, 1)

	// The replicas wake each other again: a long poll on B, waiting before there is
	// any work, is handed a task started on A by the notification alone.
	got := make(chan *agentplanev1.LeaseTasksResponse, 1)
	go func() {
		resp, err := b.c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt-b", Wait: durationpb.New(time.Hour), Queues: []string{"after"}})
		if err != nil {
			t.Errorf("LeaseTasks on B: %v", err)
		}
		got <- resp
	}()
	time.Sleep(300 * time.Millisecond)
	started, err := a.c.Tasks.StartTask(ctx, inQueue(startRequest("after-the-crash"), "after"))
	if err != nil {
		t.Fatal(err)
	}
	resp := testutil.Within(t, got, "B's long poll after the restart")
	if len(resp.GetLeases()) != 1 || resp.GetLeases()[0].GetTask().GetTaskId() != started.GetTask().GetTaskId() {
		t.Fatalf("LeaseTasks on B = %v; want task %s", resp, started.GetTask().GetTaskId())
	}
}

// startUntilAcked starts tasks one after another, retrying each with its request id
// until it is acknowledged: through an outage every start is answered once.
func startUntilAcked(ctx context.Context, c *client.Client, l *ledger, unavailable *atomic.Int64, worker int) {
	for i := 0; ctx.Err() == nil; i++ {
		reqID := fmt.Sprintf("pg-w%d-%d", worker, i)
		for ctx.Err() == nil {
			resp, err := c.Tasks.StartTask(ctx, startRequest(reqID))
			if err == nil {
				l.mu.Lock()
				l.tasks[reqID] = resp.GetTask().GetTaskId()
				l.mu.Unlock()
				break
			}
			if ctx.Err() != nil {
				return
			}
			if status.Code(err) == codes.Unavailable {
				unavailable.Add(1)
			} else {
				l.mu.Lock()
				l.failures[status.Code(err)]++
				l.mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// servingStatus is c's health.
func servingStatus(ctx context.Context, t *testing.T, c *client.Client) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	h, err := c.Health.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return h.GetStatus()
}

// waitUntil polls ok until it holds, failing t after testutil.WaitLimit, and returns
// how long it took.
func waitUntil(t *testing.T, what string, ok func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > testutil.WaitLimit {
			t.Fatalf("%s: still waiting after %s", what, testutil.WaitLimit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// writeConfig writes a controlplane config file for t and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "controlplane.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
