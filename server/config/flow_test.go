package config

import (
	"strings"
	"testing"
)

// TestFlowValidation: every mistake in the flow section is named at startup, and a
// correct one passes.
func TestFlowValidation(t *testing.T) {
	good := `
flow:
  fairness:
    mode: weighted
    weights: {acme: 3}
  queues:
    default:
      concurrency: {key: 'labels["customer"]', limit: 1}
      rate: {on: start, per_second: 5, burst: 10}
`
	cfg := Default()
	if err := Parse([]byte(good), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("valid flow section refused: %v", err)
	}
	for _, c := range []struct{ yaml, want string }{
		{"flow: {fairness: {mode: lottery}}", `flow.fairness.mode "lottery"`},
		{"flow: {fairness: {weights: {acme: 2}}}", "weights apply only to weighted"},
		{"flow: {fairness: {mode: weighted, weights: {acme: 0}}}", "flow.fairness.weights.acme 0"},
		{"flow: {queues: {default: {concurrency: {key: 'tenant', limit: 0}}}}", "concurrency.limit 0"},
		{"flow: {queues: {default: {rate: {on: lease, per_second: 0}}}}", "rate.per_second 0"},
		{"flow: {queues: {default: {rate: {on: later, per_second: 1}}}}", `rate.on "later"`},
		{"flow: {queues: {gpu: {}}}", "none of concurrency, rate and fairness"},
	} {
		cfg := Default()
		if err := Parse([]byte(c.yaml), &cfg); err != nil {
			t.Fatalf("%s: %v", c.yaml, err)
		}
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v; want an error with %q", c.yaml, err, c.want)
		}
	}
}
