package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/runtime/internal/agenttest"
	"github.com/agentplane/agentplane/cmd/runtime/internal/fakemodel"
	"github.com/agentplane/agentplane/cmd/runtime/internal/telemetry"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/servertest"
)

// The model is a hostile peer like any other: these tests play a fake that behaves as
// real OpenAI-compatible servers do in their less common ways.

// refundTool is the runtime's HTTP tool issue_refund, whose order_id is an integer.
func refundTool(url string) *HTTPTool {
	return &HTTPTool{Name: "issue_refund", Description: "Refund an order", URL: url, Parameters: map[string]any{
		"type": "object", "properties": map[string]any{"order_id": map[string]any{"type": "integer"}}, "required": []any{"order_id"},
	}}
}

// runTask runs one task of doc on a runner against model, to its end.
func runTask(t *testing.T, r *Runner, doc string) (*servertest.Instance, string, *agentplanev1.Task) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in := servertest.Start(t, nil)
	if r.Logger == nil {
		r.Logger = agenttest.Quiet
	}
	taskID := startTask(t, ctx, in, doc, nil)
	if err := <-agenttest.RunWorker(t, ctx, in, r, 1); err != nil {
		t.Fatalf("worker: %v", err)
	}
	return in, taskID, agenttest.Task(t, ctx, in, taskID)
}

// wireMessage is a message of a request as the model server got it.
type wireMessage struct {
	Role       string `json:"role"`
	Content    any    `json:"content"`
	ToolCallID string `json:"tool_call_id"`
	ToolCalls  []struct {
		ID string `json:"id"`
	} `json:"tool_calls"`
}

func wire(t *testing.T, req fakemodel.Request) []wireMessage {
	t.Helper()
	out := make([]wireMessage, len(req.Messages))
	for i, m := range req.Messages {
		if err := json.Unmarshal(m, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// shape is a conversation as roles and call ids: "assistant[call_1,call_2]",
// "tool:call_1".
func shape(t *testing.T, req fakemodel.Request) string {
	var parts []string
	for _, m := range wire(t, req) {
		switch {
		case m.Role == "tool":
			parts = append(parts, "tool:"+m.ToolCallID)
		case len(m.ToolCalls) > 0:
			var ids []string
			for _, c := range m.ToolCalls {
				ids = append(ids, c.ID)
			}
			parts = append(parts, "assistant["+strings.Join(ids, ",")+"]")
		default:
			parts = append(parts, m.Role)
		}
	}
	return strings.Join(parts, " ")
}

// TestToolCallIDsRepeatAcrossTurns: a server that numbers calls per response sends
// call_1 on every turn, and streams parallel calls' arguments in many interleaved
// chunks. Each call gets a runtime id of its own (the gate's and the log's), so the
// second call_1 runs instead of failing the task, while the model gets its own ids
// back.
func TestToolCallIDsRepeatAcrossTurns(t *testing.T) {
	model := fakemodel.Start(t,
		fakemodel.Turn{Calls: []fakemodel.Call{
			{ID: "call_1", Name: "issue_refund", Arguments: `{"order_id": 42}`},
			{ID: "call_2", Name: "issue_refund", Arguments: `{"order_id": 43}`},
		}, ArgChunks: 7},
		fakemodel.Turn{Calls: []fakemodel.Call{{ID: "call_1", Name: "issue_refund", Arguments: `{"order_id": 44}`}}, ArgChunks: 5},
		fakemodel.Turn{Text: "Refunded 42, 43 and 44."},
	)
	tool := startTool(t, `{"refunded":true}`)
	in, taskID, task := runTask(t, &Runner{Routes: []Route{{Pattern: "*", BaseURL: model.URL}}, Tools: []*HTTPTool{refundTool(tool.url)}}, supportAgent)
	if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("task %v %v", task.GetState(), task.GetFailure())
	}
	if got := strings.Join(tool.Calls(), " "); got != `{"order_id": 42} {"order_id": 43} {"order_id": 44}` {
		t.Errorf("the tool ran with %s", got)
	}
	reqs := model.Requests()
	if got := shape(t, reqs[2]); got != "system user assistant[call_1,call_2] tool:call_1 tool:call_2 assistant[call_1] tool:call_1" {
		t.Errorf("the model was sent %s", got)
	}
	evs := agenttest.Events(t, context.Background(), in, taskID)
	ids := agenttest.ModelCallIDs(evs)
	seen := map[string]bool{}
	for _, ev := range evs {
		if c := ev.GetToolCall(); c != nil {
			if seen[c.GetCallId()] || ids[c.GetCallId()] == "" || !strings.HasPrefix(c.GetCallId(), c.GetMessageId()+".") {
				t.Errorf("tool_call %s (message %s): not a unique runtime id of its message", c.GetCallId(), c.GetMessageId())
			}
			seen[c.GetCallId()] = true
		}
	}
	if len(seen) != 3 {
		t.Errorf("%d distinct calls logged, want 3", len(seen))
	}
}

// TestChatTurnsRebuildBothIDs: in chat mode every turn is a new lease that rebuilds the
// conversation from the log. Both turns' calls are call_1; the rebuilt conversation
// pairs each with its own result, under the model's ids.
func TestChatTurnsRebuildBothIDs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in := servertest.Start(t, nil)
	model := fakemodel.Start(t,
		fakemodel.Turn{Calls: []fakemodel.Call{{ID: "call_1", Name: "issue_refund", Arguments: `{"order_id":42}`}}},
		fakemodel.Turn{Text: "Refunded 42."},
		fakemodel.Turn{Calls: []fakemodel.Call{{ID: "call_1", Name: "issue_refund", Arguments: `{"order_id":43}`}}},
		fakemodel.Turn{Text: "Refunded 43."},
	)
	tool := startTool(t, `{"refunded":true}`)
	r := &Runner{Routes: []Route{{Pattern: "*", BaseURL: model.URL}}, Tools: []*HTTPTool{refundTool(tool.url)}}
	taskID := startTask(t, ctx, in, supportAgent+"auto_pause_on_turn_end: true\n", nil)
	done := startWorker(t, ctx, in, r, 2)
	waitState := func(want agentplanev1.TaskState) {
		for agenttest.Task(t, ctx, in, taskID).GetState() != want {
			if ctx.Err() != nil {
				t.Fatalf("task never %v", want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitState(agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED)
	if _, err := in.Client.Tasks.ContinueTask(ctx, &agentplanev1.ContinueTaskRequest{TaskId: taskID,
		Input: &agentplanev1.ContinueTaskRequest_Message{Message: client.UserText("and order 43")}}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitState(agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED)
	reqs := model.Requests()
	if len(reqs) != 4 || len(tool.Calls()) != 2 {
		t.Fatalf("%d model requests, %d tool runs", len(reqs), len(tool.Calls()))
	}
	if got := shape(t, reqs[3]); got != "system user assistant[call_1] tool:call_1 assistant user assistant[call_1] tool:call_1" {
		t.Errorf("the second turn's lease sent %s", got)
	}
}

// TestCutOffArgumentsNeverReachTheGate: a call whose arguments the token limit cut off
// ({"order_id": 4, finish_reason length) is not gated or run: the model is told, the
// log says why (a note), the metric counts it, and the model's repair runs.
func TestCutOffArgumentsNeverReachTheGate(t *testing.T) {
	model := fakemodel.Start(t,
		fakemodel.Turn{Calls: []fakemodel.Call{{ID: "call_1", Name: "issue_refund", Arguments: `{"order_id": 4`}}, Finish: "length", ArgChunks: 4},
		fakemodel.Turn{Calls: []fakemodel.Call{{ID: "call_2", Name: "issue_refund", Arguments: `{"order_id": 42}`}}},
		fakemodel.Turn{Text: "Refunded 42."},
	)
	tool := startTool(t, `{"refunded":true}`)
	metrics := telemetry.NewMetrics()
	var logs testutil.SyncBuffer
	r := &Runner{Routes: []Route{{Pattern: "*", BaseURL: model.URL}}, Tools: []*HTTPTool{refundTool(tool.url)},
		Telemetry: telemetry.New(metrics, nil), Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	in, taskID, task := runTask(t, r, supportAgent)
	if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("task %v %v", task.GetState(), task.GetFailure())
	}
	if got := tool.Calls(); len(got) != 1 || got[0] != `{"order_id": 42}` {
		t.Errorf("the tool ran with %q", got)
	}
	second := wire(t, model.Requests()[1])
	if last := second[len(second)-1]; last.Role != "tool" || last.ToolCallID != "call_1" || !strings.Contains(last.Content.(string), "cut off") {
		t.Errorf("the model was told %+v", last)
	}
	var gated []string
	var note *agentplanev1.RuntimeNote
	for _, ev := range agenttest.Events(t, context.Background(), in, taskID) {
		if c := ev.GetToolCall(); c != nil {
			gated = append(gated, c.GetArgumentsJson())
		}
		if g := ev.GetToolGated(); g != nil {
			gated = append(gated, "gated:"+g.GetToolName())
		}
		if n := ev.GetNote(); n.GetAttributes()["refused_tool_calls"] != "" {
			note = n
		}
	}
	if strings.Join(gated, " ") != `gated:issue_refund {"order_id": 42}` { // the repaired call only
		t.Errorf("calls that reached the gate: %q", gated)
	}
	if note == nil || note.GetAttributes()["reasons"] != refusedTruncated || !strings.Contains(note.GetText(), "cut off") {
		t.Errorf("note %v", note)
	}
	if got := metricValue(t, metrics, "agentplane_runtime_tool_calls_refused_total", map[string]string{"reason": refusedTruncated}); got != 1 {
		t.Errorf("refused calls counted %v, want 1", got)
	}
	if !strings.Contains(logs.String(), `msg="tool call refused"`) || !strings.Contains(logs.String(), "reason=truncated") {
		t.Errorf("no log line says why:\n%s", logs.String())
	}
}

// TestSchemaMismatchTwiceFails: arguments that do not match the tool's schema are
// refused; the model gets one repair turn, and a second refusal in a row fails the
// task. The tool never runs, and the client's function tool is never handed out.
func TestSchemaMismatchTwiceFails(t *testing.T) {
	model := fakemodel.Start(t,
		fakemodel.Turn{Calls: []fakemodel.Call{{ID: "call_1", Name: "lookup_order", Arguments: `{"order_id": "forty-two"}`}}},
		fakemodel.Turn{Calls: []fakemodel.Call{{ID: "call_1", Name: "lookup_order", Arguments: `[42]`}}},
	)
	_, _, task := runTask(t, &Runner{Routes: []Route{{Pattern: "*", BaseURL: model.URL}}}, clientToolAgent)
	if task.GetState() != agentplanev1.TaskState_TASK_STATE_FAILED || task.GetFailure().GetReason() != ReasonInvalidToolCall {
		t.Fatalf("task %v %v, want FAILED %s", task.GetState(), task.GetFailure(), ReasonInvalidToolCall)
	}
	if msg := task.GetFailure().GetMessage(); !strings.Contains(msg, "not a JSON object") {
		t.Errorf("failure message %q", msg)
	}
	second := wire(t, model.Requests()[1])
	if last := second[len(second)-1]; last.Role != "tool" || !strings.Contains(last.Content.(string), "/order_id") {
		t.Errorf("the model was told %+v", last)
	}
}

// TestCutOffAnswerFails: a final answer cut off at the token limit is not an answer:
// the task fails with runtime.output_truncated instead of completing.
func TestCutOffAnswerFails(t *testing.T) {
	model := fakemodel.Start(t, fakemodel.Turn{Text: "Your refund of order 42 is being proc", Finish: "length"})
	_, _, task := runTask(t, &Runner{Routes: []Route{{Pattern: "*", BaseURL: model.URL}}}, supportAgent)
	if task.GetState() != agentplanev1.TaskState_TASK_STATE_FAILED || task.GetFailure().GetReason() != ReasonOutputTruncated {
		t.Fatalf("task %v %v %v, want FAILED %s", task.GetState(), task.GetFailure(), task.GetOutput(), ReasonOutputTruncated)
	}
}

// TestUsageUnknownIsNotZero: a server that sends no usage leaves the assistant message
// without usage (not zeros), with the runtime's estimate recorded apart, and counts no
// tokens in the metrics.
func TestUsageUnknownIsNotZero(t *testing.T) {
	model := fakemodel.Start(t, fakemodel.Turn{Text: "Hello there, how can I help?", NoUsage: true})
	metrics := telemetry.NewMetrics()
	in, taskID, task := runTask(t, &Runner{Routes: []Route{{Pattern: "*", BaseURL: model.URL}}, Telemetry: telemetry.New(metrics, nil)}, supportAgent)
	if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("task %v %v", task.GetState(), task.GetFailure())
	}
	var msg *agentplanev1.Message
	for _, ev := range agenttest.Events(t, context.Background(), in, taskID) {
		if m := ev.GetMessage(); m.GetRole() == agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT {
			msg = m
		}
	}
	if msg.GetUsage() != nil {
		t.Errorf("usage %v logged for a call whose usage is unknown", msg.GetUsage())
	}
	if in, out, est := Usage(msg); !est || in <= 0 || out != 7 { // 28 bytes of text
		t.Errorf("estimate in %d out %d (estimated %v)", in, out, est)
	}
	if task.GetUsage().GetInputTokens() != 0 {
		t.Errorf("task usage %v", task.GetUsage())
	}
	if got := metricValue(t, metrics, "agentplane_runtime_model_tokens_total", map[string]string{"type": "input"}); got > 0 {
		t.Errorf("%v input tokens counted", got)
	}
}

// TestRetriesLoggedAndCounted: a 429 with Retry-After and a 503 are retried; each retry
// is a log line with the attempt, the status and the wait, and counted by status.
func TestRetriesLoggedAndCounted(t *testing.T) {
	model := fakemodel.Start(t,
		fakemodel.Turn{Status: 429, RetryAfter: 1},
		fakemodel.Turn{Status: 503},
		fakemodel.Turn{Text: "Hello."},
	)
	metrics := telemetry.NewMetrics()
	var logs testutil.SyncBuffer
	r := &Runner{Routes: []Route{{Pattern: "*", BaseURL: model.URL, MaxRetries: 2}}, Telemetry: telemetry.New(metrics, nil),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	_, _, task := runTask(t, r, supportAgent)
	if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("task %v %v", task.GetState(), task.GetFailure())
	}
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `msg="model call failed; retrying"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 || !strings.Contains(lines[0], "attempt=1 status=429 wait=1s") || !strings.Contains(lines[1], "attempt=2 status=503 wait=") {
		t.Errorf("retry log lines:\n%s", strings.Join(lines, "\n"))
	}
	for _, status := range []string{"429", "503"} {
		if got := metricValue(t, metrics, "agentplane_runtime_model_retries_total", map[string]string{"model": "fake-1", "status": status}); got != 1 {
			t.Errorf("retries with status %s counted %v, want 1", status, got)
		}
	}
}
