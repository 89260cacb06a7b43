package config

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestBudgetsValidate: every mistake in budgets.* stops the boot, each named by its
// path.
func TestBudgetsValidate(t *testing.T) {
	good := func() Config {
		c := Default()
		c.Spec.StaticAgents = map[string]string{"support": "support.yaml"}
		c.Budgets = Budgets{
			Prices: map[string]Price{"gpt-4o": {InputUSDPerMillion: "2.50", OutputUSDPerMillion: "10"}, "*": {InputUSDPerMillion: "0", OutputUSDPerMillion: "0.000001"}},
			Rules: []BudgetRule{
				{Name: "tenant-daily", Period: PeriodDay, MaxTokens: 1_000_000},
				{Name: "support.monthly", Tenants: []string{"acme"}, AgentID: "support", Period: PeriodMonth, MaxCostUSD: "25", WarnPercent: 90},
				{Name: "acme-gated", Tenants: []string{"acme"}, Period: PeriodDay, MaxTokens: 10, OnLimit: OnLimitApprove},
				{Name: "refusing", Period: PeriodDay, MaxTokens: 10, OnLimit: OnLimitRefuse},
			},
		}
		return c
	}
	if c := good(); c.Validate() != nil {
		t.Fatalf("valid budgets refused: %v", c.Validate())
	}
	for _, tc := range []struct {
		name, want string
		mod        func(*Budgets)
	}{
		{"bad name", "budgets.rules[0].name", func(b *Budgets) { b.Rules[0].Name = "Tenant Daily" }},
		{"duplicate name", "budgets.rules[1].name \"tenant-daily\": used by an earlier rule", func(b *Budgets) { b.Rules[1].Name = "tenant-daily" }},
		{"bad period", "budgets.rules[0].period \"week\"", func(b *Budgets) { b.Rules[0].Period = "week" }},
		{"unknown agent", "budgets.rules[1].agent_id \"sales\": not in spec.static_agents", func(b *Budgets) { b.Rules[1].AgentID = "sales" }},
		{"no limit", "budgets.rules[0]: set max_tokens, max_cost_usd or both", func(b *Budgets) { b.Rules[0].MaxTokens = 0 }},
		{"negative tokens", "budgets.rules[0].max_tokens must not be negative", func(b *Budgets) { b.Rules[0].MaxTokens = -1 }},
		{"bad cost", "budgets.rules[1].max_cost_usd: \"25.0000001\"", func(b *Budgets) { b.Rules[1].MaxCostUSD = "25.0000001" }},
		{"zero cost", "budgets.rules[1].max_cost_usd must be positive", func(b *Budgets) { b.Rules[1].MaxCostUSD = "0.00" }},
		{"huge cost", "is over 1000000 dollars", func(b *Budgets) { b.Rules[1].MaxCostUSD = "1000000.01" }},
		{"cost without prices", "max_cost_usd needs budgets.prices", func(b *Budgets) { b.Prices = nil }},
		{"warn percent", "budgets.rules[1].warn_percent 101", func(b *Budgets) { b.Rules[1].WarnPercent = 101 }},
		{"bad price", "budgets.prices[\"gpt-4o\"].input_usd_per_million: \"-1\"", func(b *Budgets) { b.Prices["gpt-4o"] = Price{InputUSDPerMillion: "-1", OutputUSDPerMillion: "1"} }},
		{"missing price", "budgets.prices[\"gpt-4o\"].output_usd_per_million: \"\"", func(b *Budgets) { b.Prices["gpt-4o"] = Price{InputUSDPerMillion: "1"} }},
		{"bad on_limit", "budgets.rules[2].on_limit \"ask\": want refuse", func(b *Budgets) { b.Rules[2].OnLimit = "ask" }},
		{"empty tenant", "budgets.rules[1].tenants: a tenant id is 1 to 255 bytes", func(b *Budgets) { b.Rules[1].Tenants = []string{""} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.mod(&c.Budgets)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestParseUSDMicros(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "2.5": 2_500_000, "2.50": 2_500_000, "0.000001": 1, "1000000": 1_000_000_000_000, "10.": 10_000_000} {
		if got, err := ParseUSDMicros(in); err != nil || got != want {
			t.Errorf("ParseUSDMicros(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", ".5", "-1", "1e3", "1.0000001", "1,5", " 1", "1000000.000001", "99999999"} {
		if _, err := ParseUSDMicros(in); err == nil {
			t.Errorf("ParseUSDMicros(%q) accepted", in)
		}
	}
}

// TestDocumentedBudgetExampleValidates: the configuration of docs/budgets.md boots.
func TestDocumentedBudgetExampleValidates(t *testing.T) {
	doc, err := os.ReadFile("../../docs/budgets.md")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		if !strings.Contains(m[1], "budgets:") {
			continue
		}
		found = true
		cfg := Default()
		cfg.Auth.RequirePrincipal, cfg.Auth.AllowInsecure = true, true
		if err := Parse([]byte(m[1]), &cfg); err != nil {
			t.Fatalf("%v\n%s", err, m[1])
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%v\n%s", err, m[1])
		}
	}
	if !found {
		t.Fatal("docs/budgets.md: no yaml example with budgets:")
	}
}
