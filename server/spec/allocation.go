package spec

import (
	"math"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Budget is what remains of an outer graph's budget when it dispatches a subgraph.
// Every field is known (a graph's budget fields are all required, D13-R4); zero
// means exhausted.
type Budget struct {
	InputTokens  int64
	OutputTokens int64
	WallClockS   float64
	MaxSteps     int64
}

// CheckAllocation checks a subgraph allocation handed over on dispatch: each value
// given is positive (D13-R7) and no more than the outer graph has left (D13-R3).
// Values left out are filled later with min(inner declared, outer remaining) and are
// not checked. path is the JSON pointer of the allocation in its enclosing message,
// for example "/allocation" in a dispatch tool call's arguments.
func CheckAllocation(a *agentplanev1.SubgraphAllocation, remaining Budget, path string) []*agentplanev1.SpecViolation {
	if a == nil {
		return nil
	}
	var out findings
	p := NewPath(path)
	ints := []struct {
		name      string
		v         *int32
		remaining int64
	}{
		{"input_tokens", a.InputTokens, remaining.InputTokens},
		{"output_tokens", a.OutputTokens, remaining.OutputTokens},
		{"max_steps", a.MaxSteps, remaining.MaxSteps},
	}
	for _, f := range ints {
		switch {
		case f.v == nil:
		case *f.v <= 0:
			out.add(RuleAllocationPositive, p.Child(f.name), "%s must be greater than 0, got %d; leave it out to take the default", f.name, *f.v)
		case int64(*f.v) > f.remaining:
			out.add(RuleAllocationOverBudget, p.Child(f.name), "%s allocates %d, but the outer graph has %d left", f.name, *f.v, f.remaining)
		}
	}
	if a.WallClockS != nil {
		switch s := a.GetWallClockS(); {
		case math.IsNaN(s) || s <= 0 || math.IsInf(s, 0):
			out.add(RuleAllocationPositive, p.Child("wall_clock_s"), "wall_clock_s must be a positive number of seconds, got %v", s)
		case s > remaining.WallClockS:
			out.add(RuleAllocationOverBudget, p.Child("wall_clock_s"), "wall_clock_s allocates %vs, but the outer graph has %vs left", s, remaining.WallClockS)
		}
	}
	return protos(out)
}
