package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"

	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

// The tests in this file run the SDK against the real control plane. They skip while
// the server answers UNIMPLEMENTED for leases.

func startServer(t *testing.T) *servertest.Instance {
	t.Helper()
	in := servertest.Start(t, func(c *config.Config) { c.Tasks.LeaseTTL = config.Duration(time.Second) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := in.Client.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "probe"}); status.Code(err) == codes.Unimplemented {
		t.Skip("the server does not lease tasks yet")
	}
	return in
}

func startAgentTask(t *testing.T, in *servertest.Instance, input string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(&agentplanev1.AgentSpec{
			ApiVersion: "qar/v1", Kind: "AgentSpec", Name: proto.String("sdk-test"), Model: "m",
			Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "Be brief."}},
		})},
		Input: client.UserText(input),
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetTask().GetTaskId()
}

func getTask(t *testing.T, in *servertest.Instance, id string) *agentplanev1.Task {
	t.Helper()
	resp, err := in.Client.Tasks.GetTask(context.Background(), &agentplanev1.GetTaskRequest{TaskId: id})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetTask()
}

func serverWorker(t *testing.T, in *servertest.Instance, h HandlerFunc) *Worker {
	t.Helper()
	w, err := New(in.Client.Runtime, h, Options{
		RuntimeID: "sdk-e2e", MaxTasks: 1, PollWait: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestServerCompletesWithHeartbeats(t *testing.T) {
	in := startServer(t)
	id := startAgentTask(t, in, "hello")
	// Hold the task for three lease lifetimes: only heartbeats keep it.
	w := serverWorker(t, in, func(ctx context.Context, task *Task) error {
		if task.InputText() != "hello" || task.Spec().GetAgent().GetName() != "sdk-test" || task.Attempt() != 1 {
			return errors.New("lease content")
		}
		first := task.Deadline()
		for !task.Deadline().After(first.Add(2 * time.Second)) {
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(50 * time.Millisecond): // re-read the deadline the heartbeats move
			}
		}
		if err := task.Say(ctx, "still here"); err != nil {
			return err
		}
		return task.Complete(ctx, &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "done")})
	})
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := getTask(t, in, id); got.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || got.GetAttempt() != 1 {
		t.Fatalf("task %v attempt %d failure %v", got.GetState(), got.GetAttempt(), got.GetFailure())
	}
}

func TestServerCancelReachesTheHandler(t *testing.T) {
	in := startServer(t)
	id := startAgentTask(t, in, "cancel me")
	leased := make(chan struct{})
	var cause error
	w := serverWorker(t, in, func(ctx context.Context, task *Task) error {
		close(leased)
		<-ctx.Done()
		cause = context.Cause(ctx)
		return cause
	})
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	<-leased
	if _, err := in.Client.Tasks.CancelTask(context.Background(), &agentplanev1.CancelTaskRequest{TaskId: id, Reason: "changed my mind"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not learn of the cancellation")
	}
	if !errors.Is(cause, ErrCanceled) {
		t.Fatalf("cause %v", cause)
	}
	if got := getTask(t, in, id); got.GetState() != agentplanev1.TaskState_TASK_STATE_CANCELED {
		t.Fatalf("task %v", got.GetState())
	}
}

func TestServerHandlerErrorFailsTheTask(t *testing.T) {
	in := startServer(t)
	id := startAgentTask(t, in, "fail me")
	w := serverWorker(t, in, func(context.Context, *Task) error {
		return &Failure{Reason: "model.unreachable", Message: "the model did not answer"}
	})
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := getTask(t, in, id)
	if got.GetState() != agentplanev1.TaskState_TASK_STATE_FAILED || got.GetFailure().GetReason() != "model.unreachable" {
		t.Fatalf("task %v failure %v", got.GetState(), got.GetFailure())
	}
}

// A handler that replays its turn after losing its lease must not run a tool twice:
// the call an earlier lease reported comes back as Reported, and is not reported
// (or refused) again.
func TestServerReplayedCallIsNotRunTwice(t *testing.T) {
	in := startServer(t)
	id := startAgentTask(t, in, "replay me")
	ran := 0
	var replayed *Gate
	w, err := New(in.Client.Runtime, HandlerFunc(func(ctx context.Context, task *Task) error {
		g, err := task.ToolCall(ctx, Call{ID: "c1", Name: "search", ArgumentsJSON: `"q"`, Node: "sdk-test"})
		if err != nil {
			return err
		}
		if g.Allowed {
			ran++
		}
		if task.Attempt() == 1 {
			// The runtime goes away after running the tool, before reporting its result.
			return &Failure{Reason: "runtime.restart", Message: "lost the turn", Retry: true}
		}
		replayed = g
		if g.Reported && !g.ResultReported {
			// Its result was lost with the first lease; the transcript needs one.
			if err := task.ToolResult(ctx, g.Call, structpb.NewStringValue("the result was lost with the runtime"), true); err != nil {
				return err
			}
		}
		return task.Complete(ctx, &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "done")})
	}), Options{RuntimeID: "sdk-e2e", MaxTasks: 2, PollWait: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ran != 1 {
		t.Fatalf("the tool ran %d times", ran)
	}
	if replayed == nil || !replayed.Reported || replayed.ResultReported || replayed.Allowed {
		t.Fatalf("replayed gate %+v, want Reported without its result and not Allowed", replayed)
	}
	if got := getTask(t, in, id); got.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("task %v failure %v", got.GetState(), got.GetFailure())
	}
}

// A client function tool: the handler runs the gate, reports the call and waits for
// the client's output; the client continues the task with it, and the next lease
// carries it as the call's result.
func TestServerWaitsForClientToolOutputs(t *testing.T) {
	in := startServer(t)
	id := startAgentTask(t, in, "weather?")
	waited := make(chan []*agentplanev1.Interrupt, 1)
	var got []*agentplanev1.ToolResult
	w, err := New(in.Client.Runtime, HandlerFunc(func(ctx context.Context, task *Task) error {
		if res := task.ContinueToolResults(); len(res) > 0 {
			got = res
			return task.Complete(ctx, &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "sunny")})
		}
		g, err := task.ToolCall(ctx, Call{ID: "w1", Name: "get_weather", ArgumentsJSON: `{"city":"Oslo"}`, Node: "sdk-test"})
		if err != nil {
			return err
		}
		waits, err := task.WaitForToolOutputs(ctx, "sdk-test", g)
		waited <- waits
		return err
	}), Options{RuntimeID: "sdk-e2e", MaxTasks: 2, PollWait: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var waits []*agentplanev1.Interrupt
	select {
	case waits = <-waited:
	case <-ctx.Done():
		t.Fatal("the task did not wait for the tool output")
	}
	if len(waits) != 1 || waits[0].GetKind() != agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED || waits[0].GetCallId() != "w1" ||
		waits[0].GetToolOutput().GetArgumentsJson() != `{"city":"Oslo"}` {
		t.Fatalf("waits %v", waits)
	}
	if _, err := in.Client.Tasks.ContinueTask(ctx, &agentplanev1.ContinueTaskRequest{TaskId: id,
		Input: &agentplanev1.ContinueTaskRequest_Message{Message: client.UserText("hi")}}); reasons.Of(err) != agentplanev1.ErrorReason_ERROR_REASON_TASK_TOOL_OUTPUTS_MISMATCH {
		t.Fatalf("a message for a task waiting for tool outputs: %v", err)
	}
	if _, err := in.Client.Tasks.ContinueTask(ctx, &agentplanev1.ContinueTaskRequest{TaskId: id,
		Input: &agentplanev1.ContinueTaskRequest_ToolOutputs{ToolOutputs: &agentplanev1.ToolOutputs{Outputs: []*agentplanev1.ToolOutput{
			{CallId: "w1", Result: structpb.NewStringValue("21C, clear")},
		}}}}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].GetCallId() != "w1" || got[0].GetResult().GetStringValue() != "21C, clear" {
		t.Fatalf("continue_tool_results %v", got)
	}
	if task := getTask(t, in, id); task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("task %v failure %v", task.GetState(), task.GetFailure())
	}
}

// A task under a budget with on_limit approve asks before each model call: allowed
// while the budget has room, then each call waits for a person (approved: it runs),
// and a rejection ends the task, failed by the control plane.
func TestServerModelCallApproval(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) {
		c.Budgets.Rules = []config.BudgetRule{{Name: "gated", Period: config.PeriodDay, MaxTokens: 10, OnLimit: config.OnLimitApprove}}
	})
	id := startAgentTask(t, in, "spend")
	var second, third error
	w := serverWorker(t, in, func(ctx context.Context, task *Task) error {
		if !task.Lease().GetCheckModelCalls() {
			return errors.New("the lease does not say check_model_calls")
		}
		if err := task.ModelCall(ctx, ModelCall{ID: "m1", Node: "sdk-test", Model: "m"}); err != nil {
			return err
		}
		msg := client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "thinking")
		msg.Model, msg.Usage = "m", &agentplanev1.TokenUsage{TotalTokens: 20}
		if _, err := task.Report(ctx, &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_Message{Message: msg}}); err != nil {
			return err
		}
		second = task.ModelCall(ctx, ModelCall{ID: "m2", Node: "sdk-test", Model: "m"})
		third = task.ModelCall(ctx, ModelCall{ID: "m3", Node: "sdk-test", Model: "m"})
		return third
	})
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	decide := func(callID string, d *agentplanev1.ResolveInterruptRequest) {
		for ctx.Err() == nil {
			resp, err := in.Client.Hitl.ListInterrupts(ctx, &agentplanev1.ListInterruptsRequest{TaskId: id})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range resp.GetInterrupts() {
				if it.GetCallId() == callID && it.GetKind() == agentplanev1.InterruptKind_INTERRUPT_KIND_MODEL_CALL_APPROVAL {
					d.InterruptId = it.GetInterruptId()
					if _, err := in.Client.Hitl.ResolveInterrupt(ctx, d); err != nil {
						t.Fatal(err)
					}
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("no model-call approval for %s", callID)
	}
	decide("m2", &agentplanev1.ResolveInterruptRequest{Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}}})
	decide("m3", &agentplanev1.ResolveInterruptRequest{Decision: &agentplanev1.ResolveInterruptRequest_Reject{Reject: &agentplanev1.RejectDecision{Reason: "no more"}}})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if second != nil || !errors.Is(third, ErrModelCallRejected) {
		t.Fatalf("ModelCall after approval = %v, after rejection = %v; want nil and ErrModelCallRejected", second, third)
	}
	if got := getTask(t, in, id); got.GetState() != agentplanev1.TaskState_TASK_STATE_FAILED || got.GetFailure().GetReason() != "budget.model_call_rejected" {
		t.Fatalf("task %v failure %v", got.GetState(), got.GetFailure())
	}
}
