package storetest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// BudgetDelta is a budget count delta of tokens and picodollars for the period
// starting at period.
func BudgetDelta(tenant, budget string, period time.Time, tokens, picos int64) *storagev1.BudgetUsageRecord {
	return &storagev1.BudgetUsageRecord{
		Tenant: tenant, Budget: budget, PeriodStart: timestamppb.New(period),
		Tokens: tokens, CostPicos: picos, UpdateTime: timestamppb.New(period),
	}
}

func addBudget(t *testing.T, s store.Store, d *storagev1.BudgetUsageRecord) *storagev1.BudgetUsageRecord {
	t.Helper()
	var rec *storagev1.BudgetUsageRecord
	update(t, s, func(w store.Writer) (err error) {
		rec, err = w.AddBudgetUsage(d)
		return err
	})
	return rec
}

// testBudgetUsage: counts add up per (tenant, budget), the warned flag sticks for the
// period, a later period starts from zero, an earlier one is added to the stored
// period, and ScanBudgetUsage lists every count in (tenant, budget) order.
func testBudgetUsage(t *testing.T, s store.Store) {
	day1, day2 := base.Truncate(24*time.Hour), base.Truncate(24*time.Hour).Add(24*time.Hour)
	view(t, s, func(r store.Reader) error {
		rec, err := r.GetBudgetUsage("acme", "daily")
		if err != nil || rec != nil {
			t.Fatalf("GetBudgetUsage of nothing = %v, %v; want nil, nil", rec, err)
		}
		return nil
	})
	addBudget(t, s, BudgetDelta("acme", "daily", day1, 100, 5))
	if rec := addBudget(t, s, BudgetDelta("acme", "daily", day1, 50, 7)); rec.GetTokens() != 150 || rec.GetCostPicos() != 12 || rec.GetWarned() {
		t.Fatalf("after two adds: %v; want 150 tokens, 12 picos, not warned", rec)
	}
	warn := BudgetDelta("acme", "daily", day1, 0, 0)
	warn.Warned = true
	addBudget(t, s, warn)
	if rec := addBudget(t, s, BudgetDelta("acme", "daily", day1, 1, 0)); !rec.GetWarned() || rec.GetTokens() != 151 {
		t.Fatalf("after the warning: %v; want warned, 151 tokens", rec)
	}
	addBudget(t, s, BudgetDelta("beta", "daily", day1, 9, 0))
	addBudget(t, s, BudgetDelta("acme", "another", day1, 3, 0))
	// Another tenant's and another budget's counts are their own.
	view(t, s, func(r store.Reader) error {
		rec, err := r.GetBudgetUsage("acme", "daily")
		if err != nil || rec.GetTokens() != 151 {
			t.Fatalf("acme/daily = %v, %v; want 151 tokens", rec, err)
		}
		return nil
	})
	// A later period rolls over: from zero, not warned.
	if rec := addBudget(t, s, BudgetDelta("acme", "daily", day2, 10, 1)); rec.GetTokens() != 10 || rec.GetCostPicos() != 1 || rec.GetWarned() ||
		!rec.GetPeriodStart().AsTime().Equal(day2) {
		t.Fatalf("first add of day 2: %v; want 10 tokens, 1 pico, not warned, period day 2", rec)
	}
	// A late add for the earlier period (a replica's clock behind) goes to the stored one.
	if rec := addBudget(t, s, BudgetDelta("acme", "daily", day1, 5, 0)); rec.GetTokens() != 15 || !rec.GetPeriodStart().AsTime().Equal(day2) {
		t.Fatalf("late add for day 1: %v; want 15 tokens in day 2", rec)
	}
	var got []string
	view(t, s, func(r store.Reader) error {
		return r.ScanBudgetUsage(func(rec *storagev1.BudgetUsageRecord) (bool, error) {
			got = append(got, rec.GetTenant()+"/"+rec.GetBudget())
			return true, nil
		})
	})
	slices.Sort(got)
	equalStrings(t, "ScanBudgetUsage", got, []string{"acme/another", "acme/daily", "beta/daily"})
	// Refused: an invalid tenant or budget name, a negative delta, no period.
	for name, d := range map[string]*storagev1.BudgetUsageRecord{
		"no tenant": BudgetDelta("", "daily", day1, 1, 0),
		"no budget": BudgetDelta("acme", "", day1, 1, 0),
		"negative":  BudgetDelta("acme", "daily", day1, -1, 0),
		"no period": {Tenant: "acme", Budget: "daily", Tokens: 1},
	} {
		if err := s.Update(context.Background(), func(w store.Writer) error { _, err := w.AddBudgetUsage(d); return err }); err == nil {
			t.Errorf("AddBudgetUsage(%s) succeeded", name)
		}
	}
}

// testBudgetConcurrentAdds: concurrent transactions adding to one count, the first
// of them creating it, lose nothing.
func testBudgetConcurrentAdds(t *testing.T, s store.Store) {
	BudgetConcurrentAdds(t, []store.Store{s})
}

// BudgetConcurrentAdds adds to one budget count from many goroutines spread over
// stores (replicas of one database, or one store) and checks that the count is the
// exact sum and that exactly one transaction saw it cross a threshold.
func BudgetConcurrentAdds(t *testing.T, stores []store.Store) {
	t.Helper()
	const workers, adds, threshold = 8, 25, 100
	period := base.Truncate(24 * time.Hour)
	var wg sync.WaitGroup
	var mu sync.Mutex
	crossed := 0
	for i := range workers {
		s := stores[i%len(stores)]
		wg.Go(func() {
			for range adds {
				err := s.Update(context.Background(), func(w store.Writer) error {
					rec, err := w.AddBudgetUsage(BudgetDelta("acme", "daily", period, 1, 3))
					if err != nil {
						return err
					}
					if rec.GetTokens() == threshold {
						w.OnCommit(func() { mu.Lock(); crossed++; mu.Unlock() })
					}
					return nil
				})
				if err != nil {
					t.Errorf("Update: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	view(t, stores[0], func(r store.Reader) error {
		rec, err := r.GetBudgetUsage("acme", "daily")
		if err != nil {
			return err
		}
		if rec.GetTokens() != workers*adds || rec.GetCostPicos() != 3*workers*adds {
			t.Errorf("count after %d concurrent adds = %d tokens, %d picos; want %d, %d", workers*adds, rec.GetTokens(), rec.GetCostPicos(), workers*adds, 3*workers*adds)
		}
		return nil
	})
	if crossed != 1 {
		t.Errorf("%d committed transactions saw the count reach %d; want exactly 1", crossed, threshold)
	}
}
