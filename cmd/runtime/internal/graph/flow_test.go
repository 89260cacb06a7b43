package graph

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/runtime/internal/agent"
	"github.com/agentplane/agentplane/cmd/runtime/internal/fakemodel"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
)

// runGraph starts doc with a fresh control plane and model, runs it to its end and
// returns the task, the model's requests and the instance.
func runGraph(t *testing.T, doc string, turns ...fakemodel.Turn) (*agentplanev1.Task, []fakemodel.Request, *servertest.Instance) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in := servertest.Start(t, nil)
	model := fakemodel.Start(t, turns...)
	taskID := startTask(t, ctx, in, doc, "go")
	_, done := startWorker(t, ctx, in.Client.Runtime, &agent.Runner{Routes: []agent.Route{{Pattern: "*", BaseURL: model.URL}}}, "graph-test")
	task := waitEnd(t, ctx, in, taskID)
	cancel()
	<-done
	return task, model.Requests(), in
}

func node(role, instructions string) string {
	return `{role: ` + role + `, spec: {apiVersion: qar/v1, kind: AgentSpec, instructions: ` + instructions + `, model: fake-1}}`
}

// leadAndWriter is a graph where the lead may ask the writer, ending with tail
// (limits, termination).
func leadAndWriter(tail string) string {
	return `apiVersion: qar/v1
kind: GraphSpec
agents:
  lead: ` + node("supervisor", "You lead.") + `
  writer: ` + node("collaborator", "You write.") + `
edges:
  - {from: lead, to: writer, kind: ai_tool}
entry: lead
` + tail + "\n"
}

func lastMessage(r fakemodel.Request) string { return string(r.Messages[len(r.Messages)-1]) }

// TestOnErrorRoutesToRecovery: the writer's model call fails for good; the edge's
// on_error routes to the fixer, whose answer is the lead's tool result.
func TestOnErrorRoutesToRecovery(t *testing.T) {
	doc := `apiVersion: qar/v1
kind: GraphSpec
agents:
  lead: ` + node("supervisor", "You lead.") + `
  writer: ` + node("collaborator", "You write.") + `
  fixer: ` + node("collaborator", "You fix.") + `
edges:
  - {from: lead, to: writer, kind: handoff, on_error: {route_to: fixer}}
entry: lead
termination: [{kind: agent_returns, agent: lead}]
`
	task, reqs, in := runGraph(t, doc,
		call("c1", "handoff__writer", `{"input":"write it"}`),
		fakemodel.Turn{Status: 400},
		text("fixed draft"),
		text("done: fixed draft"),
	)
	if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || client.MessageText(task.GetOutput().GetMessage()) != "done: fixed draft" {
		t.Fatalf("task %v %v %v", task.GetState(), task.GetFailure(), task.GetOutput())
	}
	if len(reqs) != 4 || reqs[2].System() != "You fix." || !strings.Contains(lastMessage(reqs[2]), "runtime.model_error") {
		t.Fatalf("requests: %d; fixer told %s", len(reqs), lastMessage(reqs[2]))
	}
	if s := lastMessage(reqs[1]); !strings.Contains(s, "go") || !strings.Contains(s, "lead handed this task over to you: write it") {
		t.Errorf("handoff input %s", s)
	}
	if s := lastMessage(reqs[3]); !strings.Contains(s, `"tool_call_id":"c1"`) || !strings.Contains(s, "fixed draft") {
		t.Errorf("the lead got %s", s)
	}
	n := toolCalls(t, context.Background(), in, task.GetTaskId())
	if n["c1"] != 1 || n["c1/result"] != 1 {
		t.Errorf("log %v", n)
	}
}

// TestAgentReturnsEndsTheGraph: the writer is named by agent_returns, so its answer
// ends the graph; the lead's open call to it is closed before the task completes.
func TestAgentReturnsEndsTheGraph(t *testing.T) {
	doc := leadAndWriter("termination: [{kind: agent_returns, agent: writer}]")
	task, reqs, in := runGraph(t, doc, call("c1", "ask__writer", `{"input":"write"}`), text("the final text"))
	if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || client.MessageText(task.GetOutput().GetMessage()) != "the final text" {
		t.Fatalf("task %v %v %v", task.GetState(), task.GetFailure(), task.GetOutput())
	}
	if len(reqs) != 2 {
		t.Errorf("model got %d requests, want 2", len(reqs))
	}
	if n := toolCalls(t, context.Background(), in, task.GetTaskId()); n["c1/result"] != 1 {
		t.Errorf("the open call was not closed: %v", n)
	}
}

// TestMaxStepsReachedTerminates: max_steps 2 with max_steps_reached ends the graph
// with its last answer instead of failing; without it the task fails runtime.max_steps.
func TestMaxStepsReachedTerminates(t *testing.T) {
	doc := leadAndWriter("limits: {max_steps: 2}\ntermination: [{kind: agent_returns, agent: lead}, {kind: max_steps_reached}]")
	turns := []fakemodel.Turn{call("c1", "ask__writer", `{"input":"write"}`), text("a draft"), text("never asked")}
	task, reqs, _ := runGraph(t, doc, turns...)
	if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || client.MessageText(task.GetOutput().GetMessage()) != "a draft" || len(reqs) != 2 {
		t.Fatalf("task %v %v %v after %d requests", task.GetState(), task.GetFailure(), task.GetOutput(), len(reqs))
	}
	task, _, _ = runGraph(t, strings.Replace(doc, ", {kind: max_steps_reached}", "", 1), turns...)
	if f := task.GetFailure(); task.GetState() != agentplanev1.TaskState_TASK_STATE_FAILED || f.GetReason() != ReasonMaxSteps {
		t.Fatalf("task %v %v", task.GetState(), f)
	}
}

// TestNestedGraphAllocation: an allocation over what the outer graph has left is
// refused with D13-R3 and told to the supervisor; one that fits runs the nested
// graph, whose entry's answer is the result.
func TestNestedGraphAllocation(t *testing.T) {
	doc := `apiVersion: qar/v1
kind: GraphSpec
agents:
  lead: ` + node("supervisor", "You lead.") + `
  research:
    role: collaborator
    spec:
      apiVersion: qar/v1
      kind: GraphSpec
      agents:
        planner: ` + node("supervisor", "You plan.") + `
      entry: planner
      limits: {max_steps: 5}
      termination: [{kind: agent_returns, agent: planner}]
edges:
  - {from: lead, to: research, kind: ai_tool}
entry: lead
limits: {max_steps: 10, max_depth: 2}
termination: [{kind: agent_returns, agent: lead}]
`
	task, reqs, _ := runGraph(t, doc,
		call("c1", "ask__research", `{"input":"find sources","allocation":{"input_tokens":null,"output_tokens":null,"wall_clock_s":null,"max_steps":50}}`),
		call("c2", "ask__research", `{"input":"find sources","allocation":{"input_tokens":null,"output_tokens":null,"wall_clock_s":null,"max_steps":3}}`),
		text("three sources"),
		text("answer with three sources"),
	)
	if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || client.MessageText(task.GetOutput().GetMessage()) != "answer with three sources" {
		t.Fatalf("task %v %v %v", task.GetState(), task.GetFailure(), task.GetOutput())
	}
	if len(reqs) != 4 {
		t.Fatalf("model got %d requests, want 4", len(reqs))
	}
	if s := lastMessage(reqs[1]); !strings.Contains(s, "D13-R3") || !strings.Contains(s, "/allocation/max_steps") {
		t.Errorf("the over-budget allocation was not refused to the lead: %s", s)
	}
	if reqs[2].System() != "You plan." || !strings.Contains(lastMessage(reqs[2]), "find sources") {
		t.Errorf("the nested graph's entry got %q / %s", reqs[2].System(), lastMessage(reqs[2]))
	}
	var params map[string]any
	for _, tl := range reqs[0].Tools {
		if tl.Function.Name == "ask__research" {
			params = tl.Function.Parameters
		}
	}
	if props, _ := params["properties"].(map[string]any); props["allocation"] == nil {
		t.Errorf("the nested graph's edge tool offers no allocation: %v", params)
	}
}
