package graph

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	"github.com/agentplane/agentplane/cmd/runtime/internal/agent"
	"github.com/agentplane/agentplane/cmd/runtime/internal/agenttest"
	"github.com/agentplane/agentplane/cmd/runtime/internal/fakemodel"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

// writeReview is a lead that asks a writer for drafts and a critic for verdicts.
const writeReview = `apiVersion: qar/v1
kind: GraphSpec
name: write-review
agents:
  lead:
    role: supervisor
    spec: {apiVersion: qar/v1, kind: AgentSpec, instructions: You lead., model: fake-1}
  writer:
    role: collaborator
    spec: {apiVersion: qar/v1, kind: AgentSpec, instructions: You write., model: fake-1}
  critic:
    role: evaluator
    spec: {apiVersion: qar/v1, kind: AgentSpec, instructions: You review., model: fake-1}
edges:
  - {from: lead, to: writer, kind: ai_tool}
  - {from: lead, to: critic, kind: evaluate, on_error: {abort: true}}
entry: lead
limits: {max_steps: 20, per_agent_iterations: 3}
termination: [{kind: agent_returns, agent: lead}]
`

func call(id, name, args string) fakemodel.Turn {
	return fakemodel.Turn{Calls: []fakemodel.Call{{ID: id, Name: name, Arguments: args}}, PromptTokens: 10, CompletionTokens: 5}
}

func text(s string) fakemodel.Turn {
	return fakemodel.Turn{Text: s, PromptTokens: 10, CompletionTokens: 5}
}

const (
	needsRevision = `{"verdict":"needs_revision","confidence":0.6,"rationale":"line 2 is too long","resolved":[],"raised":["shorten line 2"]}`
	passO1        = `{"verdict":"pass","confidence":0.9,"rationale":null,"resolved":[{"id":"O1","how":"addressed","reason":null}],"raised":[]}`
)

// reviewTurns are the model's turns for writeReview: a draft, needs_revision, a
// second draft, pass, the lead's answer.
func reviewTurns() []fakemodel.Turn {
	return []fakemodel.Turn{
		call("c1", "ask__writer", `{"input":"draft a haiku"}`),
		text("draft v1"),
		call("c2", "evaluate__critic", `{"input":"draft v1"}`),
		call("v1", "verdict", needsRevision),
		call("c3", "ask__writer", `{"input":"shorten line 2 of: draft v1"}`),
		text("draft v2"),
		call("c4", "evaluate__critic", `{"input":"draft v2"}`),
		call("v2", "verdict", passO1),
		text("Final: draft v2"),
	}
}

func startWorker(t *testing.T, ctx context.Context, rt agentplanev1.RuntimeServiceClient, r *agent.Runner, id string) (*worker.Worker, chan error) {
	t.Helper()
	r.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := worker.New(rt, &Runner{Agent: r}, worker.Options{RuntimeID: id, PollWait: time.Second, Logger: r.Logger})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return w, done
}

func startTask(t *testing.T, ctx context.Context, in *servertest.Instance, doc, input string) string {
	t.Helper()
	resp, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Document{Document: []byte(doc)},
		Format: agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML, Input: client.UserText(input),
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetTask().GetTaskId()
}

// waitEnd polls until the task is COMPLETED or FAILED.
func waitEnd(t *testing.T, ctx context.Context, in *servertest.Instance, taskID string) *agentplanev1.Task {
	t.Helper()
	for {
		got, err := in.Client.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: taskID})
		if err != nil {
			t.Fatal(err)
		}
		switch got.GetTask().GetState() {
		case agentplanev1.TaskState_TASK_STATE_COMPLETED, agentplanev1.TaskState_TASK_STATE_FAILED:
			return got.GetTask()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("task still %v", got.GetTask().GetState())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func verdicts(t *testing.T, ctx context.Context, in *servertest.Instance, taskID string) []*agentplanev1.Verdict {
	t.Helper()
	resp, err := in.Client.Tasks.ListVerdicts(ctx, &agentplanev1.ListVerdictsRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetVerdicts()
}

// toolCalls counts the tool_call and tool_result events of the task's log by the
// model's call id (the fake model's scripted ids).
func toolCalls(t *testing.T, ctx context.Context, in *servertest.Instance, taskID string) map[string]int {
	t.Helper()
	resp, err := in.Client.Tasks.ListTaskEvents(ctx, &agentplanev1.ListTaskEventsRequest{TaskId: taskID, PageSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	ids := agenttest.ModelCallIDs(resp.GetEvents())
	n := map[string]int{}
	for _, ev := range resp.GetEvents() {
		if c := ev.GetToolCall(); c != nil {
			n[ids[c.GetCallId()]]++
		}
		if r := ev.GetToolResult(); r != nil {
			n[ids[r.GetCallId()]+"/result"]++
		}
	}
	return n
}

// checkLedger checks the ledger after reviewTurns: V1 needs_revision raised O1, V2
// passed and resolved it.
func checkLedger(t *testing.T, ctx context.Context, in *servertest.Instance, taskID string) {
	t.Helper()
	vs := verdicts(t, ctx, in, taskID)
	ids := agenttest.ModelCallIDs(agenttest.Events(t, ctx, in, taskID))
	if len(vs) != 2 {
		t.Fatalf("%d verdicts recorded, want 2: %v", len(vs), vs)
	}
	if v := vs[0]; v.GetNode() != "critic" || v.GetResult().GetVerdict() != "needs_revision" || v.GetApproved() || ids[v.GetCallId()] != "v1" ||
		len(v.GetRaised()) != 1 || v.GetRaised()[0].GetObligationId() != "O1" || v.GetRaised()[0].GetText() != "shorten line 2" {
		t.Errorf("first verdict %v", v)
	}
	if v := vs[1]; v.GetResult().GetVerdict() != "pass" || !v.GetApproved() || ids[v.GetCallId()] != "v2" ||
		len(v.GetResolved()) != 1 || v.GetResolved()[0].GetObligationId() != "O1" {
		t.Errorf("second verdict %v", v)
	}
	obs, err := in.Client.Tasks.ListObligations(ctx, &agentplanev1.ListObligationsRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	if o := obs.GetObligations(); len(o) != 1 || o[0].GetState() != agentplanev1.ObligationState_OBLIGATION_STATE_ADDRESSED || o[0].GetResolvedInVerdictId() != vs[1].GetVerdictId() {
		t.Errorf("obligations %v", o)
	}
}

// TestEvaluatorLoopsUntilPass: the lead asks the writer, the critic answers
// needs_revision with an obligation, the lead has the draft revised, the critic passes
// it and resolves the obligation, and the lead's answer completes the task. The model
// is checked for what each node was offered and told; the ledger through the API.
func TestEvaluatorLoopsUntilPass(t *testing.T) {
	task, reqs, in := runGraph(t, writeReview, reviewTurns()...)
	if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || client.MessageText(task.GetOutput().GetMessage()) != "Final: draft v2" {
		t.Fatalf("task %v %v output %v", task.GetState(), task.GetFailure(), task.GetOutput())
	}
	checkLedger(t, context.Background(), in, task.GetTaskId())
	if len(reqs) != 9 {
		t.Fatalf("model got %d requests, want 9", len(reqs))
	}
	who := func(i int) string { return reqs[i].System() }
	for i, want := range []string{"You lead.", "You write.", "You lead.", "You review.", "You lead.", "You write.", "You lead.", "You review.", "You lead."} {
		if who(i) != want {
			t.Errorf("request %d went to %q, want %q", i, who(i), want)
		}
	}
	if got := reqs[0].ToolNames(); !slices.Equal(got, []string{"ask__writer", "evaluate__critic"}) {
		t.Errorf("lead offered %v", got)
	}
	if got := reqs[1].ToolNames(); len(got) != 0 {
		t.Errorf("writer offered %v", got)
	}
	if got := reqs[3].ToolNames(); !slices.Equal(got, []string{"verdict"}) {
		t.Errorf("critic offered %v", got)
	}
	last := func(i int) string { m := reqs[i].Messages; return string(m[len(m)-1]) }
	if !strings.Contains(last(1), "draft a haiku") {
		t.Errorf("writer was told %s", last(1))
	}
	if !strings.Contains(last(2), `"tool_call_id":"c1"`) || !strings.Contains(last(2), "draft v1") {
		t.Errorf("the writer's answer did not reach the lead: %s", last(2))
	}
	if !strings.Contains(last(4), "needs_revision") || !strings.Contains(last(4), "shorten line 2") || !strings.Contains(last(4), `\"id\":\"O1\"`) {
		t.Errorf("the verdict did not reach the lead: %s", last(4))
	}
	if s := last(7); !strings.Contains(s, "draft v2") || !strings.Contains(s, "O1: shorten line 2") {
		t.Errorf("the critic's second review was not told the open obligation: %s", s)
	}
}

// TestPerAgentIterationsBoundTheLoop: with per_agent_iterations 1 the lead's second
// evaluate call is refused, and the edge's on_error abort fails the task with the
// reason.
func TestPerAgentIterationsBoundTheLoop(t *testing.T) {
	doc := strings.Replace(writeReview, "per_agent_iterations: 3", "per_agent_iterations: 1", 1)
	task, reqs, _ := runGraph(t, doc,
		call("c2", "evaluate__critic", `{"input":"draft v1"}`),
		call("v1", "verdict", needsRevision),
		call("c4", "evaluate__critic", `{"input":"draft v1 again"}`),
	)
	if f := task.GetFailure(); task.GetState() != agentplanev1.TaskState_TASK_STATE_FAILED || f.GetReason() != ReasonIterations || !strings.Contains(f.GetMessage(), "per_agent_iterations") {
		t.Fatalf("task %v %v", task.GetState(), f)
	}
	if n := len(reqs); n != 3 {
		t.Errorf("model got %d requests, want 3 (the critic never ran a second time)", n)
	}
}

// TestBudgetRunsOut: the graph's token budget is spent by the lead and the writer;
// the lead's next model call is refused and the task fails with the reason. A server
// that reports no usage does not make budgets free: the runtime's estimate (about 4
// bytes per token) counts instead, and the log still records the usage as unknown.
func TestBudgetRunsOut(t *testing.T) {
	for _, tc := range []struct {
		name, budget, want string
		turns              []fakemodel.Turn
	}{
		{name: "reported", budget: "total_input_tokens: 100, total_output_tokens: 1000", want: "the input token budget of graph \"write-review\" ran out: 110 of 100", turns: []fakemodel.Turn{
			{Calls: []fakemodel.Call{{ID: "c1", Name: "ask__writer", Arguments: `{"input":"draft"}`}}, PromptTokens: 60, CompletionTokens: 5},
			{Text: "a long draft", PromptTokens: 50, CompletionTokens: 40},
		}},
		{name: "estimated", budget: "total_input_tokens: 100000, total_output_tokens: 20", want: "the output token budget of graph \"write-review\" ran out: 33 of 20", turns: []fakemodel.Turn{
			{Calls: []fakemodel.Call{{ID: "c1", Name: "ask__writer", Arguments: `{"input":"draft"}`}}, NoUsage: true}, // 28 bytes: 7 tokens
			{Text: strings.Repeat("a long draft ", 8), NoUsage: true},                                                 // 104 bytes: 26 tokens
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(writeReview, "limits: {max_steps: 20, per_agent_iterations: 3}",
				"limits: {max_steps: 20, budget: {"+tc.budget+", total_wall_clock_s: 600}}", 1)
			task, reqs, in := runGraph(t, doc, append(tc.turns, text("never asked"))...)
			if f := task.GetFailure(); task.GetState() != agentplanev1.TaskState_TASK_STATE_FAILED || f.GetReason() != ReasonBudget || !strings.Contains(f.GetMessage(), tc.want) {
				t.Fatalf("task %v %v", task.GetState(), f)
			}
			if n := len(reqs); n != 2 {
				t.Errorf("model got %d requests, want 2", n)
			}
			for _, ev := range agenttest.Events(t, context.Background(), in, task.GetTaskId()) {
				if m := ev.GetMessage(); m.GetRole() == agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT && (m.GetUsage() != nil) != (tc.name == "reported") {
					t.Errorf("usage logged as %v", m.GetUsage())
				}
			}
		})
	}
}

// TestGraphOutputSchemaRepair: the graph's output_schema goes to the entry node as a
// strict response format; an answer that does not match gets one repair turn; the
// repaired answer completes the task with structured output; a second miss fails it.
func TestGraphOutputSchemaRepair(t *testing.T) {
	const doc = `apiVersion: qar/v1
kind: GraphSpec
agents:
  lead:
    role: supervisor
    spec: {apiVersion: qar/v1, kind: AgentSpec, instructions: You lead., model: fake-1}
entry: lead
limits: {max_steps: 5}
termination: [{kind: agent_returns, agent: lead}]
output_schema:
  json_schema:
    name: answer
    schema: {type: object, properties: {score: {type: integer}}, required: [score], additionalProperties: false}
`
	for _, tc := range []struct {
		name   string
		second string
		ok     bool
	}{
		{"repaired", `{"score": 7}`, true},
		{"still wrong", `{"score": "seven"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task, reqs, _ := runGraph(t, doc, text("The score is 7."), text(tc.second))
			if len(reqs) != 2 {
				t.Fatalf("model got %d requests, want 2", len(reqs))
			}
			if rf := string(reqs[0].ResponseFormat); !strings.Contains(rf, `"type":"json_schema"`) || !strings.Contains(rf, `"strict":true`) || !strings.Contains(rf, `"name":"answer"`) {
				t.Errorf("response_format %s", rf)
			}
			if m := reqs[1].Messages; !strings.Contains(string(m[len(m)-1]), "does not match") {
				t.Errorf("repair turn: %s", m[len(m)-1])
			}
			if tc.ok {
				if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || task.GetOutput().GetStructured().GetStructValue().GetFields()["score"].GetNumberValue() != 7 {
					t.Fatalf("task %v %v output %v", task.GetState(), task.GetFailure(), task.GetOutput())
				}
				return
			}
			if f := task.GetFailure(); task.GetState() != agentplanev1.TaskState_TASK_STATE_FAILED || f.GetReason() != agent.ReasonOutputSchema || !strings.Contains(f.GetMessage(), "/score") {
				t.Fatalf("task %v %v", task.GetState(), f)
			}
		})
	}
}

// crashAfterVerdict is a runtime client that dies (cancels its worker) right after a
// verdict is recorded, before the verdict call's result is reported.
type crashAfterVerdict struct {
	agentplanev1.RuntimeServiceClient
	crash context.CancelFunc
}

func (c crashAfterVerdict) RecordVerdict(ctx context.Context, req *agentplanev1.RecordVerdictRequest, opts ...grpc.CallOption) (*agentplanev1.RecordVerdictResponse, error) {
	resp, err := c.RuntimeServiceClient.RecordVerdict(ctx, req, opts...)
	if err == nil {
		c.crash()
	}
	return resp, err
}

// TestResumeAfterCrashMidVerdict: the first runtime dies between recording the
// critic's first verdict and reporting its result. The second rebuilds the graph's
// position from the log: it neither asks the critic again nor records the verdict
// twice, answers the open evaluate call with the recorded verdict, and finishes.
func TestResumeAfterCrashMidVerdict(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	in := servertest.Start(t, func(c *config.Config) { c.Tasks.LeaseTTL = config.Duration(2 * time.Second) })
	model := fakemodel.Start(t, reviewTurns()...)
	taskID := startTask(t, ctx, in, writeReview, "write a haiku about tea")
	routes := []agent.Route{{Pattern: "*", BaseURL: model.URL}}

	firstCtx, crash := context.WithCancel(ctx)
	_, firstDone := startWorker(t, firstCtx, crashAfterVerdict{in.Client.Runtime, crash}, &agent.Runner{Routes: routes}, "first")
	<-firstDone
	if n := len(verdicts(t, ctx, in, taskID)); n != 1 {
		t.Fatalf("%d verdicts when the first runtime died, want 1", n)
	}
	if n := toolCalls(t, ctx, in, taskID); n["v1"] != 1 || n["v1/result"] != 0 || n["c2/result"] != 0 {
		t.Fatalf("the first runtime died somewhere else: %v", n)
	}
	asked := len(model.Requests())

	_, done := startWorker(t, ctx, in.Client.Runtime, &agent.Runner{Routes: routes}, "second")
	task := waitEnd(t, ctx, in, taskID)
	cancel()
	<-done
	if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || client.MessageText(task.GetOutput().GetMessage()) != "Final: draft v2" {
		t.Fatalf("task %v %v output %v", task.GetState(), task.GetFailure(), task.GetOutput())
	}
	checkLedger(t, context.Background(), in, taskID)
	reqs := model.Requests()
	if len(reqs) != 9 || asked != 4 {
		t.Fatalf("model got %d requests (%d before the crash), want 9 (4)", len(reqs), asked)
	}
	if got := reqs[4].System(); got != "You lead." {
		t.Errorf("the first request after the crash went to %q, want the lead", got)
	}
	if m := reqs[4].Messages; !strings.Contains(string(m[len(m)-1]), "needs_revision") {
		t.Errorf("the lead was not handed the recorded verdict: %s", m[len(m)-1])
	}
	for id, n := range toolCalls(t, context.Background(), in, taskID) {
		if n != 1 {
			t.Errorf("%s logged %d times", id, n)
		}
	}
}

// TestNodesRepeatCallIDs: a server that numbers calls per response gives every call of
// every node the id call_1. Each gets a runtime id of its own, so the graph runs, and
// a crash between the critic's verdict and its result resumes from the log with each
// node's conversation pairing call_1 with the right result.
func TestNodesRepeatCallIDs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	in := servertest.Start(t, func(c *config.Config) { c.Tasks.LeaseTTL = config.Duration(2 * time.Second) })
	turns := reviewTurns()
	for i := range turns {
		for j := range turns[i].Calls {
			turns[i].Calls[j].ID = "call_1"
		}
	}
	model := fakemodel.Start(t, turns...)
	taskID := startTask(t, ctx, in, writeReview, "write a haiku about tea")
	routes := []agent.Route{{Pattern: "*", BaseURL: model.URL}}

	firstCtx, crash := context.WithCancel(ctx)
	_, firstDone := startWorker(t, firstCtx, crashAfterVerdict{in.Client.Runtime, crash}, &agent.Runner{Routes: routes}, "first")
	for crashed := false; !crashed; {
		select {
		case <-firstDone:
			crashed = true
		case <-time.After(20 * time.Millisecond):
			if task := agenttest.Task(t, ctx, in, taskID); task.GetState() == agentplanev1.TaskState_TASK_STATE_FAILED {
				t.Fatalf("the first runtime failed the task: %v", task.GetFailure())
			}
		}
	}
	_, done := startWorker(t, ctx, in.Client.Runtime, &agent.Runner{Routes: routes}, "second")
	task := waitEnd(t, ctx, in, taskID)
	cancel()
	<-done
	if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || client.MessageText(task.GetOutput().GetMessage()) != "Final: draft v2" {
		t.Fatalf("task %v %v output %v", task.GetState(), task.GetFailure(), task.GetOutput())
	}
	if n := len(verdicts(t, context.Background(), in, taskID)); n != 2 {
		t.Errorf("%d verdicts, want 2", n)
	}
	calls, results := map[string]int{}, map[string]int{}
	for _, ev := range agenttest.Events(t, context.Background(), in, taskID) {
		if c := ev.GetToolCall(); c != nil {
			calls[c.GetCallId()]++
		}
		if r := ev.GetToolResult(); r != nil {
			results[r.GetCallId()]++
		}
	}
	if len(calls) != 6 || len(results) != 6 {
		t.Errorf("%d calls and %d results logged, want 6 each: %v %v", len(calls), len(results), calls, results)
	}
	for id, n := range calls {
		if n != 1 || results[id] != 1 {
			t.Errorf("call %s logged %d times with %d results", id, n, results[id])
		}
	}
	// The lead's last request: its three calls, each call_1, each with its result.
	var shape []string
	for _, raw := range model.Requests()[8].Messages {
		var m struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		}
		_ = json.Unmarshal(raw, &m)
		switch {
		case m.Role == "tool":
			shape = append(shape, "tool:"+m.ToolCallID)
		case len(m.ToolCalls) == 1:
			shape = append(shape, "assistant:"+m.ToolCalls[0].ID)
		default:
			shape = append(shape, m.Role)
		}
	}
	if got := strings.Join(shape, " "); got != "system user"+strings.Repeat(" assistant:call_1 tool:call_1", 4) {
		t.Errorf("the lead's conversation: %s", got)
	}
}
