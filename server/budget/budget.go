package budget

import (
	"cmp"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// picosPerMicro converts millionths of a dollar to picodollars.
const picosPerMicro = 1_000_000

// Budgets is the compiled budgets.* configuration. A nil *Budgets has no budget:
// every method is a no-op. Safe for concurrent use (read-only).
type Budgets struct {
	rules  []rule
	prices map[string]price
}

type rule struct {
	name, agentID, period string
	// approve: at the limit, model calls need approval instead of starts being refused.
	approve             bool
	tenants             map[string]bool // nil: every tenant
	maxTokens, maxPicos int64
	warnPercent         int
}

// price is in picodollars per token (which is microdollars per million tokens).
type price struct{ input, output int64 }

// New compiles a validated configuration; it returns nil when there is no rule.
func New(c config.Budgets) (*Budgets, error) {
	if len(c.Rules) == 0 {
		return nil, nil
	}
	b := &Budgets{prices: map[string]price{}}
	for model, p := range c.Prices {
		in, err := config.ParseUSDMicros(p.InputUSDPerMillion)
		if err != nil {
			return nil, fmt.Errorf("budgets.prices[%q]: %w", model, err)
		}
		out, err := config.ParseUSDMicros(p.OutputUSDPerMillion)
		if err != nil {
			return nil, fmt.Errorf("budgets.prices[%q]: %w", model, err)
		}
		b.prices[model] = price{input: in, output: out}
	}
	for _, r := range c.Rules {
		cr := rule{name: r.Name, agentID: r.AgentID, period: r.Period, maxTokens: r.MaxTokens, warnPercent: r.WarnAt(),
			approve: r.OnLimit == config.OnLimitApprove}
		if r.MaxCostUSD != "" {
			micros, err := config.ParseUSDMicros(r.MaxCostUSD)
			if err != nil {
				return nil, fmt.Errorf("budgets rule %q: %w", r.Name, err)
			}
			cr.maxPicos = micros * picosPerMicro
		}
		if len(r.Tenants) > 0 {
			cr.tenants = map[string]bool{}
			for _, t := range r.Tenants {
				cr.tenants[t] = true
			}
		}
		b.rules = append(b.rules, cr)
	}
	return b, nil
}

// Period is the period of kind (day or month) that holds now, in UTC: its start, and
// the start of the next one (when the counts reset).
func Period(kind string, now time.Time) (start, next time.Time) {
	now = now.UTC()
	if kind == config.PeriodMonth {
		start = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 1, 0)
	}
	start = time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 0, 1)
}

func (r *rule) appliesTo(tenant, agentID string) bool {
	if r.tenants != nil && !r.tenants[tenant] {
		return false
	}
	return r.agentID == "" || r.agentID == agentID
}

// tokensOf is what a usage counts against token limits: total_tokens, or input plus
// output when the runtime gave no total.
func tokensOf(u *agentplanev1.TokenUsage) int64 {
	if t := int64(u.GetTotalTokens()); t > 0 {
		return t
	}
	return max(int64(u.GetInputTokens()), 0) + max(int64(u.GetOutputTokens()), 0)
}

// costOf is what a usage of model costs, in picodollars: input and output tokens at
// the model's prices (or "*"'s), and a total without a split at the higher of the
// two, so that a runtime reporting only totals is not counted cheap.
func (b *Budgets) costOf(model string, u *agentplanev1.TokenUsage) int64 {
	p, ok := b.prices[model]
	if !ok {
		if p, ok = b.prices["*"]; !ok {
			return 0
		}
	}
	in, out := max(int64(u.GetInputTokens()), 0), max(int64(u.GetOutputTokens()), 0)
	if in == 0 && out == 0 {
		return max(int64(u.GetTotalTokens()), 0) * max(p.input, p.output)
	}
	// At most 2^31 tokens times 10^12 picodollars: no overflow.
	return in*p.input + out*p.output
}

// atLeast reports used >= limit * percent / 100 exactly.
func atLeast(used, limit int64, percent int) bool {
	l := new(big.Int).Mul(big.NewInt(limit), big.NewInt(int64(percent)))
	return new(big.Int).Mul(big.NewInt(used), big.NewInt(100)).Cmp(l) >= 0
}

func (r *rule) reached(rec *storagev1.BudgetUsageRecord, percent int) bool {
	return (r.maxTokens > 0 && atLeast(rec.GetTokens(), r.maxTokens, percent)) ||
		(r.maxPicos > 0 && atLeast(rec.GetCostPicos(), r.maxPicos, percent))
}

// Charge counts one model call's usage (of a task of tenant, started with the static
// agent agentID or "" for an inline spec) against every budget it falls under, in
// the transaction w, and returns the budgets whose warning this usage triggered:
// each budget warns once per period, in the transaction that took it to its
// threshold. A usage of nothing counts nothing.
func (b *Budgets) Charge(w store.Writer, tenant, agentID, model string, u *agentplanev1.TokenUsage, now time.Time) ([]*agentplanev1.BudgetStatus, error) {
	if b == nil || u == nil {
		return nil, nil
	}
	tokens, cost := tokensOf(u), b.costOf(model, u)
	if tokens == 0 && cost == 0 {
		return nil, nil
	}
	var warned []*agentplanev1.BudgetStatus
	for i := range b.rules {
		r := &b.rules[i]
		if !r.appliesTo(tenant, agentID) {
			continue
		}
		start, _ := Period(r.period, now)
		d := &storagev1.BudgetUsageRecord{
			Tenant: tenant, Budget: r.name, PeriodStart: timestamppb.New(start),
			Tokens: tokens, CostPicos: cost, UpdateTime: timestamppb.New(now),
		}
		rec, err := w.AddBudgetUsage(d)
		if err != nil {
			return nil, err
		}
		if rec.GetWarned() || !r.reached(rec, r.warnPercent) {
			continue
		}
		if rec, err = w.AddBudgetUsage(&storagev1.BudgetUsageRecord{
			Tenant: tenant, Budget: r.name, PeriodStart: rec.GetPeriodStart(), Warned: true, UpdateTime: timestamppb.New(now),
		}); err != nil {
			return nil, err
		}
		warned = append(warned, r.status(rec, now))
	}
	return warned, nil
}

// current is rec when it counts the period of now, else nil (a past period counts
// nothing now).
func (r *rule) current(rec *storagev1.BudgetUsageRecord, now time.Time) *storagev1.BudgetUsageRecord {
	start, _ := Period(r.period, now)
	if rec == nil || rec.GetPeriodStart().AsTime().Before(start) {
		return nil
	}
	return rec
}

func (r *rule) status(rec *storagev1.BudgetUsageRecord, now time.Time) *agentplanev1.BudgetStatus {
	start, next := Period(r.period, now)
	if ps := rec.GetPeriodStart().AsTime(); ps.After(start) {
		// A count ahead of this replica's clock: report the period it is in.
		start, next = Period(r.period, ps)
	}
	return &agentplanev1.BudgetStatus{
		Budget: r.name, Tenant: rec.GetTenant(), AgentId: r.agentID, Period: r.period,
		PeriodStart: timestamppb.New(start), ResetsAt: timestamppb.New(next),
		UsedTokens: rec.GetTokens(), LimitTokens: r.maxTokens,
		UsedCostMicros: rec.GetCostPicos() / picosPerMicro, LimitCostMicros: r.maxPicos / picosPerMicro,
		WarnPercent: int32(r.warnPercent), Warned: rec.GetWarned(), Exceeded: r.reached(rec, 100),
		OnLimit: r.onLimit(),
	}
}

func (r *rule) onLimit() string {
	if r.approve {
		return config.OnLimitApprove
	}
	return config.OnLimitRefuse
}

// Check refuses a new task of tenant (started with the static agent agentID, or ""),
// when a budget it would count against is spent for the current period:
// RESOURCE_EXHAUSTED with reason BUDGET_EXCEEDED and ErrorInfo metadata budget,
// period, unit, used, limit and resets_at. The first spent budget in configuration
// order is named. Budgets with on_limit approve never refuse a start: their model
// calls are held instead (Hold).
func (b *Budgets) Check(r store.Reader, tenant, agentID string, now time.Time) error {
	st, ru, err := b.spent(r, tenant, agentID, false, now)
	if err != nil || st == nil {
		return err
	}
	return ru.exceeded(st)
}

// spent is the first budget of tenant and agentID, among those whose on_limit is
// approve (or not), that is spent for the current period, with its status; nil when
// none is.
func (b *Budgets) spent(r store.Reader, tenant, agentID string, approve bool, now time.Time) (*agentplanev1.BudgetStatus, *rule, error) {
	if b == nil {
		return nil, nil, nil
	}
	for i := range b.rules {
		ru := &b.rules[i]
		if ru.approve != approve || !ru.appliesTo(tenant, agentID) {
			continue
		}
		rec, err := r.GetBudgetUsage(tenant, ru.name)
		if err != nil {
			return nil, nil, err
		}
		if rec = ru.current(rec, now); rec == nil || !ru.reached(rec, 100) {
			continue
		}
		return ru.status(rec, now), ru, nil
	}
	return nil, nil, nil
}

// GatesModelCalls reports whether a task of tenant started with agentID (or "")
// counts against a budget whose on_limit is approve, so that its runtime must ask
// before each model call (Lease.check_model_calls). It reads nothing.
func (b *Budgets) GatesModelCalls(tenant, agentID string) bool {
	if b == nil {
		return false
	}
	for i := range b.rules {
		if b.rules[i].approve && b.rules[i].appliesTo(tenant, agentID) {
			return true
		}
	}
	return false
}

// Hold is the spent budget, among those with on_limit approve that a task of tenant
// started with agentID counts against, that holds its next model call for a
// person's approval, as a reviewer sees it (the first in configuration order); nil
// when none is spent. It only reads.
func (b *Budgets) Hold(r store.Reader, tenant, agentID string, now time.Time) (*agentplanev1.ModelCallApproval, error) {
	st, ru, err := b.spent(r, tenant, agentID, true, now)
	if err != nil || st == nil {
		return nil, err
	}
	unit, used, limit := ru.terms(st)
	return &agentplanev1.ModelCallApproval{
		Budget: ru.name, Period: ru.period, Unit: unit, Used: used, Limit: limit,
		ResetsAt: st.GetResetsAt(), AgentId: ru.agentID,
	}, nil
}

// terms are the unit of the limit st reached (tokens, or usd), and its use and limit in
// that unit.
func (r *rule) terms(st *agentplanev1.BudgetStatus) (unit, used, limit string) {
	if r.maxTokens == 0 || st.GetUsedTokens() < r.maxTokens {
		return "usd", USD(st.GetUsedCostMicros()), USD(st.GetLimitCostMicros())
	}
	return "tokens", strconv.FormatInt(st.GetUsedTokens(), 10), strconv.FormatInt(st.GetLimitTokens(), 10)
}

func (r *rule) exceeded(st *agentplanev1.BudgetStatus) error {
	unit, used, limit := r.terms(st)
	resets := st.GetResetsAt().AsTime().Format(time.RFC3339)
	scope := "tenant " + strconv.Quote(st.GetTenant())
	if r.agentID != "" {
		scope = "agent " + strconv.Quote(r.agentID) + " of " + scope
	}
	return apierr.New(codes.ResourceExhausted, apierr.ReasonBudgetExceeded,
		"budget %q of %s is spent for this %s: %s of %s %s used; new tasks are refused until %s",
		r.name, scope, r.period, used, limit, unit, resets).
		WithMetadata("budget", r.name).WithMetadata("period", r.period).WithMetadata("unit", unit).
		WithMetadata("used", used).WithMetadata("limit", limit).WithMetadata("resets_at", resets)
}

// Statuses is every budget count of the current periods, in (tenant, budget) order;
// counts of past periods and of budgets no longer configured are left out.
func (b *Budgets) Statuses(r store.Reader, now time.Time) ([]*agentplanev1.BudgetStatus, error) {
	if b == nil {
		return nil, nil
	}
	byName := make(map[string]*rule, len(b.rules))
	for i := range b.rules {
		byName[b.rules[i].name] = &b.rules[i]
	}
	var out []*agentplanev1.BudgetStatus
	err := r.ScanBudgetUsage(func(rec *storagev1.BudgetUsageRecord) (bool, error) {
		ru := byName[rec.GetBudget()]
		if ru == nil || !ru.appliesTo(rec.GetTenant(), ru.agentID) {
			return true, nil
		}
		if rec = ru.current(rec, now); rec != nil {
			out = append(out, ru.status(rec, now))
		}
		return true, nil
	})
	slices.SortFunc(out, func(a, b *agentplanev1.BudgetStatus) int {
		return cmp.Or(cmp.Compare(a.GetTenant(), b.GetTenant()), cmp.Compare(a.GetBudget(), b.GetBudget()))
	})
	return out, err
}

// ForTenant is every budget that applies to tenant, in configuration order, with its
// count for the current period (zero when nothing is counted yet).
func (b *Budgets) ForTenant(r store.Reader, tenant string, now time.Time) ([]*agentplanev1.BudgetStatus, error) {
	if b == nil {
		return nil, nil
	}
	var out []*agentplanev1.BudgetStatus
	for i := range b.rules {
		ru := &b.rules[i]
		if ru.tenants != nil && !ru.tenants[tenant] {
			continue
		}
		rec, err := r.GetBudgetUsage(tenant, ru.name)
		if err != nil {
			return nil, err
		}
		if rec = ru.current(rec, now); rec == nil {
			start, _ := Period(ru.period, now)
			rec = &storagev1.BudgetUsageRecord{Tenant: tenant, Budget: ru.name, PeriodStart: timestamppb.New(start)}
		}
		out = append(out, ru.status(rec, now))
	}
	return out, nil
}

// Limit is one budget's limits per period.
type Limit struct {
	Name string
	// Tokens and CostMicros are 0 where the budget has no such limit.
	Tokens, CostMicros int64
}

// Limits lists the budgets in configuration order.
func (b *Budgets) Limits() []Limit {
	if b == nil {
		return nil
	}
	out := make([]Limit, 0, len(b.rules))
	for _, r := range b.rules {
		out = append(out, Limit{Name: r.name, Tokens: r.maxTokens, CostMicros: r.maxPicos / picosPerMicro})
	}
	return out
}

// USD formats millionths of a dollar as a decimal string ("2.5", "0.000001").
func USD(micros int64) string {
	s := strconv.FormatInt(micros/1_000_000, 10)
	if f := micros % 1_000_000; f != 0 {
		frac := fmt.Sprintf("%06d", f)
		for frac[len(frac)-1] == '0' {
			frac = frac[:len(frac)-1]
		}
		s += "." + frac
	}
	return s
}
