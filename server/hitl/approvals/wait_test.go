package approvals

import (
	"testing"
	"time"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// waitLimit bounds every wait of these tests on something the code under test must
// do (end an AwaitDecision): a bug that makes it wait forever fails the test with a
// message instead of hanging until the package timeout.
const waitLimit = 30 * time.Second

// within returns what ch delivers, or fails the test naming what it waited for.
func within[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("%s: still waiting after %s", what, waitLimit)
		panic("unreachable")
	}
}

// await calls AwaitDecision and fails the test if it does not return within
// waitLimit (it is expected to return at once, with a decision or an error).
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
	r := within(t, got, "AwaitDecision to return at once")
	return r.d, r.err
}
