package server_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
)

// approveBudgetConfig: a tenant-wide budget of 100 tokens a day whose model calls need
// approval at the limit, and a refusing budget of 10 tokens for the static agent bot.
func approveBudgetConfig(t *testing.T, c *config.Config) {
	agent := t.TempDir() + "/bot.yaml"
	if err := os.WriteFile(agent, []byte("apiVersion: qar/v1\nkind: AgentSpec\nname: bot\ninstructions: Be brief.\nmodel: m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.Spec.StaticAgents = map[string]string{"bot": agent}
	c.Budgets.Rules = []config.BudgetRule{
		{Name: "gated", Period: config.PeriodDay, MaxTokens: 100, OnLimit: config.OnLimitApprove},
		{Name: "bot-refuse", AgentID: "bot", Period: config.PeriodDay, MaxTokens: 10, OnLimit: config.OnLimitRefuse},
	}
}

// budgetBackends runs test on bbolt and on PostgreSQL; restart gives a new server on
// the same store.
func budgetBackends(t *testing.T, test func(t *testing.T, start func() *servertest.Instance)) {
	t.Run("bolt", func(t *testing.T) {
		cfg := servertest.Config(t)
		approveBudgetConfig(t, &cfg)
		test(t, func() *servertest.Instance { return servertest.StartConfig(t, cfg) })
	})
	t.Run("postgres", func(t *testing.T) {
		cfg := servertest.Config(t)
		approveBudgetConfig(t, &cfg)
		cfg.Store.Backend = config.BackendPostgres
		cfg.Store.Postgres.DSN = pgtest.DSN(t)
		test(t, func() *servertest.Instance { return servertest.StartConfig(t, cfg) })
	})
}

func startInline(t *testing.T, in *servertest.Instance, agentID string) string {
	t.Helper()
	req := &agentplanev1.StartTaskRequest{Input: client.UserText("hi"),
		Source: &agentplanev1.StartTaskRequest_Document{Document: []byte(`{"apiVersion":"qar/v1","kind":"AgentSpec","instructions":"Be brief.","model":"m"}`)}}
	if agentID != "" {
		req.Source = &agentplanev1.StartTaskRequest_AgentId{AgentId: agentID}
	}
	resp, err := in.Client.Tasks.StartTask(context.Background(), req)
	if err != nil {
		t.Fatalf("StartTask %q: %v", agentID, err)
	}
	return resp.GetTask().GetTaskId()
}

func leaseOne(t *testing.T, in *servertest.Instance, taskID string) (*agentplanev1.Lease, *agentplanev1.LeaseRef) {
	t.Helper()
	resp, err := in.Client.Runtime.LeaseTasks(context.Background(), &agentplanev1.LeaseTasksRequest{RuntimeId: "rt", MaxTasks: 1})
	if err != nil || len(resp.GetLeases()) != 1 || resp.GetLeases()[0].GetTask().GetTaskId() != taskID {
		t.Fatalf("LeaseTasks: %v, %v; want task %s", resp, err, taskID)
	}
	l := resp.GetLeases()[0]
	return l, &agentplanev1.LeaseRef{TaskId: taskID, LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
}

func checkModel(t *testing.T, in *servertest.Instance, ref *agentplanev1.LeaseRef, callID string) *agentplanev1.CheckModelCallResponse {
	t.Helper()
	resp, err := in.Client.Runtime.CheckModelCall(context.Background(), &agentplanev1.CheckModelCallRequest{
		Lease: ref, CallId: callID, AgentName: "agent", Model: "m"})
	if err != nil {
		t.Fatalf("CheckModelCall %s: %v", callID, err)
	}
	return resp
}

func taskState(t *testing.T, in *servertest.Instance, id string) *agentplanev1.Task {
	t.Helper()
	task, err := in.Client.Tasks.GetTask(context.Background(), &agentplanev1.GetTaskRequest{TaskId: id})
	if err != nil {
		t.Fatal(err)
	}
	return task.GetTask()
}

// TestBudgetApproveModelCalls: under a budget with on_limit approve, CheckModelCall
// allows model calls without writing while the budget has room; once it is spent new
// tasks still start (a refusing budget still refuses), and each model call raises a
// MODEL_CALL_APPROVAL interrupt in the inbox, carrying the budget, answered the same
// on a retry. An edit is refused, an approval lets that call run, a rejection fails
// the task naming the budget. A call suspended for its decision survives a restart of
// the control plane and is approved through the next lease. On bbolt and PostgreSQL.
func TestBudgetApproveModelCalls(t *testing.T) {
	budgetBackends(t, func(t *testing.T, start func() *servertest.Instance) {
		ctx := context.Background()
		in := start()
		a := startInline(t, in, "")
		lease, ref := leaseOne(t, in, a)
		if !lease.GetCheckModelCalls() {
			t.Fatal("the lease of a task under an approve budget does not say check_model_calls")
		}
		before := taskState(t, in, a).GetLastSequence()
		if r := checkModel(t, in, ref, "c1"); r.GetOutcome() != agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW || r.GetInterrupt() != nil {
			t.Fatalf("CheckModelCall with budget left = %v; want ALLOW", r)
		}
		if after := taskState(t, in, a).GetLastSequence(); after != before {
			t.Fatalf("an allowed model call wrote to the log (sequence %d -> %d)", before, after)
		}
		// Spend the budget (120 of 100 tokens) and the bot's refusing one.
		msg := client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "ok")
		msg.Model, msg.Usage = "m", &agentplanev1.TokenUsage{InputTokens: 60, OutputTokens: 60, TotalTokens: 120}
		if _, err := in.Client.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref,
			Events: []*agentplanev1.RuntimeEvent{{Payload: &agentplanev1.RuntimeEvent_Message{Message: msg}}}}); err != nil {
			t.Fatal(err)
		}
		// A refusing budget still refuses starts; the approve budget does not.
		bot := startInline(t, in, "bot")
		{
			_, ref := leaseOne(t, in, bot)
			botMsg := client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "ok")
			botMsg.Model, botMsg.Usage = "m", &agentplanev1.TokenUsage{TotalTokens: 10}
			if _, err := in.Client.Runtime.CompleteTask(ctx, &agentplanev1.CompleteTaskRequest{Lease: ref, Output: &agentplanev1.TaskOutput{Message: botMsg}}); err != nil {
				t.Fatal(err)
			}
		}
		_, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{Input: client.UserText("hi"), Source: &agentplanev1.StartTaskRequest_AgentId{AgentId: "bot"}})
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "bot-refuse") {
			t.Fatalf("StartTask of bot over its refusing budget = %v; want RESOURCE_EXHAUSTED naming bot-refuse", err)
		}
		b := startInline(t, in, "") // gated is spent, but approve budgets do not refuse

		r := checkModel(t, in, ref, "c2")
		it := r.GetInterrupt()
		mc := it.GetApproval().GetModelCall()
		if r.GetOutcome() != agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT || it.GetKind() != agentplanev1.InterruptKind_INTERRUPT_KIND_MODEL_CALL_APPROVAL ||
			mc.GetBudget() != "gated" || mc.GetUsed() != "130" || mc.GetLimit() != "100" || mc.GetUnit() != "tokens" || mc.GetResetsAt() == nil ||
			it.GetApproval().GetToolName() != "__model_call__" || !strings.Contains(it.GetApproval().GetArgumentsJson(), `"budget":"gated"`) {
			t.Fatalf("CheckModelCall over the approve budget = %v; want an INTERRUPT of kind MODEL_CALL_APPROVAL carrying gated, 130 of 100 tokens", r)
		}
		if again := checkModel(t, in, ref, "c2"); again.GetInterrupt().GetInterruptId() != it.GetInterruptId() || again.GetOutcome() != agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT {
			t.Fatalf("asking again = %v; want the same interrupt %s", again, it.GetInterruptId())
		}
		if st := taskState(t, in, a).GetState(); st != agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED {
			t.Fatalf("task waiting for a model-call approval is %s", st)
		}
		inbox, err := in.Client.Hitl.ListInterrupts(ctx, &agentplanev1.ListInterruptsRequest{})
		if err != nil || len(inbox.GetInterrupts()) != 1 || inbox.GetInterrupts()[0].GetInterruptId() != it.GetInterruptId() {
			t.Fatalf("inbox = %v, %v; want the model-call approval", inbox, err)
		}
		_, err = in.Client.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{InterruptId: it.GetInterruptId(),
			Decision: &agentplanev1.ResolveInterruptRequest_Edit{Edit: &agentplanev1.EditDecision{ArgumentsJson: `{}`}}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "no arguments to edit") {
			t.Fatalf("edit of a model-call approval = %v; want INVALID_ARGUMENT", err)
		}
		if _, err := in.Client.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{InterruptId: it.GetInterruptId(),
			Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}}}); err != nil {
			t.Fatal(err)
		}
		stream, err := in.Client.Runtime.AwaitDecision(ctx, &agentplanev1.AwaitDecisionRequest{Lease: ref, InterruptId: it.GetInterruptId()})
		if err != nil {
			t.Fatal(err)
		}
		if m, err := stream.Recv(); err != nil || m.GetDecision().GetType() != agentplanev1.DecisionType_DECISION_TYPE_APPROVE {
			t.Fatalf("AwaitDecision = %v, %v; want the approval", m, err)
		}
		if r := checkModel(t, in, ref, "c2"); r.GetOutcome() != agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW {
			t.Fatalf("the approved call asked again = %v; want ALLOW", r)
		}
		if st := taskState(t, in, a).GetState(); st != agentplanev1.TaskState_TASK_STATE_WORKING {
			t.Fatalf("after the approval the task is %s; want WORKING", st)
		}
		// The next call needs its own approval; a rejection ends the task.
		it3 := checkModel(t, in, ref, "c3").GetInterrupt()
		if it3.GetInterruptId() == "" || it3.GetInterruptId() == it.GetInterruptId() {
			t.Fatalf("the next model call raised %v; want a new interrupt", it3)
		}
		if _, err := in.Client.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{InterruptId: it3.GetInterruptId(),
			Decision: &agentplanev1.ResolveInterruptRequest_Reject{Reject: &agentplanev1.RejectDecision{Reason: "enough for today"}}}); err != nil {
			t.Fatal(err)
		}
		ended := taskState(t, in, a)
		if ended.GetState() != agentplanev1.TaskState_TASK_STATE_FAILED || ended.GetFailure().GetReason() != "budget.model_call_rejected" ||
			!strings.Contains(ended.GetFailure().GetMessage(), "budget gated is spent") || !strings.Contains(ended.GetFailure().GetMessage(), "enough for today") {
			t.Fatalf("after the rejection the task is %s, %v; want FAILED budget.model_call_rejected naming gated", ended.GetState(), ended.GetFailure())
		}
		// A runtime that opens its wait only now is handed the rejection, not told of a
		// cancellation.
		late, err := in.Client.Runtime.AwaitDecision(ctx, &agentplanev1.AwaitDecisionRequest{Lease: ref, InterruptId: it3.GetInterruptId()})
		if err != nil {
			t.Fatal(err)
		}
		if m, err := late.Recv(); err != nil || m.GetDecision().GetType() != agentplanev1.DecisionType_DECISION_TYPE_REJECT {
			t.Fatalf("AwaitDecision after the rejection = %v, %v; want the rejection", m, err)
		}
		if _, err := in.Client.Runtime.CheckModelCall(ctx, &agentplanev1.CheckModelCallRequest{Lease: ref, CallId: "c4", AgentName: "agent"}); reasons.Of(err) != agentplanev1.ErrorReason_ERROR_REASON_LEASE_LOST && reasons.Of(err) != agentplanev1.ErrorReason_ERROR_REASON_TASK_TERMINAL {
			t.Fatalf("CheckModelCall after the rejection = %v; want the lease refused", err)
		}

		// Durable: task b suspends on its model call, the control plane restarts, the
		// decision comes, and the next lease asks again and may run it.
		_, refB := leaseOne(t, in, b)
		itB := checkModel(t, in, refB, "b1").GetInterrupt()
		if itB.GetKind() != agentplanev1.InterruptKind_INTERRUPT_KIND_MODEL_CALL_APPROVAL {
			t.Fatalf("task b's model call raised %v", itB)
		}
		if _, err := in.Client.Runtime.SuspendTask(ctx, &agentplanev1.SuspendTaskRequest{Lease: refB}); err != nil {
			t.Fatal(err)
		}
		in.Stop(t)
		in = start()
		if _, err := in.Client.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{InterruptId: itB.GetInterruptId(),
			Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}}}); err != nil {
			t.Fatalf("approving after the restart: %v", err)
		}
		_, refB = leaseOne(t, in, b)
		if r := checkModel(t, in, refB, "b1"); r.GetOutcome() != agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW || r.GetDecision().GetType() != agentplanev1.DecisionType_DECISION_TYPE_APPROVE {
			t.Fatalf("the next lease asking about its approved call = %v; want ALLOW with the approval", r)
		}
	})
}

// TestBudgetApproveDeadlineRejects: a held model call whose interrupt deadline passes
// gets the deployment default, reject, which fails the task like a person's rejection.
func TestBudgetApproveDeadlineRejects(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) {
		approveBudgetConfig(t, c)
		c.HITL.DefaultTimeout = config.Duration(50 * time.Millisecond)
	})
	ctx := context.Background()
	a := startInline(t, in, "")
	_, ref := leaseOne(t, in, a)
	msg := client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "ok")
	msg.Model, msg.Usage = "m", &agentplanev1.TokenUsage{TotalTokens: 120}
	if _, err := in.Client.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref,
		Events: []*agentplanev1.RuntimeEvent{{Payload: &agentplanev1.RuntimeEvent_Message{Message: msg}}}}); err != nil {
		t.Fatal(err)
	}
	it := checkModel(t, in, ref, "c1").GetInterrupt()
	if it.GetDeadline() == nil {
		t.Fatalf("the held call's interrupt has no deadline: %v", it)
	}
	stream, err := in.Client.Runtime.AwaitDecision(ctx, &agentplanev1.AwaitDecisionRequest{Lease: ref, InterruptId: it.GetInterruptId()})
	if err != nil {
		t.Fatal(err)
	}
	var dec *agentplanev1.Decision
	for dec == nil {
		m, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		dec = m.GetDecision()
	}
	if dec.GetType() != agentplanev1.DecisionType_DECISION_TYPE_REJECT || dec.GetSource() != agentplanev1.DecisionSource_DECISION_SOURCE_DEADLINE {
		t.Fatalf("decision = %v; want the deadline's rejection", dec)
	}
	if task := taskState(t, in, a); task.GetState() != agentplanev1.TaskState_TASK_STATE_FAILED || task.GetFailure().GetReason() != "budget.model_call_rejected" ||
		!strings.Contains(task.GetFailure().GetMessage(), "by its deadline") {
		t.Fatalf("task after the deadline = %s, %v", task.GetState(), task.GetFailure())
	}
}
