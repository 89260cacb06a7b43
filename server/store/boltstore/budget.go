package boltstore

import (
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

func (r reader) GetBudgetUsage(tenant, budget string) (*storagev1.BudgetUsageRecord, error) {
	if err := store.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if !schema.ValidComponent(budget) {
		return nil, nil
	}
	key := schema.BudgetKey(tenant, budget)
	v := r.bucket(schema.Budgets).Get(key)
	if v == nil {
		return nil, nil
	}
	rec := &storagev1.BudgetUsageRecord{}
	return rec, unmarshal(v, rec, "budget usage", key)
}

func (r reader) ScanBudgetUsage(fn func(*storagev1.BudgetUsageRecord) (bool, error)) error {
	c := r.bucket(schema.Budgets).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		rec := &storagev1.BudgetUsageRecord{}
		if err := unmarshal(v, rec, "budget usage", k); err != nil {
			return err
		}
		if more, err := fn(rec); err != nil || !more {
			return err
		}
	}
	return nil
}

// AddBudgetUsage implements store.Writer: the bbolt store has one writer at a time,
// so the read and the write below are one step for every other transaction.
func (w *writer) AddBudgetUsage(d *storagev1.BudgetUsageRecord) (*storagev1.BudgetUsageRecord, error) {
	if err := store.CheckBudgetUsage(d); err != nil {
		return nil, err
	}
	old, err := w.GetBudgetUsage(d.GetTenant(), d.GetBudget())
	if err != nil {
		return nil, err
	}
	rec := store.MergeBudgetUsage(old, d)
	if err := w.put(schema.Budgets, schema.BudgetKey(d.GetTenant(), d.GetBudget()), rec); err != nil {
		return nil, err
	}
	return rec, nil
}
