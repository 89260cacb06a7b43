package approvals

import (
	"testing"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
)

// await calls AwaitDecision and fails the test if it does not return within
// testutil.WaitLimit (it is expected to return at once, with a decision or an error).
func (e *env) await(t testing.TB, ref *agentplanev1.LeaseRef, id string) (*agentplanev1.Decision, error) {
	t.Helper()
	type result struct {
		d   *agentplanev1.Decision
		err error
	}
	got := make(chan result, 1)
	go func() {
		d, err := awaitDecision(e.svc, ctx, ref, id)
		got <- result{d, err}
	}()
	r := testutil.Within(t, got, "AwaitDecision to return at once")
	return r.d, r.err
}
