package pgstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
	"github.com/agentplane/agentplane/server/store/storetest"
)

// An Update that queued while every writer was busy runs when the busy one ends,
// also when it is the only one queued: nothing else arrives to take it.
//
// Mutant: lead handing the slot on only when more than one call is queued (the one
// queued call then waited for ever).
func TestQueuedUpdateRunsWhenTheWriterFrees(t *testing.T) {
	// Closed only at the end: Close waits for Updates, and a failure here leaves one stuck.
	s, first, release := holdTheWriter(t)
	second := make(chan error, 1)
	go func() { second <- s.Update(context.Background(), func(store.Writer) error { return nil }) }()
	s.waitQueued(t, 1)
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

// holdTheWriter opens a store with one writer and starts an Update that holds it
// until release is closed; first is that Update's result.
func holdTheWriter(t *testing.T) (s *Store, first chan error, release chan struct{}) {
	t.Helper()
	s, err := Open(context.Background(), pgtest.DSN(t), Options{MaxConns: 4, Writers: 1})
	if err != nil {
		t.Fatal(err)
	}
	release, first = make(chan struct{}), make(chan error, 1)
	go func() {
		first <- s.Update(context.Background(), func(store.Writer) error { <-release; return nil })
	}()
	s.waitFor(t, "the first Update to hold the writer", func() bool { return s.running == 1 })
	return s, first, release
}

func (s *Store) waitQueued(t *testing.T, n int) {
	t.Helper()
	s.waitFor(t, "Updates to queue", func() bool { return len(s.queue) == n })
}

// waitFor polls cond, under qmu, until it holds.
func (s *Store) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(testutil.WaitLimit); ; time.Sleep(time.Millisecond) {
		s.qmu.Lock()
		ok := cond()
		s.qmu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after %s", what, testutil.WaitLimit)
		}
	}
}

// A batch's statements run until every caller in it has given up: one caller whose
// context ends during the batch does not fail its batch-mate's write.
//
// Mutants: batchContext using the first caller's context for a batch of several, or
// ending the batch when the first caller gives up.
func TestCallerGivingUpDoesNotFailItsBatchMate(t *testing.T) {
	s, first, release := holdTheWriter(t)
	quitter, quit := context.WithCancel(context.Background())
	defer quit()
	results := make(chan error, 2)
	go func() {
		results <- s.Update(quitter, func(store.Writer) error { quit(); return nil })
	}()
	s.waitQueued(t, 1)
	mate := make(chan error, 1)
	go func() {
		mate <- s.Update(context.Background(), func(w store.Writer) error {
			return w.PutTask(storetest.Task("acme", "t1", time.Now()))
		})
	}()
	s.waitQueued(t, 2)
	close(release)
	if err := testutil.Within(t, first, "the first Update"); err != nil {
		t.Fatal(err)
	}
	if err := testutil.Within(t, mate, "the batch-mate's Update"); err != nil {
		t.Fatalf("the batch-mate's write failed when the other caller gave up: %v", err)
	}
	testutil.Within(t, results, "the caller that gave up")
	if err := s.View(context.Background(), func(r store.Reader) error { _, err := r.GetTask("acme", "t1"); return err }); err != nil {
		t.Fatalf("the batch-mate's write is not there: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// An Update whose own statement fails for a reason worth retrying, every time, is run
// again alone exactly MaxRetries times and then fails with that error: it does not
// retry for ever. A trigger makes every insert into tasks fail with
// serialization_failure (40001), which retryable takes as worth another try.
//
// Mutants: runAlone without its retry bound (the Update retried until its context
// ended), or counting its attempts from 2 (one retry fewer than MaxRetries).
func TestPersistentRetryableFailureIsBounded(t *testing.T) {
	const retries = 3
	dsn := pgtest.DSN(t)
	s, err := Open(context.Background(), dsn, Options{MaxConns: 4, MaxRetries: retries})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `
		CREATE FUNCTION always_serialization_failure() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'forced by the test' USING ERRCODE = '40001'; END $$;
		CREATE TRIGGER always_serialization_failure BEFORE INSERT ON tasks
			FOR EACH ROW EXECUTE FUNCTION always_serialization_failure();`); err != nil {
		t.Fatal(err)
	}
	// The bound of the test, far beyond the retries' few milliseconds of backoff: an
	// Update without its bound ends here, with the context's error.
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitLimit)
	defer cancel()
	err = s.Update(ctx, func(w store.Writer) error { return w.PutTask(storetest.Task("acme", "t1", time.Now())) })
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "40001" {
		t.Fatalf("Update = %v, want the serialization failure once the retries are spent", err)
	}
	if n := s.retried.Load(); n != retries {
		t.Fatalf("the Update ran again alone %d times, want MaxRetries = %d", n, retries)
	}
}

// A batch's one-row inserts go to the server merged, one statement per table; when one
// row of a merged statement is refused (here a request id another write took), the
// batch runs again unmerged, which finds the row's owner: only that call fails, its
// batch-mates commit.
//
// Mutant: a merged statement's failure blamed on no one (every call in the batch
// failed UNAVAILABLE).
func TestMergedInsertFailureFindsItsOwner(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.DSN(t), Options{MaxConns: 4, Writers: 1})
	if err != nil {
		t.Fatal(err)
	}
	start := func(id, req string) func(store.Writer) error {
		return func(w store.Writer) error {
			rec := storetest.Task("acme", id, time.Now())
			rec.RequestId = req
			if err := w.PutTask(rec); err != nil {
				return err
			}
			return w.AppendEvents("acme", id, storetest.Event(1, "submitted"))
		}
	}
	if err := s.Update(ctx, start("t0", "req-taken")); err != nil {
		t.Fatal(err)
	}
	release, first := make(chan struct{}), make(chan error, 1)
	go func() { first <- s.Update(ctx, func(store.Writer) error { <-release; return nil }) }()
	s.waitFor(t, "the first Update to hold the writer", func() bool { return s.running == 1 })
	results := make([]chan error, 3)
	for i, req := range []string{"req-1", "req-taken", "req-2"} {
		results[i] = make(chan error, 1)
		go func() { results[i] <- s.Update(ctx, start(fmt.Sprintf("t%d", i+1), req)) }()
		s.waitQueued(t, i+1)
	}
	close(release)
	if err := testutil.Within(t, first, "the first Update"); err != nil {
		t.Fatal(err)
	}
	for i, ch := range results {
		err := testutil.Within(t, ch, "a queued Update")
		if i == 1 {
			if apierr.ReasonOf(err) != apierr.ReasonRequestIDReused {
				t.Fatalf("the start with a taken request id = %v, want REQUEST_ID_REUSED", err)
			}
		} else if err != nil {
			t.Fatalf("start %d, batched with the refused one: %v", i+1, err)
		}
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Events != 3 {
		t.Fatalf("%d events stored, want 3 (t0, t1, t3)", st.Events)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
