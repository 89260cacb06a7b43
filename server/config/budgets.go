package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Budgets configures token and cost budgets (docs/budgets.md).
type Budgets struct {
	// Prices maps a model name, exactly as runtimes report it in Message.model, to its
	// price; "*" prices every model not listed. A model without a price costs nothing:
	// only token limits count it.
	Prices map[string]Price `yaml:"prices"`
	// Rules are the budgets. Each counts, for every tenant it applies to separately,
	// the model usage of that tenant's tasks (or of one static agent's tasks) in the
	// current period.
	Rules []BudgetRule `yaml:"rules"`
}

// Price is what a model's tokens cost, in US dollars per million tokens, as decimal
// strings with at most 6 digits after the point ("2.50"), so that counting is exact.
type Price struct {
	InputUSDPerMillion  string `yaml:"input_usd_per_million"`
	OutputUSDPerMillion string `yaml:"output_usd_per_million"`
}

// BudgetRule is one budget.
type BudgetRule struct {
	// Name identifies the budget in errors, events, stats and metrics: 1 to 64
	// lower-case letters, digits, '.', '_' and '-', unique.
	Name string `yaml:"name"`
	// Tenants it applies to, each counted separately; empty: every tenant.
	Tenants []string `yaml:"tenants"`
	// AgentID restricts it to the tasks started with that static agent
	// (spec.static_agents); empty: every task of the tenant.
	AgentID string `yaml:"agent_id"`
	// Period is day or month, in UTC: counts start again from zero at 00:00 UTC each
	// day, or on the first of each month.
	Period string `yaml:"period"`
	// MaxTokens is the token limit per period; 0 for none.
	MaxTokens int64 `yaml:"max_tokens"`
	// MaxCostUSD is the cost limit per period, a decimal string of US dollars (at most
	// 6 digits after the point, at most 1000000); empty for none. It needs prices.
	MaxCostUSD string `yaml:"max_cost_usd"`
	// WarnPercent is the share of a limit at which the period's warning is given
	// (1 to 100); 0 means 80.
	WarnPercent int `yaml:"warn_percent"`
	// OnLimit is what happens once a limit is reached: refuse (the default: new tasks
	// are refused with BUDGET_EXCEEDED) or approve (tasks still start, and each further
	// model call of a task counting against the budget waits for a person's approval).
	OnLimit string `yaml:"on_limit"`
}

// BudgetRule.OnLimit values.
const (
	OnLimitRefuse  = "refuse"
	OnLimitApprove = "approve"
)

// Budget periods.
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
)

// DefaultWarnPercent is BudgetRule.WarnPercent when it is 0.
const DefaultWarnPercent = 80

// MaxBudgetUSD bounds MaxCostUSD and prices, so that counts in picodollars fit int64.
const MaxBudgetUSD = 1_000_000

var budgetName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// ParseUSDMicros parses a non-negative decimal string of US dollars with at most 6
// digits after the point, at most MaxBudgetUSD, into millionths of a dollar.
func ParseUSDMicros(s string) (int64, error) {
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(frac) > 6 || strings.Trim(whole, "0123456789") != "" || strings.Trim(frac, "0123456789") != "" || len(whole) > 7 {
		return 0, fmt.Errorf("%q is not a dollar amount like 2.50 (at most 6 digits after the point)", s)
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %v", s, err)
	}
	f := int64(0)
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	v := w*1_000_000 + f
	if v > MaxBudgetUSD*1_000_000 {
		return 0, fmt.Errorf("%q is over %d dollars", s, MaxBudgetUSD)
	}
	return v, nil
}

// WarnAt is r's warning threshold in percent.
func (r BudgetRule) WarnAt() int {
	if r.WarnPercent == 0 {
		return DefaultWarnPercent
	}
	return r.WarnPercent
}

func (c *Config) validateBudgets(bad func(string, ...any)) {
	b := c.Budgets
	for model, p := range b.Prices {
		at := fmt.Sprintf("budgets.prices[%q]", model)
		if model == "" || len(model) > 255 {
			bad("%s: a model name is 1 to 255 bytes", at)
		}
		for key, v := range map[string]string{"input_usd_per_million": p.InputUSDPerMillion, "output_usd_per_million": p.OutputUSDPerMillion} {
			if _, err := ParseUSDMicros(v); err != nil {
				bad("%s.%s: %v", at, key, err)
			}
		}
	}
	names := map[string]bool{}
	for i, r := range b.Rules {
		at := fmt.Sprintf("budgets.rules[%d]", i)
		if !budgetName.MatchString(r.Name) {
			bad("%s.name %q: want 1 to 64 lower-case letters, digits, '.', '_' and '-', starting with a letter or digit", at, r.Name)
		} else if names[r.Name] {
			bad("%s.name %q: used by an earlier rule", at, r.Name)
		}
		names[r.Name] = true
		switch r.Period {
		case PeriodDay, PeriodMonth:
		default:
			bad("%s.period %q: want day or month", at, r.Period)
		}
		for _, t := range r.Tenants {
			if t == "" || len(t) > 255 {
				bad("%s.tenants: a tenant id is 1 to 255 bytes", at)
			}
		}
		if r.AgentID != "" {
			if _, ok := c.Spec.StaticAgents[r.AgentID]; !ok {
				bad("%s.agent_id %q: not in spec.static_agents", at, r.AgentID)
			}
		}
		if r.MaxTokens < 0 {
			bad("%s.max_tokens must not be negative", at)
		}
		if r.MaxCostUSD != "" {
			if v, err := ParseUSDMicros(r.MaxCostUSD); err != nil {
				bad("%s.max_cost_usd: %v", at, err)
			} else if v == 0 {
				bad("%s.max_cost_usd must be positive (leave it out for no cost limit)", at)
			}
			if len(b.Prices) == 0 {
				bad("%s.max_cost_usd needs budgets.prices: without prices every call costs nothing", at)
			}
		}
		if r.MaxTokens == 0 && r.MaxCostUSD == "" {
			bad("%s: set max_tokens, max_cost_usd or both", at)
		}
		switch r.OnLimit {
		case "", OnLimitRefuse, OnLimitApprove:
		default:
			bad("%s.on_limit %q: want refuse (new tasks are refused, the default) or approve (each further model call needs a person's approval)", at, r.OnLimit)
		}
		if r.WarnPercent < 0 || r.WarnPercent > 100 {
			bad("%s.warn_percent %d: want 1 to 100 (0 means %d)", at, r.WarnPercent, DefaultWarnPercent)
		}
	}
}
