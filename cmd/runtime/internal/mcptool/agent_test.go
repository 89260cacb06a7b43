package mcptool

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/runtime/internal/agent"
	"github.com/agentplane/agentplane/cmd/runtime/internal/agenttest"
	"github.com/agentplane/agentplane/cmd/runtime/internal/fakemodel"
	"github.com/agentplane/agentplane/cmd/runtime/internal/mcptest"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
)

// TestAgentCallsGatedMCPTools runs the agent runner against a real control plane and
// the Go SDK server: the model sees crm__* functions; the gate and the log see
// crm.<tool>. A CEL policy gates crm.refund, which runs only once approved; crm.lookup
// runs at once; crm.wipe (destructiveHint) is always gated whatever the policy, and a
// rejection keeps it from running; the model reads every result.
func TestAgentCallsGatedMCPTools(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in := servertest.Start(t, nil)
	srv := mcptest.Start(t, func(s *mcptest.Server) { s.Header, s.HeaderValue = "X-Api-Key", "k1" })
	model := fakemodel.Start(t,
		fakemodel.Turn{Text: "Checking.", Calls: []fakemodel.Call{
			{ID: "c1", Name: "crm__lookup", Arguments: `{"order_id":42}`},
			{ID: "c2", Name: "crm__refund", Arguments: `{"order_id":42}`},
		}},
		fakemodel.Turn{Calls: []fakemodel.Call{{ID: "c3", Name: "crm__wipe", Arguments: `{}`}}},
		fakemodel.Turn{Text: "Refunded order 42."},
	)
	r := &agent.Runner{
		Routes:    []agent.Route{{Pattern: "fake-*", BaseURL: model.URL}},
		Providers: []agent.ToolProvider{&Provider{}},
		Logger:    agenttest.Quiet,
	}
	taskID := agenttest.StartTask(t, ctx, in, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Document{Document: []byte(agenttest.AgentDoc)},
		Format: agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML, Input: client.UserText("refund order 42"),
		McpServers: &agentplanev1.McpServerList{Servers: []*agentplanev1.McpServer{{Name: "crm", Url: srv.URL, Headers: map[string]string{"X-Api-Key": "k1"}}}},
		InterruptPolicy: &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Predicate{Predicate: &agentplanev1.PredicatePolicy{
			Expression: `tool_name == "crm.refund" ? ["refunds"] : []`}}},
	})
	done := agenttest.RunWorker(t, ctx, in, r, 1)
	var interrupts []string
	agenttest.Watch(t, ctx, in, taskID, func(resp *agentplanev1.WatchTaskResponse) {
		it := agenttest.Approval(resp)
		if it == nil {
			return
		}
		name := it.GetApproval().GetToolName()
		interrupts = append(interrupts, name)
		if name != "crm.refund" {
			agenttest.Reject(t, ctx, in, it, "never wipe")
			return
		}
		if n := srv.Calls("refund"); n != 0 {
			t.Fatalf("refund ran %d times before it was approved", n)
		}
		agenttest.Approve(t, ctx, in, it)
	})
	if err := <-done; err != nil {
		t.Fatalf("worker: %v", err)
	}
	if task := agenttest.Task(t, ctx, in, taskID); task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("task %v %v", task.GetState(), task.GetFailure())
	}
	if strings.Join(interrupts, ",") != "crm.refund,crm.wipe" {
		t.Errorf("approvals asked for %q, want crm.refund then crm.wipe", interrupts)
	}
	if srv.Calls("lookup") != 1 || srv.Calls("refund") != 1 || srv.Calls("wipe") != 0 {
		t.Errorf("server-side calls: lookup %d, refund %d, wipe %d; want 1, 1, 0", srv.Calls("lookup"), srv.Calls("refund"), srv.Calls("wipe"))
	}

	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("model got %d requests, want 3", len(reqs))
	}
	offered := map[string]bool{}
	for _, tl := range reqs[0].Tools {
		offered[tl.Function.Name] = true
	}
	for _, name := range []string{"crm__lookup", "crm__refund", "crm__wipe", "crm__stats_v2"} {
		if !offered[name] {
			t.Errorf("the model was not offered %s (offered %v)", name, offered)
		}
	}
	second := reqs[1].Messages
	if !strings.Contains(string(second[len(second)-2]), "order 42: shipped") || !strings.Contains(string(second[len(second)-1]), "refunded order 42") {
		t.Errorf("the model did not read the MCP results: %s", second)
	}
	third := reqs[2].Messages
	if !strings.Contains(string(third[len(third)-1]), "never wipe") {
		t.Errorf("the model did not read the rejection: %s", third[len(third)-1])
	}

	// The log names the tools as the gate does, and says why wipe was gated.
	calls, results := map[string]string{}, 0
	var wipeReason string
	evs := agenttest.Events(t, ctx, in, taskID)
	ids := agenttest.ModelCallIDs(evs)
	for _, ev := range evs {
		switch {
		case ev.GetToolCall() != nil:
			calls[ids[ev.GetToolCall().GetCallId()]] = ev.GetToolCall().GetToolName()
		case ev.GetToolResult() != nil:
			results++
		case ev.GetToolGated() != nil && ev.GetToolGated().GetToolName() == "crm.wipe":
			wipeReason = ev.GetToolGated().GetReason()
		}
	}
	if calls["c1"] != "crm.lookup" || calls["c2"] != "crm.refund" || calls["c3"] != "crm.wipe" {
		t.Errorf("tool_call events: %v", calls)
	}
	if results != 3 {
		t.Errorf("%d tool results logged, want 3", results)
	}
	if wipeReason != "mcp.destructive_hint" {
		t.Errorf("wipe gated for %q, want mcp.destructive_hint", wipeReason)
	}
}
