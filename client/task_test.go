package client_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
)

// runtime is the runtime the helpers' tests talk to: by the task's input it makes a
// gated call of send_email, pauses for a chat turn, or waits for a client tool's output.
func runtime(ctx context.Context, task *worker.Task) error {
	say := func(text string) error {
		return task.Complete(ctx, &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, text)})
	}
	switch task.InputText() {
	case "chat":
		if m := task.ContinueMessages(); len(m) > 0 {
			return say("you said " + client.MessageText(m[len(m)-1]))
		}
		_, err := task.Pause(ctx, "what next?", "sdk-test")
		return err
	case "weather":
		if r := task.ContinueToolResults(); len(r) > 0 {
			return say("weather " + r[0].GetResult().GetStringValue())
		}
		g, err := task.ToolCall(ctx, worker.Call{ID: "w1", Name: "get_weather", ArgumentsJSON: `{"city":"Oslo"}`, Node: "sdk-test"})
		if err != nil {
			return err
		}
		_, err = task.WaitForToolOutputs(ctx, "sdk-test", g)
		return err
	}
	g, err := task.ToolCall(ctx, worker.Call{ID: "c1", Name: "send_email", ArgumentsJSON: `{"to":"ada@example.com"}`, Node: "sdk-test"})
	if err != nil {
		return err
	}
	if !g.Allowed {
		return say("not sent") // the reviewer's reason reaches the model wrapped as untrusted text
	}
	if err := task.ToolResult(ctx, g.Call, structpb.NewBoolValue(true), false); err != nil {
		return err
	}
	return say("sent " + g.ArgumentsJSON)
}

func startRuntime(t *testing.T) *client.Client {
	c, _ := startRuntimeAt(t)
	return c
}

func startRuntimeAt(t *testing.T) (*client.Client, string) {
	t.Helper()
	in := servertest.Start(t, nil)
	w, err := worker.New(in.Client.Runtime, worker.HandlerFunc(runtime), worker.Options{
		RuntimeID: "helpers", PollWait: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		_ = w.Stop(context.Background())
		cancel()
		<-done
	})
	return in.Client, in.GRPCAddr
}

func agentSpec() *agentplanev1.StartTaskRequest_Spec {
	return &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(&agentplanev1.AgentSpec{
		ApiVersion: "qar/v1", Kind: "AgentSpec", Name: proto.String("sdk-test"), Model: "m",
		Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "Be brief."}},
	})}
}

func output(t *testing.T, task *agentplanev1.Task, want string) {
	t.Helper()
	if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || client.MessageText(task.GetOutput().GetMessage()) != want {
		t.Fatalf("task %v output %q failure %v, want COMPLETED %q", task.GetState(), client.MessageText(task.GetOutput().GetMessage()), task.GetFailure(), want)
	}
}

// The snippets between "snippet:" and "end snippet" are in docs/clients.md verbatim
// (TestDocSnippets checks it).

func TestApproveRejectEdit(t *testing.T) {
	c := startRuntime(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, decide := range []string{"approve", "reject", "edit"} {
		t.Run(decide, func(t *testing.T) {
			// snippet: go-approve
			h, err := c.Start(ctx, &agentplanev1.StartTaskRequest{
				Source: agentSpec(), Input: client.UserText("send it"),
				// Every call of send_email waits for a person.
				InterruptPolicy: &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Allowlist{
					Allowlist: &agentplanev1.ToolListPolicy{Tools: []string{"send_email"}}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = h.Wait(ctx, client.UntilInputRequired()) // INPUT_REQUIRED: a call waits
			if err != nil {
				t.Fatal(err)
			}
			pending, err := h.Interrupts(ctx)
			if err != nil || len(pending) != 1 {
				t.Fatalf("%v %v", pending, err)
			}
			id := pending[0].GetInterruptId()
			switch decide {
			case "approve":
				_, err = c.Approve(ctx, id, client.WithReason("looks right"))
			case "reject":
				_, err = c.Reject(ctx, id, "wrong recipient")
			case "edit":
				_, err = c.Edit(ctx, id, map[string]any{"to": "grace@example.com"})
			}
			if err != nil {
				t.Fatal(err)
			}
			task, err := h.Wait(ctx) // COMPLETED
			// end snippet
			if err != nil {
				t.Fatal(err)
			}
			output(t, task, map[string]string{
				"approve": `sent {"to":"ada@example.com"}`, "reject": "not sent", "edit": `sent {"to":"grace@example.com"}`,
			}[decide])
		})
	}
}

// A helper resolves against the digest of the arguments it read: a digest that is not
// the interrupt's is refused, not approved; a repeat with the same request id answers
// the first decision.
func TestResolveChecksDigestAndRetries(t *testing.T) {
	c, addr := startRuntimeAt(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := c.Start(ctx, &agentplanev1.StartTaskRequest{Source: agentSpec(), Input: client.UserText("send it"),
		InterruptPolicy: &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Allowlist{
			Allowlist: &agentplanev1.ToolListPolicy{Tools: []string{"send_email"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if h.Started == nil || h.ID == "" || h.Started.GetTask().GetTaskId() != h.ID {
		t.Fatalf("handle %+v", h)
	}
	if _, err := h.Wait(ctx, client.UntilInputRequired()); err != nil {
		t.Fatal(err)
	}
	pending, err := c.Task(h.ID).Interrupts(ctx)
	if err != nil || len(pending) != 1 {
		t.Fatalf("%v %v", pending, err)
	}
	id := pending[0].GetInterruptId()
	if pending[0].GetArgsDigest() == "" {
		t.Fatal("the interrupt has no args digest")
	}
	if _, err := c.Approve(ctx, id, client.WithArgsDigest("0000")); reasons.Of(err) != agentplanev1.ErrorReason_ERROR_REASON_INTERRUPT_ARGS_MISMATCH {
		t.Fatalf("approve against another digest: %v", err)
	}
	// What the helper sends: the digest it read, and a request id.
	var sent []*agentplanev1.ResolveInterruptRequest
	spy, err := client.Dial(ctx, addr, client.WithDialOptions(grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if r, ok := req.(*agentplanev1.ResolveInterruptRequest); ok {
				sent = append(sent, r)
				return status.Error(codes.Aborted, "recorded, not sent")
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		})))
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Close()
	if _, err := spy.Approve(ctx, id); status.Code(err) != codes.Aborted {
		t.Fatalf("the spy: %v", err)
	}
	if len(sent) != 1 || sent[0].GetArgsDigest() != pending[0].GetArgsDigest() || sent[0].GetRequestId() == "" {
		t.Fatalf("sent %v, want the digest %s and a request id", sent, pending[0].GetArgsDigest())
	}
	rid := client.NewRequestID()
	first, err := c.Reject(ctx, id, "no", client.WithRequestID(rid))
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Reject(ctx, id, "no", client.WithRequestID(rid))
	if err != nil || again.GetInterruptId() != first.GetInterruptId() || again.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED {
		t.Fatalf("the retry: %v %v", again, err)
	}
	if _, err := c.Reject(ctx, id, "no"); reasons.Of(err) != agentplanev1.ErrorReason_ERROR_REASON_INTERRUPT_ALREADY_RESOLVED {
		t.Fatalf("a new rejection of a resolved interrupt: %v", err)
	}
	task, err := c.Task(h.ID).Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	output(t, task, "not sent")
}

func TestContinueAndCancel(t *testing.T) {
	c := startRuntime(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// snippet: go-continue
	chat, err := c.Start(ctx, &agentplanev1.StartTaskRequest{Source: agentSpec(), Input: client.UserText("chat")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chat.Wait(ctx, client.UntilInputRequired()); err != nil { // the runtime paused for a turn
		t.Fatal(err)
	}
	if _, err := chat.Continue(ctx, client.UserText("hello")); err != nil {
		t.Fatal(err)
	}
	done, err := chat.Wait(ctx)
	// end snippet
	if err != nil {
		t.Fatal(err)
	}
	output(t, done, "you said hello")
	// The watch replays the task's earlier INPUT_REQUIRED; Wait answers the state it is in.
	again, err := c.Task(chat.ID).Wait(ctx, client.UntilInputRequired())
	if err != nil {
		t.Fatal(err)
	}
	output(t, again, "you said hello")

	// snippet: go-tool-outputs
	weather, err := c.Start(ctx, &agentplanev1.StartTaskRequest{Source: agentSpec(), Input: client.UserText("weather")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := weather.Wait(ctx, client.UntilInputRequired()); err != nil { // waits for get_weather's output
		t.Fatal(err)
	}
	if _, err := weather.ContinueToolOutputs(ctx, []*agentplanev1.ToolOutput{
		{CallId: "w1", Result: structpb.NewStringValue("21C, clear")},
	}); err != nil {
		t.Fatal(err)
	}
	done, err = weather.Wait(ctx)
	// end snippet
	if err != nil {
		t.Fatal(err)
	}
	output(t, done, "weather 21C, clear")

	// A task nobody answers: Wait without the option keeps waiting through INPUT_REQUIRED
	// until the cancel ends it.
	stuck, err := c.Start(ctx, &agentplanev1.StartTaskRequest{Source: agentSpec(), Input: client.UserText("chat")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stuck.Wait(ctx, client.UntilInputRequired()); err != nil {
		t.Fatal(err)
	}
	waited := make(chan *agentplanev1.Task, 1)
	go func() { task, _ := stuck.Wait(ctx); waited <- task }()
	if _, err := c.Task(stuck.ID).Cancel(ctx, "no answer"); err != nil {
		t.Fatal(err)
	}
	if got := <-waited; got.GetState() != agentplanev1.TaskState_TASK_STATE_CANCELED {
		t.Fatalf("wait returned %v", got.GetState())
	}
}
