package main

import (
	"context"
	"testing"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
)

// TestModelCallApprovalSurvivesSIGKILL: a model call held by a spent budget with
// on_limit approve raises its interrupt; the real binary is SIGKILLed before anyone
// decides, and restarted on the same data. The interrupt is still pending in the
// inbox and the task still waits on it; approving it lets that call run (the runtime
// asking again under its lease gets ALLOW, its wait the approval), and a second
// SIGKILL after the decision loses nothing either.
func TestModelCallApprovalSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	configFile := writeConfig(t, `budgets:
  rules:
    - name: gated
      period: day
      max_tokens: 10
      on_limit: approve
`)
	bin := buildBinary(t)
	dataDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitLimit)
	defer cancel()
	proc := startBinary(t, bin, dataDir, configFile)
	dial := func() *client.Client {
		c, err := client.Dial(ctx, proc.addr)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := dial()
	started, err := c.Tasks.StartTask(ctx, startRequest("held"))
	if err != nil {
		t.Fatal(err)
	}
	id := started.GetTask().GetTaskId()
	leases, err := c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt", MaxTasks: 1})
	if err != nil || len(leases.GetLeases()) != 1 || !leases.GetLeases()[0].GetCheckModelCalls() {
		t.Fatalf("LeaseTasks = %v, %v; want one lease that checks model calls", leases, err)
	}
	l := leases.GetLeases()[0]
	ref := &agentplanev1.LeaseRef{TaskId: id, LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
	msg := client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "step")
	msg.Model, msg.Usage = "test-model", &agentplanev1.TokenUsage{TotalTokens: 12}
	if _, err := c.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref,
		Events: []*agentplanev1.RuntimeEvent{{Payload: &agentplanev1.RuntimeEvent_Message{Message: msg}}}}); err != nil {
		t.Fatal(err)
	}
	check := func(c *client.Client) *agentplanev1.CheckModelCallResponse {
		t.Helper()
		resp, err := c.Runtime.CheckModelCall(ctx, &agentplanev1.CheckModelCallRequest{Lease: ref, CallId: "model.agent..1", AgentName: "agent", Model: "test-model"})
		if err != nil {
			t.Fatalf("CheckModelCall: %v", err)
		}
		return resp
	}
	held := check(c).GetInterrupt()
	if held.GetKind() != agentplanev1.InterruptKind_INTERRUPT_KIND_MODEL_CALL_APPROVAL {
		t.Fatalf("the model call over the budget raised %v", held)
	}
	proc.kill(t)
	_ = c.Close()

	proc = startBinary(t, bin, dataDir, configFile)
	c = dial()
	inbox, err := c.Hitl.ListInterrupts(ctx, &agentplanev1.ListInterruptsRequest{})
	if err != nil || len(inbox.GetInterrupts()) != 1 || inbox.GetInterrupts()[0].GetInterruptId() != held.GetInterruptId() ||
		inbox.GetInterrupts()[0].GetApproval().GetModelCall().GetBudget() != "gated" {
		t.Fatalf("inbox after SIGKILL = %v, %v; want the pending model-call approval", inbox, err)
	}
	if again := check(c); again.GetOutcome() != agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT || again.GetInterrupt().GetInterruptId() != held.GetInterruptId() {
		t.Fatalf("asking again after SIGKILL = %v; want the same pending interrupt", again)
	}
	if _, err := c.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{InterruptId: held.GetInterruptId(),
		Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}}}); err != nil {
		t.Fatal(err)
	}
	proc.kill(t)
	_ = c.Close()

	proc = startBinary(t, bin, dataDir, configFile)
	defer proc.stop(t)
	c = dial()
	defer c.Close()
	if r := check(c); r.GetOutcome() != agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW || r.GetDecision().GetType() != agentplanev1.DecisionType_DECISION_TYPE_APPROVE {
		t.Fatalf("asking about the approved call after a second SIGKILL = %v; want ALLOW with the approval", r)
	}
	stream, err := c.Runtime.AwaitDecision(ctx, &agentplanev1.AwaitDecisionRequest{Lease: ref, InterruptId: held.GetInterruptId()})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || m.GetDecision().GetType() != agentplanev1.DecisionType_DECISION_TYPE_APPROVE {
		t.Fatalf("AwaitDecision after the restarts = %v, %v; want the approval", m, err)
	}
	task, err := c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: id})
	if err != nil || task.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_WORKING {
		t.Fatalf("task after the approval = %v, %v; want WORKING under its lease", task.GetTask().GetState(), err)
	}
}
