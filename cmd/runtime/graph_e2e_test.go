package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/runtime/internal/agenttest"
	"github.com/agentplane/agentplane/cmd/runtime/internal/fakemodel"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
)

// TestGraphsAndLimitsEndToEnd runs the runtime binary against a control plane with
// four tasks, each on its own fake model: a graph whose evaluator answers
// needs_revision and then pass (the ledger checked through the API), a graph whose
// token budget runs out, and an agent whose output_schema answer is repaired, and one
// whose repair fails.
func TestGraphsAndLimitsEndToEnd(t *testing.T) {
	bin := buildBinary(t, t.TempDir(), ".", "runtime")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	in := servertest.Start(t, nil)

	call := func(id, name, args string) fakemodel.Turn {
		return fakemodel.Turn{Calls: []fakemodel.Call{{ID: id, Name: name, Arguments: args}}, PromptTokens: 10, CompletionTokens: 5}
	}
	review := fakemodel.Start(t,
		call("c1", "ask__writer", `{"input":"draft the release note"}`),
		fakemodel.Turn{Text: "v1: we shipped things"},
		call("c2", "evaluate__critic", `{"input":"v1: we shipped things"}`),
		call("v1", "verdict", `{"verdict":"needs_revision","confidence":0.5,"rationale":"vague","resolved":[],"raised":["name the features"]}`),
		call("c3", "ask__writer", `{"input":"name the features"}`),
		fakemodel.Turn{Text: "v2: we shipped graphs and budgets"},
		call("c4", "evaluate__critic", `{"input":"v2: we shipped graphs and budgets"}`),
		call("v2", "verdict", `{"verdict":"pass","confidence":0.9,"rationale":null,"resolved":[{"id":"O1","how":"addressed","reason":null}],"raised":[]}`),
		fakemodel.Turn{Text: "v2: we shipped graphs and budgets"},
	)
	budget := fakemodel.Start(t,
		fakemodel.Turn{Calls: []fakemodel.Call{{ID: "b1", Name: "ask__writer", Arguments: `{"input":"write"}`}}, PromptTokens: 900, CompletionTokens: 10},
		fakemodel.Turn{Text: "draft", PromptTokens: 200, CompletionTokens: 10},
	)
	schemaOK := fakemodel.Start(t, fakemodel.Turn{Text: "seven"}, fakemodel.Turn{Text: `{"score": 7}`})
	schemaBad := fakemodel.Start(t, fakemodel.Turn{Text: "seven"}, fakemodel.Turn{Text: `{"score": "seven"}`})

	graph := func(model, limits string) string {
		return fmt.Sprintf(`apiVersion: qar/v1
kind: GraphSpec
agents:
  lead: {role: supervisor, spec: {apiVersion: qar/v1, kind: AgentSpec, instructions: Lead., model: %[1]s}}
  writer: {role: collaborator, spec: {apiVersion: qar/v1, kind: AgentSpec, instructions: Write., model: %[1]s}}
  critic: {role: evaluator, spec: {apiVersion: qar/v1, kind: AgentSpec, instructions: Review., model: %[1]s}}
edges:
  - {from: lead, to: writer, kind: ai_tool}
  - {from: lead, to: critic, kind: evaluate, on_error: {abort: true}}
entry: lead
limits: %[2]s
termination: [{kind: agent_returns, agent: lead}]
`, model, limits)
	}
	scored := func(model string) string {
		return fmt.Sprintf(`apiVersion: qar/v1
kind: AgentSpec
instructions: Score it.
model: %s
output_schema:
  json_schema:
    name: score
    schema: {type: object, properties: {score: {type: integer}}, required: [score], additionalProperties: false}
`, model)
	}
	start := func(doc string) string {
		resp, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
			Source: &agentplanev1.StartTaskRequest_Document{Document: []byte(doc)},
			Format: agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML, Input: client.UserText("go"),
		})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetTask().GetTaskId()
	}
	reviewTask := start(graph("review-1", "{max_steps: 20, per_agent_iterations: 3}"))
	budgetTask := start(graph("budget-1", "{budget: {total_input_tokens: 1000, total_output_tokens: 1000, total_wall_clock_s: 600}}"))
	okTask := start(scored("schema-ok"))
	badTask := start(scored("schema-bad"))

	_, logs := startRuntime(t, bin, writeFile(t, "runtime.yaml", fmt.Sprintf(`control_plane: {address: %q}
concurrency: 4
log_level: warn
models:
  - {match: "review-*", base_url: %q, max_retries: 0}
  - {match: "budget-*", base_url: %q, max_retries: 0}
  - {match: "schema-ok", base_url: %q, max_retries: 0}
  - {match: "schema-bad", base_url: %q, max_retries: 0}
`, in.GRPCAddr, review.URL, budget.URL, schemaOK.URL, schemaBad.URL)), "e2e")

	t.Run("evaluator needs_revision then pass", func(t *testing.T) {
		task := waitTaskState(t, ctx, in, reviewTask, logs, agentplanev1.TaskState_TASK_STATE_COMPLETED, agentplanev1.TaskState_TASK_STATE_FAILED)
		if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || client.MessageText(task.GetOutput().GetMessage()) != "v2: we shipped graphs and budgets" {
			t.Fatalf("task %v %v %v", task.GetState(), task.GetFailure(), task.GetOutput())
		}
		vs, err := in.Client.Tasks.ListVerdicts(ctx, &agentplanev1.ListVerdictsRequest{TaskId: reviewTask})
		if err != nil {
			t.Fatal(err)
		}
		ids := agenttest.ModelCallIDs(agenttest.Events(t, ctx, in, reviewTask))
		var got []string
		for _, v := range vs.GetVerdicts() {
			got = append(got, v.GetNode()+":"+v.GetResult().GetVerdict()+":"+ids[v.GetCallId()])
		}
		if strings.Join(got, ",") != "critic:needs_revision:v1,critic:pass:v2" {
			t.Errorf("verdicts %v", got)
		}
		obs, err := in.Client.Tasks.ListObligations(ctx, &agentplanev1.ListObligationsRequest{TaskId: reviewTask})
		if err != nil {
			t.Fatal(err)
		}
		if o := obs.GetObligations(); len(o) != 1 || o[0].GetText() != "name the features" || o[0].GetState() != agentplanev1.ObligationState_OBLIGATION_STATE_ADDRESSED {
			t.Errorf("obligations %v", o)
		}
		if n := len(review.Requests()); n != 9 {
			t.Errorf("model got %d requests, want 9", n)
		}
	})
	t.Run("budget runs out", func(t *testing.T) {
		task := waitTaskState(t, ctx, in, budgetTask, logs, agentplanev1.TaskState_TASK_STATE_COMPLETED, agentplanev1.TaskState_TASK_STATE_FAILED)
		if f := task.GetFailure(); task.GetState() != agentplanev1.TaskState_TASK_STATE_FAILED || f.GetReason() != "runtime.budget_exhausted" || !strings.Contains(f.GetMessage(), "1100 of 1000") {
			t.Fatalf("task %v %v", task.GetState(), f)
		}
		if n := len(budget.Requests()); n != 2 {
			t.Errorf("model got %d requests, want 2", n)
		}
	})
	t.Run("output_schema repaired", func(t *testing.T) {
		task := waitTaskState(t, ctx, in, okTask, logs, agentplanev1.TaskState_TASK_STATE_COMPLETED, agentplanev1.TaskState_TASK_STATE_FAILED)
		if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || task.GetOutput().GetStructured().GetStructValue().GetFields()["score"].GetNumberValue() != 7 {
			t.Fatalf("task %v %v %v", task.GetState(), task.GetFailure(), task.GetOutput())
		}
		if rf := string(schemaOK.Requests()[0].ResponseFormat); !strings.Contains(rf, `"strict":true`) || !strings.Contains(rf, `"name":"score"`) {
			t.Errorf("response_format %s", rf)
		}
	})
	t.Run("output_schema repair fails", func(t *testing.T) {
		task := waitTaskState(t, ctx, in, badTask, logs, agentplanev1.TaskState_TASK_STATE_COMPLETED, agentplanev1.TaskState_TASK_STATE_FAILED)
		if f := task.GetFailure(); task.GetState() != agentplanev1.TaskState_TASK_STATE_FAILED || f.GetReason() != "runtime.output_schema_mismatch" || !strings.Contains(f.GetMessage(), "/score") {
			t.Fatalf("task %v %v", task.GetState(), f)
		}
		if n := len(schemaBad.Requests()); n != 2 {
			t.Errorf("model got %d requests, want 2 (one repair turn)", n)
		}
	})
}
