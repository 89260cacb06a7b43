package telemetry

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/agentplane/agentplane/client/worker"
)

// TestModelLabelsBounded: a client names the model, so past maxModelLabels distinct
// names the label is "other"; a canceled call is no model error.
func TestModelLabelsBounded(t *testing.T) {
	m := NewMetrics()
	o := New(m, nil)
	for i := range maxModelLabels + 10 {
		_, c := o.StartModelCall(context.Background(), fmt.Sprintf("model-%d", i))
		c.End(ModelResult{InputTokens: 1, OutputTokens: 1})
	}
	_, c := o.StartModelCall(context.Background(), "model-0")
	c.End(ModelResult{Err: errors.New("stopped"), ErrorType: ErrorCanceled})
	_, c = o.StartModelCall(context.Background(), "model-0")
	c.End(ModelResult{Err: errors.New("502"), ErrorType: "runtime.model_error"})

	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		switch f.GetName() {
		case "agentplane_runtime_model_tokens_total":
			models := map[string]float64{}
			for _, mt := range f.GetMetric() {
				for _, lp := range mt.GetLabel() {
					if lp.GetName() == "model" && mt.GetLabel()[1].GetValue() == "input" {
						models[lp.GetValue()] += mt.GetCounter().GetValue()
					}
				}
			}
			if len(models) != maxModelLabels+1 || models["other"] != 10 || models["model-0"] != 1 {
				t.Errorf("%d model labels (want %d), other=%v, model-0=%v", len(models), maxModelLabels+1, models["other"], models["model-0"])
			}
		case "agentplane_runtime_errors_total":
			for _, mt := range f.GetMetric() {
				if v := mt.GetCounter().GetValue(); mt.GetLabel()[0].GetValue() == "model" && v != 1 {
					t.Errorf("model errors %v, want 1 (the canceled call is not one)", v)
				}
			}
		}
	}
}

// A nil *T records nothing and does not panic: the agent calls it unconditionally.
func TestNilRecordsNothing(t *testing.T) {
	var o *T
	ctx, mc := o.StartModelCall(context.Background(), "m")
	mc.End(ModelResult{})
	tc := o.StartToolCall(ctx, "http", "t", "c1", "call_1")
	if _, err := tc.Gate(func(context.Context) (*worker.Gate, error) { return &worker.Gate{Allowed: true}, nil }); err != nil {
		t.Fatal(err)
	}
	tc.End(false, nil)
	tc.Close()
}
