package agent

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	"github.com/agentplane/agentplane/cmd/runtime/internal/agenttest"
	"github.com/agentplane/agentplane/cmd/runtime/internal/fakemodel"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

const supportAgent = `apiVersion: qar/v1
kind: AgentSpec
name: support
instructions: You are a support agent.
model: fake-1
`

const clientToolAgent = supportAgent + `tools:
  - type: function
    function:
      name: lookup_order
      description: Look an order up
      parameters: {type: object, properties: {order_id: {type: integer}}, required: [order_id], additionalProperties: false}
`

// toolServer is a runtime HTTP tool endpoint that counts its calls.
type toolServer struct {
	mu    sync.Mutex
	calls []string
	url   string
}

func startTool(t *testing.T, answer string) *toolServer {
	ts := &toolServer{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ts.mu.Lock()
		ts.calls = append(ts.calls, string(b))
		ts.mu.Unlock()
		io.WriteString(w, answer)
	}))
	t.Cleanup(hs.Close)
	ts.url = hs.URL
	return ts
}

func (ts *toolServer) Calls() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]string(nil), ts.calls...)
}

func startWorker(t *testing.T, ctx context.Context, in *servertest.Instance, r *Runner, maxTasks int) <-chan error {
	t.Helper()
	r.Logger = agenttest.Quiet
	return agenttest.RunWorker(t, ctx, in, r, maxTasks)
}

func startTask(t *testing.T, ctx context.Context, in *servertest.Instance, doc string, policy *agentplanev1.InterruptPolicy) string {
	t.Helper()
	resp, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Document{Document: []byte(doc)},
		Format: agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML, Input: client.UserText("refund order 42"), InterruptPolicy: policy,
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetTask().GetTaskId()
}

// events reads the task's whole log.
func events(t *testing.T, ctx context.Context, in *servertest.Instance, taskID string) []*agentplanev1.TaskEvent {
	t.Helper()
	return agenttest.Events(t, ctx, in, taskID)
}

// TestGatedToolApprovedThenCompletes: the model calls a runtime tool that the policy
// gates; a reviewer approves it; the tool runs once, its result goes back to the model,
// and the task completes with the model's last message. The fake model checks what it
// was sent.
func TestGatedToolApprovedThenCompletes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in := servertest.Start(t, nil)
	model := fakemodel.Start(t,
		fakemodel.Turn{Status: 429, RetryAfter: 0},
		fakemodel.Turn{Text: "Let me refund that.", Calls: []fakemodel.Call{{ID: "call_1", Name: "issue_refund", Arguments: `{"order_id":42}`}}, PromptTokens: 10, CompletionTokens: 7},
		fakemodel.Turn{Text: "Refunded order 42.", PromptTokens: 30, CompletionTokens: 5},
	)
	tool := startTool(t, `{"refunded":true}`)
	r := &Runner{
		Routes: []Route{{Pattern: "fake-*", BaseURL: model.URL, APIKey: "k-test", MaxRetries: 2}},
		Tools: []*HTTPTool{{Name: "issue_refund", Description: "Refund an order", URL: tool.url,
			Parameters: map[string]any{"type": "object", "properties": map[string]any{"order_id": map[string]any{"type": "integer"}}}}},
	}
	taskID := startTask(t, ctx, in, supportAgent, &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Allowlist{Allowlist: &agentplanev1.ToolListPolicy{Tools: []string{"issue_refund"}}}})
	done := startWorker(t, ctx, in, r, 1)

	stream, err := in.Client.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	approved := 0
	deltas := map[string]string{} // message id -> text streamed
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if d := resp.GetMessageDelta(); d != nil {
			deltas[d.GetMessageId()] += d.GetTextDelta()
		}
		if it := resp.GetEvent().GetInterruptRaised().GetInterrupt(); it.GetKind() == agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL {
			if n := len(tool.Calls()); n != 0 {
				t.Fatalf("the tool ran %d times before it was approved", n)
			}
			if _, err := in.Client.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{
				InterruptId: it.GetInterruptId(), ArgsDigest: it.GetArgsDigest(),
				Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}},
			}); err != nil {
				t.Fatal(err)
			}
			approved++
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("worker: %v", err)
	}
	got, err := in.Client.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	if task := got.GetTask(); task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || client.MessageText(task.GetOutput().GetMessage()) != "Refunded order 42." {
		t.Fatalf("task %v %v output %v", task.GetState(), task.GetFailure(), task.GetOutput())
	}
	// The last turn streamed while the reviewer watched: its deltas make the message.
	if id := got.GetTask().GetOutput().GetMessage().GetMessageId(); deltas[id] != "Refunded order 42." {
		t.Errorf("deltas of %s: %q (all: %q)", id, deltas[id], deltas)
	}
	if approved != 1 {
		t.Errorf("approved %d interrupts, want 1", approved)
	}
	if calls := tool.Calls(); len(calls) != 1 || calls[0] != `{"order_id":42}` {
		t.Errorf("tool calls %q", calls)
	}

	reqs := model.Requests()
	if len(reqs) != 3 { // the 429, its retry, the turn after the tool
		t.Fatalf("model got %d requests, want 3", len(reqs))
	}
	first := reqs[1]
	if !first.Stream || first.Model != "fake-1" || first.Auth != "Bearer k-test" {
		t.Errorf("request: stream %v model %q auth %q", first.Stream, first.Model, first.Auth)
	}
	if len(first.Tools) != 1 || first.Tools[0].Function.Name != "issue_refund" || first.Tools[0].Function.Parameters["type"] != "object" {
		t.Errorf("tools offered: %+v", first.Tools)
	}
	if len(first.Messages) != 2 || !strings.Contains(string(first.Messages[0]), `"role":"system"`) || !strings.Contains(string(first.Messages[1]), "refund order 42") {
		t.Errorf("first messages: %s", first.Messages)
	}
	last := reqs[2]
	if len(last.Messages) != 4 || !strings.Contains(string(last.Messages[2]), `"call_1"`) ||
		!strings.Contains(string(last.Messages[3]), `"tool_call_id":"call_1"`) || !strings.Contains(string(last.Messages[3]), `refunded`) {
		t.Errorf("second turn messages: %s", last.Messages)
	}

	// The log: the assistant message once with its model and usage, the call, its result.
	var kinds []string
	var firstMsgID string
	for _, ev := range events(t, ctx, in, taskID) {
		switch p := ev.GetPayload().(type) {
		case *agentplanev1.TaskEvent_Message:
			if p.Message.GetRole() == agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT {
				kinds = append(kinds, "message")
				if firstMsgID == "" {
					firstMsgID = p.Message.GetMessageId()
				}
				if p.Message.GetModel() != "fake-1" || p.Message.GetUsage().GetTotalTokens() == 0 {
					t.Errorf("assistant message without model or usage: %v", p.Message)
				}
			}
		case *agentplanev1.TaskEvent_ToolCall:
			kinds = append(kinds, "tool_call")
			// The call names the assistant message whose model call made it.
			if id := p.ToolCall.GetMessageId(); id == "" || id != firstMsgID {
				t.Errorf("tool call message_id %q, want the first assistant message %q", id, firstMsgID)
			}
		case *agentplanev1.TaskEvent_ToolResult:
			kinds = append(kinds, "tool_result")
			if p.ToolResult.GetIsError() {
				t.Errorf("tool result is an error: %v", p.ToolResult)
			}
		}
	}
	if strings.Join(kinds, ",") != "message,tool_call,tool_result,message" {
		t.Errorf("log: %v", kinds)
	}
}

// TestClientFunctionToolRoundTrip: the model calls a function tool the agent
// declares; the task pauses for its output, the client continues it with the output,
// and a new lease rebuilds the conversation from the log and finishes.
func TestClientFunctionToolRoundTrip(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in := servertest.Start(t, nil)
	model := fakemodel.Start(t,
		fakemodel.Turn{Calls: []fakemodel.Call{{ID: "call_7", Name: "lookup_order", Arguments: `{"order_id":42}`}}},
		fakemodel.Turn{Text: "Order 42 shipped."},
	)
	r := &Runner{Routes: []Route{{Pattern: "*", BaseURL: model.URL}}}
	taskID := startTask(t, ctx, in, clientToolAgent, nil)
	done := startWorker(t, ctx, in, r, 2)

	var it *agentplanev1.Interrupt
	for it == nil {
		got, err := in.Client.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: taskID})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetTask().GetState() == agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED {
			for _, ev := range events(t, ctx, in, taskID) {
				if r := ev.GetInterruptRaised().GetInterrupt(); r.GetKind() == agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED {
					it = r
				}
			}
			if it == nil {
				t.Fatal("INPUT_REQUIRED without a tool output interrupt")
			}
			break
		}
		if s := got.GetTask().GetState(); s == agentplanev1.TaskState_TASK_STATE_FAILED || s == agentplanev1.TaskState_TASK_STATE_COMPLETED {
			t.Fatalf("task ended %v %v before asking for the tool output", s, got.GetTask().GetFailure())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The client answers the runtime's call id; the model gets its own back (below).
	if ids := agenttest.ModelCallIDs(events(t, ctx, in, taskID)); ids[it.GetCallId()] != "call_7" || it.GetToolOutput().GetArgumentsJson() != `{"order_id":42}` {
		t.Fatalf("interrupt %v", it)
	}
	if _, err := in.Client.Tasks.ContinueTask(ctx, &agentplanev1.ContinueTaskRequest{TaskId: taskID, Input: &agentplanev1.ContinueTaskRequest_ToolOutputs{
		ToolOutputs: &agentplanev1.ToolOutputs{Outputs: []*agentplanev1.ToolOutput{{CallId: it.GetCallId(), Result: structpb.NewStringValue("shipped on Monday")}}},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("worker: %v", err)
	}
	got, err := in.Client.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	if task := got.GetTask(); task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || client.MessageText(task.GetOutput().GetMessage()) != "Order 42 shipped." {
		t.Fatalf("task %v %v output %v", task.GetState(), task.GetFailure(), task.GetOutput())
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model got %d requests", len(reqs))
	}
	var roles []string
	for _, m := range reqs[1].Messages {
		var v struct {
			Role string `json:"role"`
		}
		_ = json.Unmarshal(m, &v)
		roles = append(roles, v.Role)
	}
	if strings.Join(roles, ",") != "system,user,assistant,tool" || !strings.Contains(string(reqs[1].Messages[3]), "shipped on Monday") ||
		!strings.Contains(string(reqs[1].Messages[2]), `"id":"call_7"`) || !strings.Contains(string(reqs[1].Messages[3]), `"tool_call_id":"call_7"`) {
		t.Errorf("rebuilt conversation: %s", reqs[1].Messages)
	}
	if p := reqs[0].Tools[0].Function.Parameters; p["additionalProperties"] != false {
		t.Errorf("function tool schema not passed through: %v", p)
	}
}

// TestCancelStopsTheModelStream: a task canceled while the model streams ends the
// model call (the fake model sees its client go away) and the task is canceled.
func TestCancelStopsTheModelStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in := servertest.Start(t, func(c *config.Config) { c.Tasks.LeaseTTL = config.Duration(2 * time.Second) })
	model := fakemodel.Start(t, fakemodel.Turn{Text: "I am thinking about", Hang: true})
	taskID := startTask(t, ctx, in, supportAgent, nil)
	done := startWorker(t, ctx, in, &Runner{Routes: []Route{{Pattern: "*", BaseURL: model.URL}}}, 1)
	for len(model.Requests()) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := in.Client.Tasks.CancelTask(ctx, &agentplanev1.CancelTaskRequest{TaskId: taskID, Reason: "stop"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-model.Gone():
	case <-ctx.Done():
		t.Fatal("the model stream was not stopped by the cancel")
	}
	if err := <-done; err != nil {
		t.Fatalf("worker: %v", err)
	}
	got, err := in.Client.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_CANCELED {
		t.Errorf("task %v", got.GetTask().GetState())
	}
}

// TestFailedResultReportStopsBeforeAnswer: a tool result's report travels while the
// model is asked again; when it fails (the task was canceled while the tool ran, so
// the report is refused), the lease stops with that error and the model's answer to
// the unlogged result is never reported.
func TestFailedResultReportStopsBeforeAnswer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in := servertest.Start(t, nil)
	model := fakemodel.Start(t,
		fakemodel.Turn{Text: "Let me refund that.", Calls: []fakemodel.Call{{ID: "call_1", Name: "issue_refund", Arguments: `{"order_id":42}`}}},
		fakemodel.Turn{Text: "Refunded order 42."},
	)
	var taskID string
	started := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-started
		if _, err := in.Client.Tasks.CancelTask(r.Context(), &agentplanev1.CancelTaskRequest{TaskId: taskID, Reason: "stop"}); err != nil {
			t.Errorf("CancelTask: %v", err)
		}
		io.WriteString(w, `{"refunded":true}`)
	}))
	defer hs.Close()
	ran := make(chan error, 1)
	r := &Runner{
		Routes: []Route{{Pattern: "fake-*", BaseURL: model.URL}},
		Tools:  []*HTTPTool{{Name: "issue_refund", URL: hs.URL}},
	}
	taskID = startTask(t, ctx, in, supportAgent, nil)
	close(started)
	r.Logger = agenttest.Quiet
	agenttest.RunWorker(t, ctx, in, worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) error {
		err := r.Run(ctx, tk)
		ran <- err
		return err
	}), 1)
	select {
	case err := <-ran:
		if err == nil { // the report's refusal, or the cancel that caused it
			t.Error("the lease's run ended without an error")
		}
	case <-ctx.Done():
		t.Fatal("the lease's run did not end")
	}
	for _, ev := range events(t, ctx, in, taskID) {
		if ev.GetToolResult() != nil {
			t.Errorf("a result was logged for a canceled task: %v", ev)
		}
		if m := ev.GetMessage(); m.GetRole() == agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT && client.MessageText(m) != "Let me refund that." {
			t.Errorf("an answer was reported after an unlogged result: %q", client.MessageText(m))
		}
	}
}

// TestModelCallHeldBySpentBudget: a task under a budget with on_limit approve; the
// first model call spends it, so the runtime asks before the second, which waits for a
// person: the model is not called until the approval, then the task completes.
func TestModelCallHeldBySpentBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in := servertest.Start(t, func(c *config.Config) {
		c.Budgets.Rules = []config.BudgetRule{{Name: "gated", Period: config.PeriodDay, MaxTokens: 10, OnLimit: config.OnLimitApprove}}
	})
	model := fakemodel.Start(t,
		fakemodel.Turn{Text: "Looking.", Calls: []fakemodel.Call{{ID: "call_1", Name: "issue_refund", Arguments: `{"order_id":42}`}}, PromptTokens: 10, CompletionTokens: 7},
		fakemodel.Turn{Text: "Refunded order 42.", PromptTokens: 30, CompletionTokens: 5},
	)
	tool := startTool(t, `{"refunded":true}`)
	r := &Runner{
		Routes: []Route{{Pattern: "fake-*", BaseURL: model.URL, APIKey: "k-test"}},
		Tools:  []*HTTPTool{{Name: "issue_refund", Description: "Refund an order", URL: tool.url, Parameters: map[string]any{"type": "object"}}},
	}
	taskID := startTask(t, ctx, in, supportAgent, nil)
	done := startWorker(t, ctx, in, r, 1)
	approved := 0
	agenttest.Watch(t, ctx, in, taskID, func(resp *agentplanev1.WatchTaskResponse) {
		it := resp.GetEvent().GetInterruptRaised().GetInterrupt()
		if it.GetKind() != agentplanev1.InterruptKind_INTERRUPT_KIND_MODEL_CALL_APPROVAL {
			return
		}
		if n := len(model.Requests()); n != 1 {
			t.Errorf("the model got %d requests before the held call was approved; want 1", n)
		}
		if mc := it.GetApproval().GetModelCall(); mc.GetBudget() != "gated" || mc.GetUsed() != "17" || mc.GetModel() != "fake-1" || it.GetCallId() != "model.support..1" {
			t.Errorf("model-call approval %v", it)
		}
		agenttest.Approve(t, ctx, in, it)
		approved++
	})
	if err := <-done; err != nil {
		t.Fatalf("worker: %v", err)
	}
	if task := agenttest.Task(t, ctx, in, taskID); task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || approved != 1 || len(model.Requests()) != 2 {
		t.Fatalf("task %v %v; %d approvals, %d model requests; want COMPLETED after 1 approval and 2 requests", task.GetState(), task.GetFailure(), approved, len(model.Requests()))
	}
}
