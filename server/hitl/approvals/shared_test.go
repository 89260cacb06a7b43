package approvals

import (
	"testing"
	"time"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/store/pgstore"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
)

// newReplicaEnv is a control plane without the gRPC layer on the PostgreSQL
// database dsn, wired to the other replicas' changes as the server wires it.
func newReplicaEnv(t *testing.T, dsn string, c *clock) *env {
	t.Helper()
	st, err := pgstore.Open(ctx, dsn, pgstore.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{clock: c, cfg: testConfig()}
	e.build(t, st)
	st.OnChange(e.svc.Changed)
	st.OnChange(e.tasks.Changed)
	t.Cleanup(e.close)
	return e
}

// TestAwaitAcrossReplicas: an AwaitDecision waiting on replica B returns the decision
// made on replica A. B never re-checks on its own (recheck is an hour): only A's
// commit, through the database's notification, can end the wait.
func TestAwaitAcrossReplicas(t *testing.T) {
	dsn := pgtest.DSN(t)
	c := &clock{t: time.Now().UTC()}
	a, b := newReplicaEnv(t, dsn, c), newReplicaEnv(t, dsn, c)
	b.svc.recheck = time.Hour
	ref := a.startAndLease(t, tenant)
	in := a.gated(t, ref, "c1")

	got := awaitAsync(b.svc, ref, in.GetInterruptId())
	waitFor(t, "the runtime to wait on B", func() bool { return b.svc.waiters.count() == 1 })
	out, err := a.svc.ResolveInterrupt(ctx, tenant, "alice", approve(in.GetInterruptId()))
	if err != nil {
		t.Fatal(err)
	}
	r := testutil.Within(t, got, "AwaitDecision on B to return A's decision")
	if r.err != nil || r.d.GetType() != agentplanev1.DecisionType_DECISION_TYPE_APPROVE || r.d.GetDecidedBy() != out.GetDecision().GetDecidedBy() {
		t.Fatalf("AwaitDecision on B = %v, %v; want A's approval", r.d, r.err)
	}
}
