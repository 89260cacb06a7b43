package budget

import (
	"math"
	"testing"
	"time"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
)

func TestPeriod(t *testing.T) {
	d := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct{ kind, now, start, next string }{
		{config.PeriodDay, "2026-03-10T12:00:00Z", "2026-03-10T00:00:00Z", "2026-03-11T00:00:00Z"},
		{config.PeriodDay, "2026-03-10T23:59:59.999999999Z", "2026-03-10T00:00:00Z", "2026-03-11T00:00:00Z"},
		{config.PeriodDay, "2026-03-11T00:00:00Z", "2026-03-11T00:00:00Z", "2026-03-12T00:00:00Z"},
		// UTC whatever the caller's zone: 01:00 in UTC+2 is still the day before in UTC.
		{config.PeriodDay, "2026-03-11T01:00:00+02:00", "2026-03-10T00:00:00Z", "2026-03-11T00:00:00Z"},
		{config.PeriodMonth, "2026-12-31T23:00:00Z", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{config.PeriodMonth, "2028-02-29T10:00:00Z", "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z"},
	} {
		start, next := Period(c.kind, d(c.now))
		if !start.Equal(d(c.start)) || !next.Equal(d(c.next)) || start.Location() != time.UTC {
			t.Errorf("Period(%s, %s) = %s, %s; want %s, %s", c.kind, c.now, start, next, c.start, c.next)
		}
	}
}

func TestCostAndTokens(t *testing.T) {
	b, err := New(config.Budgets{
		Prices: map[string]config.Price{"a": {InputUSDPerMillion: "2.5", OutputUSDPerMillion: "10"}, "*": {InputUSDPerMillion: "0.000001", OutputUSDPerMillion: "0"}},
		Rules:  []config.BudgetRule{{Name: "x", Period: config.PeriodDay, MaxTokens: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	u := func(in, out, total int32) *agentplanev1.TokenUsage {
		return &agentplanev1.TokenUsage{InputTokens: in, OutputTokens: out, TotalTokens: total}
	}
	for _, c := range []struct {
		model         string
		u             *agentplanev1.TokenUsage
		tokens, picos int64
	}{
		{"a", u(1000, 100, 1100), 1100, 1000*2_500_000 + 100*10_000_000}, // 0.0025 + 0.001 USD
		{"a", u(1000, 100, 0), 1100, 1000*2_500_000 + 100*10_000_000},    // no total: in + out
		{"a", u(0, 0, 10), 10, 10 * 10_000_000},                          // only a total: at the higher price
		{"other", u(3, 0, 3), 3, 3},                                      // "*": a millionth of a dollar per million tokens
		{"a", u(-5, 7, 0), 7, 7 * 10_000_000},                            // negative counts count nothing
		{"a", u(math.MaxInt32, math.MaxInt32, 0), 2 * math.MaxInt32, math.MaxInt32 * (2_500_000 + 10_000_000)},
	} {
		if got := tokensOf(c.u); got != c.tokens {
			t.Errorf("tokensOf(%v) = %d; want %d", c.u, got, c.tokens)
		}
		if got := b.costOf(c.model, c.u); got != c.picos {
			t.Errorf("costOf(%s, %v) = %d; want %d", c.model, c.u, got, c.picos)
		}
	}
	noPrices, _ := New(config.Budgets{Rules: []config.BudgetRule{{Name: "x", Period: config.PeriodDay, MaxTokens: 1}}})
	if got := noPrices.costOf("a", u(1, 1, 2)); got != 0 {
		t.Errorf("cost without a price table = %d", got)
	}
}

func TestAtLeastIsExact(t *testing.T) {
	const big = math.MaxInt64 / 10 // limit * percent overflows int64
	for _, c := range []struct {
		used, limit int64
		percent     int
		want        bool
	}{
		{79, 100, 80, false}, {80, 100, 80, true}, {7, 9, 80, false}, {8, 9, 80, true}, // 7.2
		{big/100*80 + 63, big, 80, false}, {big/100*80 + 64, big, 80, true}, // big*80/100 = big/100*80 + 64
		{99, 100, 100, false}, {100, 100, 100, true},
	} {
		if got := atLeast(c.used, c.limit, c.percent); got != c.want {
			t.Errorf("atLeast(%d, %d, %d) = %v; want %v", c.used, c.limit, c.percent, got, c.want)
		}
	}
}

func TestUSD(t *testing.T) {
	for micros, want := range map[int64]string{0: "0", 1: "0.000001", 2_500_000: "2.5", 10_000_000: "10", 1_234_567: "1.234567"} {
		if got := USD(micros); got != want {
			t.Errorf("USD(%d) = %q; want %q", micros, got, want)
		}
	}
}

func TestNilBudgets(t *testing.T) {
	b, err := New(config.Budgets{})
	if err != nil || b != nil {
		t.Fatalf("New without rules = %v, %v; want nil", b, err)
	}
	if err := b.Check(nil, "t", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if w, err := b.Charge(nil, "t", "", "m", &agentplanev1.TokenUsage{TotalTokens: 1}, time.Now()); w != nil || err != nil {
		t.Fatal(w, err)
	}
}
