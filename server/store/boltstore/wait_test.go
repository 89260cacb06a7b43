package boltstore

import (
	"sync"
	"testing"
	"time"
)

// waitLimit bounds every wait of these tests on something the store must do (commit,
// sync, hand leadership on): a bug that makes it wait forever fails the test with a
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

// closeWithin closes s for a test that uses within: Close waits for the operations in
// flight, so after a stuck one it would hang the test that just reported it. It gives
// up after waitLimit, leaving the stuck goroutines behind.
func closeWithin(t testing.TB, s *Store) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(waitLimit):
		t.Errorf("Close still waiting after %s for an operation in flight", waitLimit)
	}
}

// allDone is closed once wg's goroutines have all returned.
func allDone(wg *sync.WaitGroup) <-chan struct{} {
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	return ch
}
