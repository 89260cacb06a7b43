package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
)

// gatedTask starts an agent task whose send_email calls wait for a person.
func gatedTask(t *testing.T, in *servertest.Instance) string {
	t.Helper()
	resp, err := in.Client.Tasks.StartTask(context.Background(), &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(&agentplanev1.AgentSpec{
			ApiVersion: "qar/v1", Kind: "AgentSpec", Name: proto.String("sdk-test"), Model: "m",
			Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "Be brief."}},
		})},
		Input:           client.UserText("email the customer"),
		InterruptPolicy: &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Allowlist{Allowlist: &agentplanev1.ToolListPolicy{Tools: []string{"send_email"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetTask().GetTaskId()
}

// approveAll approves the pending interrupts of task id and returns how many.
func approveAll(t *testing.T, in *servertest.Instance, id string) int {
	t.Helper()
	ctx := context.Background()
	list, err := in.Client.Hitl.ListInterrupts(ctx, &agentplanev1.ListInterruptsRequest{TaskId: id})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, it := range list.GetInterrupts() {
		if it.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_PENDING {
			continue
		}
		if _, err := in.Client.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{
			InterruptId: it.GetInterruptId(), ArgsDigest: it.GetArgsDigest(),
			Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}},
		}); err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// messages counts the assistant messages of task id with text.
func messages(t *testing.T, in *servertest.Instance, id, text string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := in.Client.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: id})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		if m := resp.GetEvent().GetMessage(); m != nil && client.MessageText(m) == text {
			n++
		}
	}
}

// emailHandler acknowledges the request once (a Step), asks to send an email (gated)
// and, once allowed, sends it (sent counts it) and completes the task.
func emailHandler(sent *atomic.Int32, waiting chan<- struct{}) HandlerFunc {
	return func(ctx context.Context, task *Task) error {
		if _, err := Step(ctx, task, "ack", func(ctx context.Context) (struct{}, error) {
			return struct{}{}, task.Say(ctx, "working on it")
		}); err != nil {
			return err
		}
		c := Call{ID: "email-1", Name: "send_email", ArgumentsJSON: `{"to":"a@example.com"}`, Node: "sdk-test",
			OnInterrupt: func(*agentplanev1.Interrupt) {
				if waiting != nil {
					waiting <- struct{}{}
				}
			}}
		g, err := task.ToolCall(ctx, c)
		if err != nil {
			return err
		}
		if !g.Allowed {
			return &Failure{Reason: "test.rejected", Message: g.Reason}
		}
		sent.Add(1)
		if err := task.ToolResult(ctx, c, structpb.NewStringValue("sent"), false); err != nil {
			return err
		}
		return task.Complete(ctx, &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "emailed")})
	}
}

// emailedOnce checks that task id, run by emailHandler, completed with the email sent
// once and the acknowledgement said once, whatever leases it took.
func emailedOnce(t *testing.T, in *servertest.Instance, id string, sent *atomic.Int32) {
	t.Helper()
	if got := getTask(t, in, id); got.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("task %v failure %v", got.GetState(), got.GetFailure())
	}
	if n := sent.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want once", n)
	}
	if n := messages(t, in, id, "working on it"); n != 1 {
		t.Fatalf("the acknowledgement was said %d times, want once", n)
	}
}

// A worker told to stop while a task waits interactively for a decision hands the task
// back once its drain time is up, by suspending it: the task waits for the decision
// without a lease (INPUT_REQUIRED, no attempt counted), and a second runtime finishes
// it after the approval; the tool runs once and the acknowledgement is said once.
//
// The deployment allows one attempt: a hand-back that counted one (FailTask with
// retry, as for a task that was not waiting) would fail the task instead.
func TestServerStopSuspendsAnInteractiveWait(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) { c.Tasks.MaxAttempts = 1 })
	id := gatedTask(t, in)
	var sent atomic.Int32
	waiting := make(chan struct{}, 1)
	first, err := New(in.Client.Runtime, emailHandler(&sent, waiting), Options{
		RuntimeID: "first", PollWait: time.Second, DrainTimeout: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- first.Run(context.Background()) }()
	testutil.Within(t, waiting, "the interactive wait")
	stopped := make(chan error, 1)
	go func() { stopped <- first.Stop(context.Background()) }()
	testutil.Within(t, stopped, "Stop with a drain timeout")
	if err := testutil.Within(t, done, "Run after Stop"); err != nil {
		t.Fatal(err)
	}
	got := getTask(t, in, id)
	if got.GetState() != agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED || got.GetAttempt() != 1 {
		t.Fatalf("after the drain: task %v attempt %d failure %v; want INPUT_REQUIRED (suspended), attempt 1", got.GetState(), got.GetAttempt(), got.GetFailure())
	}

	if n := approveAll(t, in, id); n != 1 {
		t.Fatalf("%d pending interrupts approved, want 1", n)
	}
	second := serverWorker(t, in, emailHandler(&sent, nil))
	if err := second.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	emailedOnce(t, in, id, &sent)
}

// A handler that says something and then waits durably does not say it again on the
// lease that resumes it: the Step record in the history answers for it.
func TestServerStepIsNotRepeatedAfterADurableWait(t *testing.T) {
	in := startServer(t)
	id := gatedTask(t, in)
	var sent atomic.Int32
	w, err := New(in.Client.Runtime, emailHandler(&sent, nil), Options{
		RuntimeID: "durable", MaxTasks: 2, PollWait: time.Second, Delivery: Durable,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	for approveAll(t, in, id) == 0 {
		time.Sleep(20 * time.Millisecond) // poll until the call waits
	}
	if err := testutil.Within(t, done, "the resumed lease"); err != nil {
		t.Fatal(err)
	}
	emailedOnce(t, in, id, &sent)
}

// A PostgreSQL restart under load is not a task's failure: the worker repeats what
// the outage refused (STORE_UNAVAILABLE) while its leases last, so every task in
// flight completes, on the lease it held (it is neither failed nor handed back).
func TestServerPostgresRestartFailsNoTask(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a PostgreSQL server of its own")
	}
	cluster := pgtest.NewCluster(t)
	in := servertest.Start(t, func(c *config.Config) {
		c.Store.Backend = config.BackendPostgres
		c.Store.Postgres.DSN = cluster.DSN()
		c.Store.Postgres.MaxConns = 8
	})
	const tasks, calls = 48, 8
	ids := make([]string, tasks)
	for i := range ids {
		ids[i] = startAgentTask(t, in, fmt.Sprint("load ", i))
	}
	var mu sync.Mutex
	progress := map[string]int{}
	h := HandlerFunc(func(ctx context.Context, task *Task) error {
		for i := 0; i < calls; i++ {
			c := Call{ID: fmt.Sprint("c", i), Name: "lookup", ArgumentsJSON: `{}`, Node: "sdk-test"}
			g, err := task.ToolCall(ctx, c)
			if err != nil {
				return err
			}
			if g.Allowed || (g.Reported && !g.ResultReported) {
				if err := task.ToolResult(ctx, c, structpb.NewStringValue("ok"), false); err != nil {
					return err
				}
			}
			mu.Lock()
			progress[task.ID()]++
			mu.Unlock()
			// A model's answer takes its time: the tasks meet the outage at every point
			// of a call, some as it begins, some as the database comes back.
			time.Sleep(time.Duration(rand.N(1500)) * time.Millisecond)
		}
		return task.Complete(ctx, &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "done")})
	})
	w, err := New(in.Client.Runtime, h, Options{RuntimeID: "pg-load", Capacity: 16, PollWait: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	for {
		mu.Lock()
		busy := len(progress)
		mu.Unlock()
		if busy >= 16 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cluster.Crash(t)
	time.Sleep(8 * time.Second) // the outage the issue measured, doubled
	cluster.Start(t)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	failed, replayed := 0, 0
	for _, id := range ids {
		for {
			resp, err := in.Client.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: id})
			if err != nil {
				t.Fatal(err)
			}
			st := resp.GetTask().GetState()
			if st == agentplanev1.TaskState_TASK_STATE_FAILED {
				failed++
				t.Errorf("task %s failed: %v", id, resp.GetTask().GetFailure())
			}
			if st == agentplanev1.TaskState_TASK_STATE_COMPLETED && resp.GetTask().GetAttempt() != 1 {
				replayed++
				t.Errorf("task %s completed on attempt %d: the outage cost it its lease", id, resp.GetTask().GetAttempt())
			}
			if st == agentplanev1.TaskState_TASK_STATE_COMPLETED || st == agentplanev1.TaskState_TASK_STATE_FAILED {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer stopCancel()
	_ = w.Stop(stopCtx)
	<-done
	t.Logf("across an 8 s PostgreSQL restart, of %d tasks %d failed and %d lost their lease", tasks, failed, replayed)
}
