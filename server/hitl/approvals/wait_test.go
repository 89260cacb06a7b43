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
	r := testutil.Within(t, awaitAsync(e.svc, ref, id), "AwaitDecision to return at once")
	return r.d, r.err
}

// awaitResult is what AwaitDecision returned.
type awaitResult struct {
	d   *agentplanev1.Decision
	err error
}

// awaitAsync calls AwaitDecision on svc in a goroutine and delivers what it returns.
func awaitAsync(svc *Service, ref *agentplanev1.LeaseRef, id string) <-chan awaitResult {
	got := make(chan awaitResult, 1)
	go func() {
		d, err := awaitDecision(svc, ctx, ref, id)
		got <- awaitResult{d, err}
	}()
	return got
}
