package server_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

// recvUntil reads a stream until pick accepts a message, failing on an error.
func recvUntil[T any](t *testing.T, recv func() (T, error), what string, pick func(T) bool) T {
	t.Helper()
	for {
		msg, err := recv()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if pick(msg) {
			return msg
		}
	}
}

// TestWatchStreamArms: a watch replays the log, marks the switch to live with
// caught_up, sends keepalives on an idle stream, carries a runtime's message deltas to
// live watchers without storing them, and ends after the terminal event.
func TestWatchStreamArms(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) { c.Limits.StreamKeepaliveInterval = config.Duration(time.Second) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e := &retryEnv{t: t, ctx: ctx, c: in.Client.Runtime, ts: in.Client.Tasks, hs: in.Client.Hitl}
	task := e.start()
	ref := e.lease()

	stream, err := e.ts.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: task.GetTaskId()})
	if err != nil {
		t.Fatal(err)
	}
	var replayed []int64
	up := recvUntil(t, stream.Recv, "caught_up", func(m *agentplanev1.WatchTaskResponse) bool {
		if ev := m.GetEvent(); ev != nil {
			replayed = append(replayed, ev.GetSequence())
		}
		return m.GetCaughtUp() != nil
	})
	if n := int64(len(replayed)); n == 0 || up.GetCaughtUp().GetLastSequence() != replayed[n-1] || replayed[0] != 1 || replayed[n-1] != n {
		t.Fatalf("replayed %v then caught_up at %d", replayed, up.GetCaughtUp().GetLastSequence())
	}
	recvUntil(t, stream.Recv, "a keepalive", func(m *agentplanev1.WatchTaskResponse) bool {
		if m.GetEvent() != nil || m.GetCaughtUp() != nil {
			t.Fatalf("an idle stream sent %v", m)
		}
		return m.GetKeepalive() != nil
	})

	pub, err := e.c.PublishDeltas(ctx, &agentplanev1.PublishDeltasRequest{Lease: ref, Deltas: []*agentplanev1.MessageDelta{
		{MessageId: "m1", TextDelta: "Hel"}, {MessageId: "m1", TextDelta: "lo"},
	}})
	if err != nil || pub.GetWatchers() != 1 {
		t.Fatalf("PublishDeltas = %v, %v; want 1 watcher", pub, err)
	}
	var text string
	for text != "Hello" {
		m := recvUntil(t, stream.Recv, "deltas", func(m *agentplanev1.WatchTaskResponse) bool { return m.GetKeepalive() == nil })
		d := m.GetMessageDelta()
		if d.GetMessageId() != "m1" || d.GetAfterSequence() != up.GetCaughtUp().GetLastSequence() {
			t.Fatalf("got %v; want the deltas of m1", m)
		}
		text += d.GetTextDelta()
	}
	if evs := e.events(task.GetTaskId()); int64(len(evs)) != up.GetCaughtUp().GetLastSequence() {
		t.Fatalf("deltas entered the log: %d events", len(evs))
	}

	if _, err := e.c.CompleteTask(ctx, &agentplanev1.CompleteTaskRequest{Lease: ref, Output: &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "Hello")}}); err != nil {
		t.Fatal(err)
	}
	recvUntil(t, stream.Recv, "the terminal event", func(m *agentplanev1.WatchTaskResponse) bool {
		return m.GetEvent().GetStateChanged().GetToState() == agentplanev1.TaskState_TASK_STATE_COMPLETED
	})
	if _, err := stream.Recv(); err == nil {
		t.Fatal("the watch went on after the terminal event")
	}
	_, err = e.c.PublishDeltas(ctx, &agentplanev1.PublishDeltasRequest{Lease: ref, Deltas: []*agentplanev1.MessageDelta{{MessageId: "m2", TextDelta: "x"}}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("PublishDeltas after the task ended: %v; want FAILED_PRECONDITION", err)
	}
}

// TestAwaitDecisionArms: an AwaitDecision stream says the wait is registered
// (pending), keeps an idle stream alive, and ends with the decision; a wait whose task
// is canceled ends with canceled, not LEASE_LOST.
func TestAwaitDecisionArms(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) { c.Limits.StreamKeepaliveInterval = config.Duration(time.Second) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e := &retryEnv{t: t, ctx: ctx, c: in.Client.Runtime, ts: in.Client.Tasks, hs: in.Client.Hitl}
	gate := func(ref *agentplanev1.LeaseRef, call string) string {
		t.Helper()
		resp, err := e.c.CheckToolCall(ctx, &agentplanev1.CheckToolCallRequest{
			Lease: ref, CallId: call, ToolName: gatedTool, AgentName: "teller",
			ArgumentsJson: `{"n":1}`,
		})
		if err != nil || resp.GetOutcome() != agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT {
			t.Fatalf("CheckToolCall = %v, %v", resp, err)
		}
		return resp.GetInterrupt().GetInterruptId()
	}

	e.start()
	ref := e.lease()
	id := gate(ref, "c1")
	stream, err := e.c.AwaitDecision(ctx, &agentplanev1.AwaitDecisionRequest{Lease: ref, InterruptId: id})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || m.GetPending() == nil {
		t.Fatalf("first message %v, %v; want pending", m, err)
	}
	recvUntil(t, stream.Recv, "a keepalive", func(m *agentplanev1.AwaitDecisionResponse) bool { return m.GetKeepalive() != nil })
	if _, err := e.hs.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{
		InterruptId: id, Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}},
	}); err != nil {
		t.Fatal(err)
	}
	m := recvUntil(t, stream.Recv, "the decision", func(m *agentplanev1.AwaitDecisionResponse) bool { return m.GetKeepalive() == nil })
	if m.GetDecision().GetType() != agentplanev1.DecisionType_DECISION_TYPE_APPROVE {
		t.Fatalf("got %v; want the approval", m)
	}
	if _, err := stream.Recv(); err == nil {
		t.Fatal("the stream went on after the decision")
	}

	task := e.start()
	ref = e.lease()
	id = gate(ref, "c2")
	stream, err = e.c.AwaitDecision(ctx, &agentplanev1.AwaitDecisionRequest{Lease: ref, InterruptId: id})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || m.GetPending() == nil {
		t.Fatalf("first message %v, %v; want pending", m, err)
	}
	if _, err := e.ts.CancelTask(ctx, &agentplanev1.CancelTaskRequest{TaskId: task.GetTaskId(), Reason: "user left"}); err != nil {
		t.Fatal(err)
	}
	m = recvUntil(t, stream.Recv, "the end of the wait", func(m *agentplanev1.AwaitDecisionResponse) bool { return m.GetKeepalive() == nil })
	if m.GetCanceled().GetReason() != "user left" {
		t.Fatalf("a wait whose task was canceled got %v; want canceled", m)
	}
}

// TestListTaskEventsPages: ListTaskEvents pages a task's log with sealed tokens,
// oldest first, from after_sequence, and is tenant-scoped like every task read.
func TestListTaskEventsPages(t *testing.T) {
	e := newRetryEnv(t)
	task := e.start()
	ref := e.lease()
	var rep *agentplanev1.ReportEventsResponse
	for range 7 {
		var err error
		rep, err = e.c.ReportEvents(e.ctx, &agentplanev1.ReportEventsRequest{Lease: ref, Events: []*agentplanev1.RuntimeEvent{
			{Payload: &agentplanev1.RuntimeEvent_Note{Note: &agentplanev1.RuntimeNote{Text: "n"}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	var seqs []int64
	req := &agentplanev1.ListTaskEventsRequest{TaskId: task.GetTaskId(), PageSize: 3, AfterSequence: 2}
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		resp, err := e.ts.ListTaskEvents(e.ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetEvents()) > 3 {
			t.Fatalf("page of %d events, want at most 3", len(resp.GetEvents()))
		}
		for _, ev := range resp.GetEvents() {
			seqs = append(seqs, ev.GetSequence())
		}
		if resp.GetNextPageToken() == "" {
			break
		}
		req.PageToken = resp.GetNextPageToken()
	}
	for i, s := range seqs {
		if s != int64(i)+3 {
			t.Fatalf("sequences %v; want 3..%d in order", seqs, rep.GetLastSequence())
		}
	}
	if seqs[len(seqs)-1] != rep.GetLastSequence() {
		t.Fatalf("sequences %v end before %d", seqs, rep.GetLastSequence())
	}
	_, err := e.ts.ListTaskEvents(e.ctx, &agentplanev1.ListTaskEventsRequest{TaskId: "no-such-task"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("ListTaskEvents of a missing task: %v", err)
	}
	_, err = e.ts.ListTaskEvents(e.ctx, &agentplanev1.ListTaskEventsRequest{TaskId: task.GetTaskId(), PageToken: "garbage"})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("ListTaskEvents with a bad token: %v", err)
	}
}

// TestFrequentClientPingsAreAllowed: a client that pings every 10 s (the floor of
// gRPC's client libraries, and what several of them are configured with) keeps its
// connection and its idle stream; gRPC's default server policy (5 min) answers it with
// GOAWAY too_many_pings after its second ping. It waits for real pings, so it takes
// about 35 s.
func TestFrequentClientPingsAreAllowed(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for real keepalive pings")
	}
	in := servertest.Start(t, func(c *config.Config) { c.Limits.StreamKeepaliveInterval = config.Duration(time.Hour) })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(in.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	e := &retryEnv{t: t, ctx: ctx, c: in.Client.Runtime, ts: agentplanev1.NewTaskServiceClient(conn), hs: in.Client.Hitl}
	task := e.start()
	stream, err := e.ts.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: task.GetTaskId()})
	if err != nil {
		t.Fatal(err)
	}
	recvUntil(t, stream.Recv, "caught_up", func(m *agentplanev1.WatchTaskResponse) bool { return m.GetCaughtUp() != nil })
	got := make(chan error, 1)
	go func() {
		_, err := stream.Recv()
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the idle watch ended: %v", err)
	case <-time.After(35 * time.Second): // three client pings
	}
	if _, err := e.ts.CancelTask(ctx, &agentplanev1.CancelTaskRequest{TaskId: task.GetTaskId()}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("after three client pings the watch got %v; want the cancellation's event", err)
	}
}
