// Package testutil holds the few helpers that tests of several packages share. It
// imports nothing of this module, so any test may use it.
package testutil

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// WaitLimit bounds every wait of a test on something the code under test must do (end
// a Watch, wake a poll, return from a failed call): a bug that makes it wait forever
// fails the test with a message instead of hanging until the package timeout.
const WaitLimit = 30 * time.Second

// Within returns what ch delivers, or fails the test naming what it waited for.
func Within[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(WaitLimit):
		t.Fatalf("%s: still waiting after %s", what, WaitLimit)
		panic("unreachable")
	}
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers (a process's output, a
// runner's progress) and a reader.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
