package pgstore

import (
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

func (r *reader) GetBudgetUsage(tenant, budget string) (*storagev1.BudgetUsageRecord, error) {
	if err := store.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if !schema.ValidComponent(budget) {
		return nil, nil
	}
	v, ok, err := r.get("SELECT rec FROM budget_usage WHERE tenant = $1 AND budget = $2", tenant, budget)
	if err != nil || !ok || len(v) == 0 {
		// An empty rec is a row AddBudgetUsage inserted and has not filled yet.
		return nil, err
	}
	rec := &storagev1.BudgetUsageRecord{}
	return rec, unmarshal(v, rec, "budget usage", tenant+"/"+budget)
}

func (r *reader) ScanBudgetUsage(fn func(*storagev1.BudgetUsageRecord) (bool, error)) error {
	return r.scanByTenant("budget_usage", "budget", func(tenant, budget string, v []byte) (bool, error) {
		if len(v) == 0 {
			return true, nil // a row AddBudgetUsage inserted and has not filled yet
		}
		rec := &storagev1.BudgetUsageRecord{}
		if err := unmarshal(v, rec, "budget usage", tenant+"/"+budget); err != nil {
			return false, err
		}
		return fn(rec)
	})
}

// AddBudgetUsage implements store.Writer. The row is made to exist first (an empty
// rec; of two concurrent inserts the second waits for the first and then does
// nothing), then locked (SELECT ... FOR UPDATE waits for a transaction holding it and
// reads the latest committed rec), so the read, the merge and the write happen under
// the lock, whichever replica runs them.
func (w *writer) AddBudgetUsage(d *storagev1.BudgetUsageRecord) (*storagev1.BudgetUsageRecord, error) {
	if err := store.CheckBudgetUsage(d); err != nil {
		return nil, err
	}
	tenant, budget := d.GetTenant(), d.GetBudget()
	if _, err := w.exec("INSERT INTO budget_usage (tenant, budget, rec) VALUES ($1, $2, '') ON CONFLICT DO NOTHING", tenant, budget); err != nil {
		return nil, err
	}
	v, _, err := w.get("SELECT rec FROM budget_usage WHERE tenant = $1 AND budget = $2 FOR UPDATE", tenant, budget)
	if err != nil {
		return nil, err
	}
	var old *storagev1.BudgetUsageRecord
	if len(v) > 0 {
		old = &storagev1.BudgetUsageRecord{}
		if err := unmarshal(v, old, "budget usage", tenant+"/"+budget); err != nil {
			return nil, err
		}
	}
	rec := store.MergeBudgetUsage(old, d)
	b, err := encode(rec)
	if err != nil {
		return nil, err
	}
	if _, err := w.exec("UPDATE budget_usage SET rec = $3 WHERE tenant = $1 AND budget = $2", tenant, budget, b); err != nil {
		return nil, err
	}
	return rec, nil
}
