package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
)

// An Update that queued while every writer was busy runs when the busy one ends,
// also when it is the only one queued: nothing else arrives to take it.
//
// Mutant: lead handing the slot on only when more than one call is queued (the one
// queued call then waited for ever).
func TestQueuedUpdateRunsWhenTheWriterFrees(t *testing.T) {
	s, err := Open(context.Background(), pgtest.DSN(t), Options{MaxConns: 4, Writers: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Closed only at the end: Close waits for Updates, and a failure here leaves one stuck.
	release := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- s.Update(context.Background(), func(store.Writer) error { <-release; return nil })
	}()
	queued := func() int {
		s.qmu.Lock()
		defer s.qmu.Unlock()
		return len(s.queue)
	}
	// The first Update holds the only writer once it is running.
	for deadline := time.Now().Add(testutil.WaitLimit); ; time.Sleep(time.Millisecond) {
		s.qmu.Lock()
		busy := s.running == 1
		s.qmu.Unlock()
		if busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first Update never ran")
		}
	}
	second := make(chan error, 1)
	go func() { second <- s.Update(context.Background(), func(store.Writer) error { return nil }) }()
	for deadline := time.Now().Add(testutil.WaitLimit); queued() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second Update never queued")
		}
	}
	close(release)
	if err := testutil.Within(t, first, "the first Update"); err != nil {
		t.Fatal(err)
	}
	if err := testutil.Within(t, second, "the queued Update to run once the writer was free"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
