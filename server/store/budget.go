package store

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"

	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

// CheckBudgetUsage refuses a budget count delta that cannot be stored.
func CheckBudgetUsage(d *storagev1.BudgetUsageRecord) error {
	if err := CheckTenant(d.GetTenant()); err != nil {
		return err
	}
	switch {
	case !schema.ValidComponent(d.GetBudget()):
		return fmt.Errorf("store: budget name %q is not a key component", d.GetBudget())
	case d.GetPeriodStart() == nil:
		return fmt.Errorf("store: budget %q count without a period", d.GetBudget())
	case d.GetTokens() < 0 || d.GetCostPicos() < 0:
		return fmt.Errorf("store: budget %q count goes down", d.GetBudget())
	}
	return nil
}

// MergeBudgetUsage is the count after adding d to old (nil: none), as AddBudgetUsage
// stores it. A count of an earlier period than d's starts again from zero: that is
// how a period rolls over, on the first usage after it ends. A d of an earlier period
// than old's (a replica whose clock is behind) is added to old's period, so that no
// usage is lost. Sums saturate at the int64 maximum.
func MergeBudgetUsage(old, d *storagev1.BudgetUsageRecord) *storagev1.BudgetUsageRecord {
	out := &storagev1.BudgetUsageRecord{Tenant: d.GetTenant(), Budget: d.GetBudget(), PeriodStart: d.GetPeriodStart()}
	if old != nil && !old.GetPeriodStart().AsTime().Before(d.GetPeriodStart().AsTime()) {
		out = proto.Clone(old).(*storagev1.BudgetUsageRecord)
	}
	out.Tokens = satAdd64(out.GetTokens(), d.GetTokens())
	out.CostPicos = satAdd64(out.GetCostPicos(), d.GetCostPicos())
	out.Warned = out.GetWarned() || d.GetWarned()
	out.UpdateTime = d.GetUpdateTime()
	return out
}

func satAdd64(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
