package tasks

import (
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/budget"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/boltstore"
)

// budgetHarness is a Manager on a bbolt file with budgets: "daily" (1000 tokens a day
// for every tenant, warning at 80%) and "echo-monthly" (0.001 USD a month for the
// static agent echo of tenant acme, at 1 USD per million input and 2 per million
// output tokens of model m).
func budgetHarness(t *testing.T, path string, clock *fakeClock) (*harness, *[]string) {
	t.Helper()
	b, err := budget.New(config.Budgets{
		Prices: map[string]config.Price{"m": {InputUSDPerMillion: "1", OutputUSDPerMillion: "2"}},
		Rules: []config.BudgetRule{
			{Name: "daily", Period: config.PeriodDay, MaxTokens: 1000},
			{Name: "echo-monthly", Tenants: []string{"acme"}, AgentID: "echo", Period: config.PeriodMonth, MaxCostUSD: "0.001", WarnPercent: 50},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var warned []string
	m, err := New(Options{Store: st, Config: testConfig(), Clock: clock, Budgets: b,
		BudgetWarned: func(w store.Writer, taskID string, s *agentplanev1.BudgetStatus) error {
			w.OnCommit(func() { warned = append(warned, s.GetTenant()+"/"+s.GetBudget()) })
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Stop()
		_ = st.Close()
	})
	return &harness{m: m, clock: clock, store: st, path: path}, &warned
}

// useTokens starts a task of tenant (static agent echo), leases it and reports one
// assistant message of model m with in input and out output tokens.
func (h *harness) useTokens(t *testing.T, tenant string, in, out int32) string {
	t.Helper()
	task := h.start(t, params(tenant))
	l := h.lease(t, "rt")
	msg := &agentplanev1.Message{Role: agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, Parts: textParts("ok"), Model: "m",
		Usage: &agentplanev1.TokenUsage{InputTokens: in, OutputTokens: out, TotalTokens: in + out}}
	if _, err := h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{{Payload: &agentplanev1.RuntimeEvent_Message{Message: msg}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.m.Complete(ctx, ref(l), Request{}, nil); err != nil {
		t.Fatal(err)
	}
	return task.GetTaskId()
}

func (h *harness) budgetWarnings(t *testing.T, tenant, taskID string) []*agentplanev1.BudgetStatus {
	t.Helper()
	var out []*agentplanev1.BudgetStatus
	for _, ev := range h.events(t, tenant, taskID) {
		if w := ev.GetBudgetWarning(); w != nil {
			out = append(out, w.GetBudget())
		}
	}
	return out
}

func budgetRefusal(t *testing.T, err error) map[string]string {
	t.Helper()
	wantErr(t, err, codes.ResourceExhausted, apierr.ReasonBudgetExceeded)
	st, _ := apierr.ToStatus(err)
	for _, d := range st.Details() {
		if info, ok := d.(interface{ GetMetadata() map[string]string }); ok {
			return info.GetMetadata()
		}
	}
	t.Fatalf("no ErrorInfo in %v", status.Convert(err).Proto())
	return nil
}

// TestBudgetWarnsOnceThenRefuses: the usage a runtime reports is counted; the task
// whose usage takes the budget to its threshold logs one BudgetWarning (and the hook
// runs once), later usage in the period warns no more; at the limit a new StartTask
// is RESOURCE_EXHAUSTED BUDGET_EXCEEDED with the budget's metadata, while another
// tenant's budget is its own.
func TestBudgetWarnsOnceThenRefuses(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	h, warned := budgetHarness(t, filepath.Join(t.TempDir(), "agentplane.db"), clock)

	first := h.useTokens(t, "beta", 300, 400) // 700 of 1000
	if w := h.budgetWarnings(t, "beta", first); len(w) != 0 {
		t.Fatalf("warning at 70%%: %v", w)
	}
	second := h.useTokens(t, "beta", 100, 50) // 850: over 80%
	w := h.budgetWarnings(t, "beta", second)
	if len(w) != 1 || w[0].GetBudget() != "daily" || w[0].GetUsedTokens() != 850 || w[0].GetLimitTokens() != 1000 || !w[0].GetWarned() || w[0].GetExceeded() {
		t.Fatalf("warnings of the task that crossed 80%%: %v", w)
	}
	third := h.useTokens(t, "beta", 100, 100) // 1050: spent
	if w := h.budgetWarnings(t, "beta", third); len(w) != 0 {
		t.Fatalf("a second warning in the period: %v", w)
	}
	if got := *warned; len(got) != 1 || got[0] != "beta/daily" {
		t.Fatalf("BudgetWarned calls = %q; want one for beta/daily", got)
	}
	_, _, err := h.m.Start(ctx, params("beta"))
	md := budgetRefusal(t, err)
	want := map[string]string{"budget": "daily", "period": "day", "unit": "tokens", "used": "1050", "limit": "1000", "resets_at": "2026-03-11T00:00:00Z"}
	for k, v := range want {
		if md[k] != v {
			t.Errorf("metadata %s = %q; want %q (all: %v)", k, md[k], v, md)
		}
	}
	// Another tenant is not refused.
	h.start(t, params("gamma"))
}

// TestBudgetCostAndRollover: a cost budget counts by the price table (exactly, in
// picodollars), refuses at its limit with unit usd, and a new period (the injected
// clock crossing midnight UTC, or the first of the month) counts from zero again and
// may warn again.
func TestBudgetCostAndRollover(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 3, 31, 23, 0, 0, 0, time.UTC)}
	h, warned := budgetHarness(t, filepath.Join(t.TempDir(), "agentplane.db"), clock)
	// 200 input at 1 USD/M + 150 output at 2 USD/M = 0.0005 USD: 50% of 0.001, which
	// warns; 350 tokens are 35% of "daily".
	id := h.useTokens(t, "acme", 200, 150)
	if w := h.budgetWarnings(t, "acme", id); len(w) != 1 || w[0].GetBudget() != "echo-monthly" || w[0].GetUsedCostMicros() != 500 ||
		w[0].GetLimitCostMicros() != 1000 || w[0].GetResetsAt().AsTime() != time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC) {
		t.Fatalf("warnings: %v", w)
	}
	h.useTokens(t, "acme", 500, 0) // +0.0005 USD: spent; 850 tokens: "daily" warns
	_, _, err := h.m.Start(ctx, params("acme"))
	md := budgetRefusal(t, err)
	want := map[string]string{"budget": "echo-monthly", "period": "month", "unit": "usd", "used": "0.001", "limit": "0.001", "resets_at": "2026-04-01T00:00:00Z"}
	for k, v := range want {
		if md[k] != v {
			t.Errorf("metadata %s = %q; want %q (all: %v)", k, md[k], v, md)
		}
	}
	// An inline spec has no agent id: only "daily" applies, which is not spent.
	inline := params("acme")
	inline.AgentID = ""
	inline.Agent = inline.Resolved.GetAgent()
	h.start(t, inline)
	if _, err := h.m.Complete(ctx, ref(h.lease(t, "rt")), Request{}, nil); err != nil { // out of useTokens' way
		t.Fatal(err)
	}

	clock.Advance(2 * time.Hour) // 2026-04-01T01:00Z: a new day and a new month
	before := len(*warned)
	id = h.useTokens(t, "acme", 500, 500) // 1000 tokens and 0.0015 USD: both warn again
	if w := h.budgetWarnings(t, "acme", id); len(w) != 2 || w[0].GetBudget() != "daily" || w[0].GetUsedTokens() != 1000 || w[1].GetUsedCostMicros() != 1500 {
		t.Fatalf("warnings of the new period: %v", w)
	}
	if len(*warned) != before+2 {
		t.Fatalf("BudgetWarned calls in the new period = %d; want 2", len(*warned)-before)
	}
	_, _, err = h.m.Start(ctx, params("acme"))
	if md := budgetRefusal(t, err); md["budget"] != "daily" || md["resets_at"] != "2026-04-02T00:00:00Z" || md["used"] != "1000" {
		t.Fatalf("refusal of the new day: %v", md)
	}
	clock.Advance(24 * time.Hour) // a new day, the same month
	var sts []*agentplanev1.BudgetStatus
	if err := h.store.View(ctx, func(r store.Reader) (err error) { sts, err = h.m.budgets.ForTenant(r, "acme", clock.Now()); return err }); err != nil {
		t.Fatal(err)
	}
	if len(sts) != 2 || sts[0].GetUsedTokens() != 0 || sts[0].GetExceeded() || sts[1].GetUsedCostMicros() != 1500 || !sts[1].GetExceeded() {
		t.Fatalf("ForTenant on the next day: %v", sts)
	}
	h.start(t, inline)
	_, _, err = h.m.Start(ctx, params("acme"))
	budgetRefusal(t, err)
}

// TestBudgetSurvivesRestart: the counts are in the store, written with the usage: a
// restarted Manager on the same file still refuses, and still does not warn twice.
func TestBudgetSurvivesRestart(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "agentplane.db")
	h, _ := budgetHarness(t, path, clock)
	h.useTokens(t, "beta", 500, 400) // 900: warned
	h.m.Stop()
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	h, warned := budgetHarness(t, path, clock)
	id := h.useTokens(t, "beta", 100, 0) // 1000: spent, no second warning
	if w := h.budgetWarnings(t, "beta", id); len(w) != 0 || len(*warned) != 0 {
		t.Fatalf("warned again after the restart: %v, %v", w, *warned)
	}
	_, _, err := h.m.Start(ctx, params("beta"))
	budgetRefusal(t, err)
	// A retry of a task started before the limit is answered, not refused.
	p := params("beta")
	p.RequestID = "r1"
	clock.Advance(24 * time.Hour)
	h.start(t, p)
	h.useTokens(t, "beta", 1000, 0)
	task, created, err := h.m.Start(ctx, p)
	if err != nil || created || task.GetTaskId() == "" {
		t.Fatalf("retry of a started task after the budget is spent = %v, created=%v, %v", task, created, err)
	}
}

// TestBudgetCountsOnlyRuntimeReports: usage in a message written without a lease (a
// caller's own message) counts toward Task.usage but not toward any budget.
func TestBudgetCountsOnlyRuntimeReports(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	h, _ := budgetHarness(t, filepath.Join(t.TempDir(), "agentplane.db"), clock)
	task := h.start(t, params("beta"))
	if err := h.m.UpdateTask(ctx, "beta", task.GetTaskId(), func(op *Op) error {
		_, err := op.AppendContent(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_Message{Message: &agentplanev1.Message{
			Role: agentplanev1.MessageRole_MESSAGE_ROLE_USER, Parts: textParts("hi"), Usage: &agentplanev1.TokenUsage{TotalTokens: 5000}}}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := h.get(t, "beta", task.GetTaskId()).GetUsage().GetTotalTokens(); got != 5000 {
		t.Fatalf("Task.usage = %d; want 5000", got)
	}
	h.start(t, params("beta")) // not refused: nothing was counted
}
