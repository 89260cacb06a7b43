package schedules

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/server/budget"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/tasks"
)

// TestSpentBudgetFailsTheRun: a run whose tenant's budget is spent is a FAILED run
// that says so, and the schedule moves on to its next nominal time.
func TestSpentBudgetFailsTheRun(t *testing.T) { onBoth(t, testSpentBudgetFailsTheRun) }

func testSpentBudgetFailsTheRun(t *testing.T, b backend) {
	st := b.open(t)
	clock := &fakeClock{t: base}
	budgets, err := budget.New(config.Budgets{Rules: []config.BudgetRule{{Name: "daily", Period: config.PeriodDay, MaxTokens: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := tasks.New(tasks.Options{Store: st, Config: tasks.ConfigFrom(config.Default()), Clock: clock, Budgets: budgets})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{Store: st, Tasks: tm, Prepare: prepare, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(); tm.Stop(); _ = st.Close() })
	h := &harness{m: m, tasks: tm, store: st, clock: clock}
	h.create(t, "f", every(time.Minute), nil)
	start, _ := budget.Period(config.PeriodDay, base)
	if err := st.Update(ctx, func(w store.Writer) error {
		_, err := w.AddBudgetUsage(&storagev1.BudgetUsageRecord{Tenant: "acme", Budget: "daily", PeriodStart: timestamppb.New(start),
			Tokens: 10, UpdateTime: timestamppb.New(base)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(2 * time.Minute)
	h.pass(t)
	sc := h.get(t, "f")
	equal(t, "runs", outcomes(sc), []string{"FAILED@1m0s", "FAILED@2m0s"})
	if msg := sc.GetRecentRuns()[0].GetMessage(); !strings.Contains(msg, `budget "daily"`) || sc.GetNextNominalTimes()[0].AsTime() != base.Add(3*time.Minute) {
		t.Fatalf("after runs refused by the budget: %v", sc)
	}
}
