package approvals

// Tests that pin behaviour a mutation run found unguarded. Each names, in its
// comment, the plausible bug (the mutant) it fails on.

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
)

// A person's decision that comes after the interrupt's deadline loses to the
// deployment default, also when no sweep and no read applied the deadline first
// (the loop is not running here): ResolveInterrupt applies it itself, records the
// default and says so.
//
// Mutant: ResolveInterrupt without its applyDeadline (TestDeadlines resolves only
// after a sweep has applied the deadline).
func TestLateDecisionLosesToTheDeadlineWithoutASweep(t *testing.T) {
	cfg := testConfig()
	cfg.DefaultTimeout = time.Minute
	e := newEnv(t, cfg)
	ref := e.startAndLease(t, tenant)
	in := e.gated(t, ref, "c1")
	e.clock.Advance(time.Minute) // exactly at the deadline: it has passed
	_, err := e.svc.ResolveInterrupt(ctx, tenant, "alice", approve(in.GetInterruptId()))
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonAlreadyResolved)
	d := e.record(t, tenant, in.GetInterruptId()).GetInterrupt().GetDecision()
	if d.GetType() != agentplanev1.DecisionType_DECISION_TYPE_REJECT || d.GetSource() != agentplanev1.DecisionSource_DECISION_SOURCE_DEADLINE ||
		d.GetDecidedBy() != hitl.SystemPrincipal {
		t.Fatalf("decision after a late ruling = %v, want the deadline's default (reject)", d)
	}
}

// One call of ApplyDeadlines applies every overdue deadline, of every tenant, as it
// says, and counts them.
//
// Mutants: findDue's scan of a tenant, or its walk over the tenants, stopping after
// the first entry (len(due) >= deadlineBatch).
func TestOneSweepAppliesEveryOverdueDeadline(t *testing.T) {
	cfg := testConfig()
	cfg.DefaultTimeout = time.Minute
	e := newEnv(t, cfg)
	type pending struct{ tenant, id string }
	var all []pending
	for _, tn := range []string{tenant, "acme"} {
		for i := range 2 {
			all = append(all, pending{tn, e.gated(t, e.startAndLease(t, tn), fmt.Sprint("c", i)).GetInterruptId()})
		}
	}
	e.clock.Advance(2 * time.Minute)
	if n, err := e.svc.ApplyDeadlines(ctx); err != nil || n != len(all) {
		t.Fatalf("ApplyDeadlines = %d, %v; want %d", n, err, len(all))
	}
	for _, p := range all {
		if st := e.record(t, p.tenant, p.id).GetInterrupt().GetState(); st != agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED {
			t.Errorf("interrupt %s of %s is %v after the sweep", p.id, p.tenant, st)
		}
	}
}
