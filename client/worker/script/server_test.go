package script

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

// TestApprovalExampleAgainstTheServer plays examples/runtime/approval.yaml against the
// real control plane: an interactive approval, a durable suspension resumed by the
// server with its decision, and a chat pause continued by ContinueTask. The reviewer
// acts on the task's own log.
func TestApprovalExampleAgainstTheServer(t *testing.T) {
	in := servertest.Start(t, nil)
	playApprovalExample(t, in.Client, in.Client, in.Client)
}

// TestApprovalExampleMultiTenant plays the same example on a multi-tenant deployment
// where user, approver and runtime are separate principals and the runtime serves every
// tenant ("*"): the runtime resumes the durably suspended task by reading its history
// under its lease (RuntimeService.ReadTaskHistory), since runtimes may not call
// WatchTask.
func TestApprovalExampleMultiTenant(t *testing.T) {
	_, dial := multiTenant(t, principal{"alice", "acme", auth.RoleUser}, principal{"bob", "acme", auth.RoleApprover}, principal{"fleet", auth.AllTenants, auth.RoleRuntime})
	playApprovalExample(t, dial("alice"), dial("bob"), dial("fleet"))
}

// principal is a token multiTenant issues.
type principal struct {
	name, tenant string
	role         auth.Role
}

// multiTenant starts a server that requires a principal, with one token per
// principal, and returns it with a function dialing it as one of them by name.
func multiTenant(t *testing.T, ps ...principal) (*servertest.Instance, func(name string) *client.Client) {
	t.Helper()
	var tokens []config.Token
	secrets := map[string]string{}
	for _, p := range ps {
		tok, hash, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, config.Token{Name: p.name, SHA256: hash, Tenant: p.tenant, Roles: []string{string(p.role)}})
		secrets[p.name] = tok
	}
	in := servertest.Start(t, func(c *config.Config) {
		c.Auth.RequirePrincipal = true
		c.Auth.Tokens = tokens
	})
	return in, func(name string) *client.Client {
		c, err := client.Dial(context.Background(), in.GRPCAddr, client.WithToken(secrets[name]))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
}

// playApprovalExample starts the approval example as user, plays it on a scripted
// runtime connected as runtime, and approves and continues it as approver and user.
func playApprovalExample(t *testing.T, c, approver, runtime *client.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	doc, err := os.ReadFile(filepath.Join(examples, "approval.agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	policyYAML, err := os.ReadFile(filepath.Join(examples, "approval.policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	policyJSON, err := yaml.YAMLToJSON(policyYAML)
	if err != nil {
		t.Fatal(err)
	}
	policy := &agentplanev1.InterruptPolicy{}
	if err := protojson.Unmarshal(policyJSON, policy); err != nil {
		t.Fatal(err)
	}
	started, err := c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Document{Document: doc}, Format: agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML, Input: client.UserText("refund order 42"), InterruptPolicy: policy,
	})
	if err != nil {
		t.Fatal(err)
	}
	taskID := started.GetTask().GetTaskId()

	sc, err := Load(filepath.Join(examples, "approval.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	progress := &testutil.SyncBuffer{}
	w, err := worker.New(runtime.Runtime, &Runner{Script: sc, Progress: progress}, worker.Options{
		RuntimeID: "script-e2e", MaxTasks: 3, PollWait: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(ctx) }()

	// The reviewer: approve every gated call, answer the chat pause, until the task ends.
	stream, err := c.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	var approved []string
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("watch: %v\nprogress:\n%s", err, progress)
		}
		it := resp.GetEvent().GetInterruptRaised().GetInterrupt()
		switch it.GetKind() {
		case agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL:
			if _, err := approver.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{
				InterruptId: it.GetInterruptId(), ArgsDigest: it.GetArgsDigest(),
				Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}},
			}); err != nil {
				t.Fatalf("approve %s: %v", it.GetApproval().GetToolName(), err)
			}
			approved = append(approved, it.GetApproval().GetToolName())
		case agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE:
			if _, err := c.Tasks.ContinueTask(ctx, &agentplanev1.ContinueTaskRequest{TaskId: taskID, Input: &agentplanev1.ContinueTaskRequest_Message{Message: client.UserText("thanks!")}}); err != nil {
				t.Fatalf("continue: %v", err)
			}
		}
	}
	got, err := c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	task := got.GetTask()
	if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || client.MessageText(task.GetOutput().GetMessage()) != "Refunded order 42." {
		t.Fatalf("task %v %v %v\nprogress:\n%s", task.GetState(), task.GetFailure(), task.GetOutput(), progress)
	}
	if err := <-runDone; err != nil {
		t.Fatalf("worker: %v", err)
	}
	if strings.Join(approved, ",") != "send_email,issue_refund" {
		t.Errorf("approved %v", approved)
	}
	if task.GetAttempt() != 3 {
		t.Errorf("attempt %d, want 3 leases (first run, after the durable decision, after continue)", task.GetAttempt())
	}
	if !strings.Contains(progress.String(), `say "You said: thanks!"`) {
		t.Errorf("the continue message did not reach the script:\n%s", progress)
	}
}

// TestReviewExampleAgainstTheServer plays examples/runtime/review.yaml for the graph in
// examples/graphs/write-review.yaml, whose critic is an evaluator: the server keeps
// the ledger and the second verdict resolves the obligation the first raised.
func TestReviewExampleAgainstTheServer(t *testing.T) {
	in := servertest.Start(t, nil)
	playReviewExample(t, in.Client, in.Client)
}

// TestReviewExampleMultiTenant plays the review example on a multi-tenant deployment
// whose runtime serves every tenant ("*"): the second verdict resolves an obligation
// named by its text, which the runtime finds in the task's history under its lease,
// since runtimes may not call ListObligations.
func TestReviewExampleMultiTenant(t *testing.T) {
	_, dial := multiTenant(t, principal{"alice", "acme", auth.RoleUser}, principal{"fleet", auth.AllTenants, auth.RoleRuntime})
	playReviewExample(t, dial("alice"), dial("fleet"))
}

// playReviewExample starts the write-review graph as user, plays review.yaml on a
// scripted runtime connected as runtime, and checks the verdicts and the ledger.
func playReviewExample(t *testing.T, c, runtime *client.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	graph, err := os.ReadFile("../../../examples/graphs/write-review.yaml")
	if err != nil {
		t.Fatal(err)
	}
	started, err := c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{Source: &agentplanev1.StartTaskRequest_Document{Document: graph}, Input: client.UserText("write the upgrade guide")})
	if err != nil {
		t.Fatal(err)
	}
	taskID := started.GetTask().GetTaskId()
	sc, err := Load(filepath.Join(examples, "review.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	progress := &testutil.SyncBuffer{}
	w, err := worker.New(runtime.Runtime, &Runner{Script: sc, Progress: progress}, worker.Options{
		RuntimeID: "script-e2e", MaxTasks: 1, PollWait: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("task %v %v\nprogress:\n%s", got.GetTask().GetState(), got.GetTask().GetFailure(), progress)
	}
	verdicts, err := c.Tasks.ListVerdicts(ctx, &agentplanev1.ListVerdictsRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	v := verdicts.GetVerdicts()
	if len(v) != 2 || v[0].GetApproved() || len(v[0].GetRaised()) != 1 || !v[1].GetApproved() || len(v[1].GetResolved()) != 1 || len(v[1].GetDroppedObligationIds()) != 0 {
		t.Fatalf("verdicts %v", v)
	}
	ledger, err := c.Tasks.ListObligations(ctx, &agentplanev1.ListObligationsRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	if o := ledger.GetObligations(); len(o) != 1 || o[0].GetState() != agentplanev1.ObligationState_OBLIGATION_STATE_ADDRESSED ||
		o[0].GetObligationId() != v[0].GetRaised()[0].GetObligationId() {
		t.Fatalf("ledger %v", o)
	}
}

// TestResumeDoesNotRunAToolTwice: a runtime ran a tool call and reported it, then lost
// its lease before the next checkpoint. The next lease replays from the checkpoint but
// must not run (or report) that call again: the server would refuse the report
// (TOOL_CALL_NOT_APPROVED), since a decision is spent by the report of its call.
func TestResumeDoesNotRunAToolTwice(t *testing.T) {
	in := servertest.Start(t, nil)
	c := in.Client
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "agents", "support-chat.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	started, err := c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{Source: &agentplanev1.StartTaskRequest_Document{Document: doc}, Input: client.UserText("weather?")})
	if err != nil {
		t.Fatal(err)
	}
	taskID := started.GetTask().GetTaskId()

	// A first runtime plays hello.yaml by hand up to its tool call (step 2), then
	// hands the task back as if it had crashed.
	leases, err := c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "first", Wait: nil})
	if err != nil || len(leases.GetLeases()) != 1 {
		t.Fatalf("lease: %v %v", leases, err)
	}
	l := leases.GetLeases()[0]
	ref := &agentplanev1.LeaseRef{TaskId: taskID, LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
	args := `{"city": "Paris"}`
	gate, err := c.Runtime.CheckToolCall(ctx, &agentplanev1.CheckToolCallRequest{Lease: ref, CallId: "step-2", ToolName: "get_weather", ArgumentsJson: args, AgentName: "support"})
	if err != nil || gate.GetOutcome() != agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW {
		t.Fatalf("check: %v %v", gate, err)
	}
	if _, err := c.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref, Events: []*agentplanev1.RuntimeEvent{
		{Payload: &agentplanev1.RuntimeEvent_ToolCall{ToolCall: &agentplanev1.ToolCall{CallId: "step-2", ToolName: "get_weather", ArgumentsJson: args}}},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Runtime.FailTask(ctx, &agentplanev1.FailTaskRequest{Lease: ref, Reason: "runtime.crashed", Retry: true}); err != nil {
		t.Fatal(err)
	}

	// The scripted runtime takes the next lease and plays the script from the start.
	sc, err := Load(filepath.Join(examples, "hello.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	progress := &testutil.SyncBuffer{}
	w, err := worker.New(c.Runtime, &Runner{Script: sc, Progress: progress}, worker.Options{
		RuntimeID: "second", MaxTasks: 1, PollWait: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("task %v %v\nprogress:\n%s", got.GetTask().GetState(), got.GetTask().GetFailure(), progress)
	}
	if !strings.Contains(progress.String(), "tool get_weather already ran under an earlier lease") {
		t.Fatalf("the replay did not skip the call:\n%s", progress)
	}
	// The log holds the call once, and its result once (reported by the second lease).
	stream, err := c.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	calls, results := 0, 0
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetEvent().GetToolCall() != nil {
			calls++
		}
		if resp.GetEvent().GetToolResult() != nil {
			results++
		}
	}
	if calls != 1 || results != 1 {
		t.Fatalf("tool calls %d, results %d; want 1 and 1", calls, results)
	}
}
