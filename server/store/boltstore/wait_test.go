package boltstore

import (
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/testutil"
)

// closeWithin closes s for a test that uses within: Close waits for the operations in
// flight, so after a stuck one it would hang the test that just reported it. It gives
// up after testutil.WaitLimit, leaving the stuck goroutines behind.
func closeWithin(t testing.TB, s *Store) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(testutil.WaitLimit):
		t.Errorf("Close still waiting after %s for an operation in flight", testutil.WaitLimit)
	}
}

// allDone is closed once wg's goroutines have all returned.
func allDone(wg *sync.WaitGroup) <-chan struct{} {
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	return ch
}
