package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
	"github.com/agentplane/agentplane/server/webhooks"
	"github.com/agentplane/agentplane/server/webhooks/webhookstest"
)

// budgetConfig: one budget of 100 tokens a day, warning at 50%, and a webhook
// endpoint for budget.warning.
func budgetConfig(recv *webhookstest.Receiver, secret string) func(*config.Config) {
	return func(c *config.Config) {
		c.Budgets.Rules = []config.BudgetRule{{Name: "daily", Period: config.PeriodDay, MaxTokens: 100, WarnPercent: 50}}
		n := &c.Notifications
		n.AllowPrivateDestinations = true
		n.PollInterval = config.Duration(10 * time.Millisecond)
		n.Webhooks = []config.Webhook{{Name: "ops", URL: recv.URL, Secret: secret, Events: []string{config.EventBudgetWarning}}}
	}
}

// runWithUsage starts an inline task through in, leases it through rt and reports
// one assistant message that used tokens, then completes it.
func runWithUsage(t *testing.T, in, rt *servertest.Instance, tokens int32) *agentplanev1.Task {
	t.Helper()
	ctx := context.Background()
	doc := []byte(`{"apiVersion":"qar/v1","kind":"AgentSpec","instructions":"Be brief.","model":"m"}`)
	started, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Document{Document: doc}, Input: client.UserText("hi")})
	if err != nil {
		t.Fatalf("StartTask: %v", err)
	}
	resp, err := rt.Client.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt", MaxTasks: 1})
	if err != nil || len(resp.GetLeases()) != 1 || resp.GetLeases()[0].GetTask().GetTaskId() != started.GetTask().GetTaskId() {
		t.Fatalf("LeaseTasks: %v, %v", resp, err)
	}
	l := resp.GetLeases()[0]
	ref := &agentplanev1.LeaseRef{TaskId: l.GetTask().GetTaskId(), LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
	msg := &agentplanev1.Message{Role: agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, Model: "m",
		Parts: []*agentplanev1.Part{{Kind: &agentplanev1.Part_Text{Text: "ok"}}},
		Usage: &agentplanev1.TokenUsage{InputTokens: tokens / 2, OutputTokens: tokens - tokens/2, TotalTokens: tokens}}
	if _, err := rt.Client.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref,
		Events: []*agentplanev1.RuntimeEvent{{Payload: &agentplanev1.RuntimeEvent_Message{Message: msg}}}}); err != nil {
		t.Fatalf("ReportEvents: %v", err)
	}
	done, err := rt.Client.Runtime.CompleteTask(ctx, &agentplanev1.CompleteTaskRequest{Lease: ref})
	if err != nil {
		t.Fatalf("CompleteTask: %v", err)
	}
	return done.GetTask()
}

// wantBudgetRefusal checks that StartTask through in is refused with BUDGET_EXCEEDED
// and the budget's metadata, over the wire.
func wantBudgetRefusal(t *testing.T, in *servertest.Instance, used string) {
	t.Helper()
	doc := []byte(`{"apiVersion":"qar/v1","kind":"AgentSpec","instructions":"Be brief.","model":"m"}`)
	tomorrow := func() string {
		return time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour).Format(time.RFC3339)
	}
	before := tomorrow()
	_, err := in.Client.Tasks.StartTask(context.Background(), &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Document{Document: doc}, Input: client.UserText("hi")})
	after := tomorrow() // the call may straddle midnight UTC
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("StartTask over budget = %v; want RESOURCE_EXHAUSTED", err)
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
		if _, ok := d.(*errdetails.RetryInfo); ok {
			t.Errorf("BUDGET_EXCEEDED carries RetryInfo; it is not retryable unchanged")
		}
	}
	md := info.GetMetadata()
	if info.GetReason() != "BUDGET_EXCEEDED" || info.GetDomain() != "agentplane.dev" || md["budget"] != "daily" || md["period"] != "day" ||
		md["unit"] != "tokens" || md["used"] != used || md["limit"] != "100" || (md["resets_at"] != before && md["resets_at"] != after) {
		t.Fatalf("ErrorInfo = %v; want BUDGET_EXCEEDED of daily, %s of 100 tokens, resets %s", info, used, after)
	}
}

// budgetOf is the "daily" budget as GetStats shows it.
func budgetOf(t *testing.T, in *servertest.Instance) *agentplanev1.BudgetStatus {
	t.Helper()
	stats, err := in.Client.Admin.GetStats(context.Background(), &agentplanev1.GetStatsRequest{})
	if err != nil || len(stats.GetBudgets()) != 1 {
		t.Fatalf("GetStats budgets = %v, %v", stats.GetBudgets(), err)
	}
	caps, err := in.Client.Capabilities.GetCapabilities(context.Background(), &agentplanev1.GetCapabilitiesRequest{})
	if err != nil || len(caps.GetBudgets()) != 1 || caps.GetBudgets()[0].GetUsedTokens() != stats.GetBudgets()[0].GetUsedTokens() {
		t.Fatalf("GetCapabilities budgets = %v, %v; GetStats %v", caps.GetBudgets(), err, stats.GetBudgets())
	}
	return stats.GetBudgets()[0]
}

// waitBudgetWarnings waits for the outbox to deliver one budget.warning and checks
// that it is the only one.
func waitBudgetWarnings(t *testing.T, recv *webhookstest.Receiver, in *servertest.Instance, warnedTask string) {
	t.Helper()
	recv.WaitFor(t, testutil.WaitLimit, "the budget warning", func(ds []webhookstest.Delivery) bool { return len(ds) >= 1 })
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for pendingWebhooks(t, in) != "0" {
			time.Sleep(10 * time.Millisecond)
		}
	}()
	testutil.Within(t, drained, "the outbox drained")
	ds := recv.Deliveries()
	if len(ds) != 1 {
		t.Fatalf("%d budget.warning deliveries; want 1", len(ds))
	}
	var m webhooks.Message
	if err := json.Unmarshal(ds[0].Body, &m); err != nil {
		t.Fatal(err)
	}
	if m.Type != config.EventBudgetWarning || m.Data.TaskID != warnedTask || m.Data.Budget == nil || m.Data.Budget.Name != "daily" ||
		m.Data.Budget.UsedTokens != 60 || m.Data.Budget.LimitTokens != 100 || m.Data.Budget.WarnPercent != 50 {
		t.Fatalf("budget.warning = %+v, budget %+v", m, m.Data.Budget)
	}
}

// warnings counts the BudgetWarning events of an ended task, watching its log.
func warnings(t *testing.T, in *servertest.Instance, taskID string) int {
	t.Helper()
	n := 0
	stream, err := in.Client.Tasks.WatchTask(context.Background(), &agentplanev1.WatchTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev := resp.GetEvent(); ev != nil {
			if ev.GetBudgetWarning() != nil {
				n++
			}
			if sc := ev.GetStateChanged(); sc != nil && sc.GetToState() == agentplanev1.TaskState_TASK_STATE_COMPLETED {
				return n
			}
		}
	}
}

// TestBudgetBolt: over the API on bbolt, usage reported by a runtime is counted; the
// task that took the budget to 50% logs the warning and the webhook is delivered
// once; at the limit StartTask is refused with BUDGET_EXCEEDED and its metadata; the
// count survives a restart of the control plane on the same file.
func TestBudgetBolt(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8G"
	recv := webhookstest.New(t, secret)
	cfg := servertest.Config(t)
	budgetConfig(recv, secret)(&cfg)
	in := servertest.StartConfig(t, cfg)

	first := runWithUsage(t, in, in, 60)
	second := runWithUsage(t, in, in, 50)
	if w1, w2 := warnings(t, in, first.GetTaskId()), warnings(t, in, second.GetTaskId()); w1 != 1 || w2 != 0 {
		t.Fatalf("BudgetWarning events: %d in the task that crossed 50%%, %d in the next; want 1 and 0", w1, w2)
	}
	waitBudgetWarnings(t, recv, in, first.GetTaskId())
	wantBudgetRefusal(t, in, "110")
	if b := budgetOf(t, in); b.GetUsedTokens() != 110 || !b.GetWarned() || !b.GetExceeded() {
		t.Fatalf("budget = %v", b)
	}

	metrics := scrape(t, in)
	for _, want := range []string{`agentplane_budget_used_tokens{budget="daily",tenant="default"} 110`, `agentplane_budget_limit_tokens{budget="daily"} 100`,
		`agentplane_budget_exceeded_tenants{budget="daily"} 1`, `agentplane_budget_warned_tenants{budget="daily"} 1`} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	in.Stop(t)
	in = servertest.StartConfig(t, cfg)
	wantBudgetRefusal(t, in, "110")
	if b := budgetOf(t, in); b.GetUsedTokens() != 110 || !b.GetWarned() {
		t.Fatalf("budget after the restart = %v", b)
	}
}

// TestBudgetPostgresReplicas: two control planes on one PostgreSQL database count
// into one budget: usage reported through either adds up, the warning is given once,
// and the refusal holds on both.
func TestBudgetPostgresReplicas(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8G"
	recv := webhookstest.New(t, secret)
	dsn := pgtest.DSN(t)
	replica := func() *servertest.Instance {
		return servertest.Start(t, func(c *config.Config) {
			c.Store.Backend = config.BackendPostgres
			c.Store.Postgres.DSN = dsn
			budgetConfig(recv, secret)(c)
		})
	}
	r1, r2 := replica(), replica()
	first := runWithUsage(t, r1, r2, 60)
	second := runWithUsage(t, r2, r1, 50)
	if w1, w2 := warnings(t, r2, first.GetTaskId()), warnings(t, r1, second.GetTaskId()); w1 != 1 || w2 != 0 {
		t.Fatalf("BudgetWarning events: %d and %d; want 1 and 0", w1, w2)
	}
	waitBudgetWarnings(t, recv, r1, first.GetTaskId())
	wantBudgetRefusal(t, r1, "110")
	wantBudgetRefusal(t, r2, "110")
	if b := budgetOf(t, r2); b.GetUsedTokens() != 110 {
		t.Fatalf("budget = %v", b)
	}
}

// TestBudgetConsolePanel: the console's capabilities page shows the tenant's budgets
// with this period's count, escaped (a static agent id is the operator's free text).
func TestBudgetConsolePanel(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) {
		dir := t.TempDir()
		agent := dir + "/a.yaml"
		if err := os.WriteFile(agent, []byte("apiVersion: qar/v1\nkind: AgentSpec\nname: a\ninstructions: Be brief.\nmodel: m\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c.Spec.StaticAgents = map[string]string{"<b>bot</b>": agent}
		c.Budgets.Rules = []config.BudgetRule{
			{Name: "daily", Period: config.PeriodDay, MaxTokens: 100, WarnPercent: 50},
			{Name: "bot-monthly", AgentID: "<b>bot</b>", Period: config.PeriodMonth, MaxTokens: 1000},
		}
	})
	runWithUsage(t, in, in, 60)
	u := newUI(t, in.HTTPAddr)
	resp, body := u.get("/ui/capabilities")
	wantStatus(t, "capabilities", resp, http.StatusOK, "")
	for _, want := range []string{`<h2 id="h-budgets">Budgets</h2>`, "<td>daily</td>", "<td>60 of 100</td>", "<td>over 50%</td>",
		"<td>bot-monthly</td><td>&lt;b&gt;bot&lt;/b&gt;</td>", "<td>0 of 1000</td>"} {
		if !strings.Contains(body, want) {
			t.Errorf("capabilities page lacks %q", want)
		}
	}
	if strings.Contains(body, "<b>bot</b>") {
		t.Error("the agent id reached the page unescaped")
	}
}

// scrape reads a server's /metrics.
func scrape(t *testing.T, in *servertest.Instance) string {
	t.Helper()
	resp, err := http.Get("http://" + in.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
