package server

import (
	"context"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/budget"
	"github.com/agentplane/agentplane/server/store"
)

// maxBudgetSeries bounds the per-tenant budget series: a budget that applies to every
// tenant would otherwise give one series per tenant. The counts nearest their limits
// get a series each; the per-budget aggregates (limits, tenants warned and spent)
// cover every tenant whatever the cap.
const maxBudgetSeries = 64

// budgetCollector exports the budgets' counts at scrape time, from one read of the
// counts (bounded by tenants times budgets).
type budgetCollector struct {
	budgets *budget.Budgets
	store   store.Store

	usedTokens, limitTokens, usedUSD, limitUSD, warned, exceeded *prometheus.Desc
}

func newBudgetCollector(b *budget.Budgets, st store.Store) *budgetCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("agentplane_budget_"+name, help, labels, nil)
	}
	return &budgetCollector{
		budgets: b, store: st,
		usedTokens:  d("used_tokens", "Tokens counted this period, per budget and tenant (the 64 counts nearest their limits).", "budget", "tenant"),
		limitTokens: d("limit_tokens", "Token limit per period of each budget with one (the same for every tenant it applies to).", "budget"),
		usedUSD:     d("used_usd", "Cost counted this period in US dollars, per budget with a cost limit and tenant (the 64 counts nearest their limits).", "budget", "tenant"),
		limitUSD:    d("limit_usd", "Cost limit per period in US dollars of each budget with one.", "budget"),
		warned:      d("warned_tenants", "Tenants whose count of this budget reached its warning threshold this period.", "budget"),
		exceeded:    d("exceeded_tenants", "Tenants whose count of this budget reached its limit this period: their new tasks are refused (BUDGET_EXCEEDED).", "budget"),
	}
}

func (c *budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.usedTokens, c.limitTokens, c.usedUSD, c.limitUSD, c.warned, c.exceeded} {
		ch <- d
	}
}

// ratio is how near a count is to its nearer limit.
func ratio(b *agentplanev1.BudgetStatus) float64 {
	r := 0.0
	if b.GetLimitTokens() > 0 {
		r = float64(b.GetUsedTokens()) / float64(b.GetLimitTokens())
	}
	if b.GetLimitCostMicros() > 0 {
		r = max(r, float64(b.GetUsedCostMicros())/float64(b.GetLimitCostMicros()))
	}
	return r
}

func (c *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var all []*agentplanev1.BudgetStatus
	if err := c.store.View(ctx, func(r store.Reader) (err error) {
		all, err = c.budgets.Statuses(r, time.Now())
		return err
	}); err != nil {
		ch <- prometheus.NewInvalidMetric(c.usedTokens, err)
		return
	}
	for _, rule := range c.budgets.Limits() {
		if rule.Tokens > 0 {
			ch <- prometheus.MustNewConstMetric(c.limitTokens, prometheus.GaugeValue, float64(rule.Tokens), rule.Name)
		}
		if rule.CostMicros > 0 {
			ch <- prometheus.MustNewConstMetric(c.limitUSD, prometheus.GaugeValue, float64(rule.CostMicros)/1e6, rule.Name)
		}
		var warned, exceeded int
		for _, b := range all {
			if b.GetBudget() == rule.Name {
				warned += map[bool]int{true: 1}[b.GetWarned()]
				exceeded += map[bool]int{true: 1}[b.GetExceeded()]
			}
		}
		ch <- prometheus.MustNewConstMetric(c.warned, prometheus.GaugeValue, float64(warned), rule.Name)
		ch <- prometheus.MustNewConstMetric(c.exceeded, prometheus.GaugeValue, float64(exceeded), rule.Name)
	}
	slices.SortStableFunc(all, func(a, b *agentplanev1.BudgetStatus) int {
		switch ra, rb := ratio(a), ratio(b); {
		case ra > rb:
			return -1
		case ra < rb:
			return 1
		}
		return 0
	})
	for _, b := range all[:min(len(all), maxBudgetSeries)] {
		ch <- prometheus.MustNewConstMetric(c.usedTokens, prometheus.GaugeValue, float64(b.GetUsedTokens()), b.GetBudget(), b.GetTenant())
		if b.GetLimitCostMicros() > 0 {
			ch <- prometheus.MustNewConstMetric(c.usedUSD, prometheus.GaugeValue, float64(b.GetUsedCostMicros())/1e6, b.GetBudget(), b.GetTenant())
		}
	}
}
