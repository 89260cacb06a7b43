package tasks

import (
	"testing"
	"time"
)

// waitLimit bounds every wait of these tests on something the code under test must
// do (end a Watch, wake a poll): a bug that makes it wait forever fails the test with
// a message instead of hanging until the package timeout.
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
