package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/pgstore"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
	"github.com/agentplane/agentplane/server/store/storetest"
)

// The writes are READ COMMITTED transactions that lock each task's row before reading
// anything of it (see writer in write.go). These tests run two stores on one database,
// as two replicas would, so that their transactions really overlap (within one store
// concurrent Updates may share a transaction), and check what SERIALIZABLE would have
// guaranteed.

func twoStores(t *testing.T) (a, b *pgstore.Store, dsn string) {
	t.Helper()
	dsn = pgtest.DSN(t)
	a, b = open(t, dsn), open(t, dsn)
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return a, b, dsn
}

// TestReplicasReadModifyWrite: callers on two stores each read a task, append the
// event after its last one and write it back. None is lost and the log has no gap.
func TestReplicasReadModifyWrite(t *testing.T) {
	a, b, _ := twoStores(t)
	ctx := context.Background()
	if err := a.Update(ctx, func(w store.Writer) error { return w.PutTask(storetest.Task("acme", "t1", time.Unix(1, 0))) }); err != nil {
		t.Fatal(err)
	}
	const per = 24
	var wg sync.WaitGroup
	for i := range 2 * per {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			err := s.Update(ctx, func(w store.Writer) error {
				rec, err := w.GetTask("acme", "t1")
				if err != nil {
					return err
				}
				rec.LastSequence++
				if err := w.AppendEvents("acme", "t1", storetest.Event(rec.GetLastSequence(), fmt.Sprint(i))); err != nil {
					return err
				}
				return w.PutTask(rec)
			})
			if err != nil {
				t.Errorf("Update %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	var seqs []int64
	var last int64
	if err := b.View(ctx, func(r store.Reader) error {
		rec, err := r.GetTask("acme", "t1")
		last = rec.GetLastSequence()
		if err != nil {
			return err
		}
		return r.ScanEvents("acme", "t1", 0, func(e *storagev1.EventRecord) (bool, error) {
			seqs = append(seqs, e.GetSequence())
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if last != 2*per || len(seqs) != 2*per {
		t.Fatalf("last_sequence = %d with %d events, want %d of each: updates were lost", last, len(seqs), 2*per)
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("log %v has a gap", seqs)
		}
	}
}

// TestReplicasIdempotentCreate: callers on two stores create a task under one request
// id at once, each with its own task id, as StartTask does. One task is created and
// every caller learns its id.
func TestReplicasIdempotentCreate(t *testing.T) {
	a, b, _ := twoStores(t)
	ctx := context.Background()
	const n = 16
	owners := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			err := s.Update(ctx, func(w store.Writer) error {
				owner, err := w.TaskForRequest("acme", "req-1")
				if err != nil || owner != "" {
					owners[i] = owner
					return err
				}
				rec := storetest.Task("acme", fmt.Sprintf("t%02d", i), time.Unix(int64(i), 0))
				rec.RequestId = "req-1"
				if err := w.PutTask(rec); err != nil {
					return err
				}
				if err := w.AppendEvents("acme", rec.GetTaskId(), storetest.Event(1, "submitted")); err != nil {
					return err
				}
				owners[i] = rec.GetTaskId()
				return nil
			})
			if err != nil {
				t.Errorf("Update %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	for _, o := range owners {
		if o == "" || o != owners[0] {
			t.Fatalf("callers learned different tasks for one request id: %v", owners)
		}
	}
	st, err := a.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.TasksByState[agentplanev1.TaskState_TASK_STATE_SUBMITTED] != 1 || st.Events != 1 {
		t.Fatalf("stats = %+v, want one task with one event", st)
	}
}

// TestRequestReadWithoutInsert: a write is told a request id is free without a read
// (its insert would check), so one that only asks, and inserts nothing, is checked
// before COMMIT: told of a request another store created, it runs again and learns the
// owner. The write that asks also writes, so its transaction commits.
func TestRequestReadWithoutInsert(t *testing.T) {
	a, b, _ := twoStores(t)
	ctx := context.Background()
	rec := storetest.Task("acme", "t1", time.Now())
	rec.RequestId = "req-1"
	if err := a.Update(ctx, func(w store.Writer) error { return w.PutTask(rec) }); err != nil {
		t.Fatal(err)
	}
	var owner string
	if err := b.Update(ctx, func(w store.Writer) error {
		var err error
		if owner, err = w.TaskForRequest("acme", "req-1"); err != nil {
			return err
		}
		return w.PutTask(storetest.Task("acme", "t2", time.Now()))
	}); err != nil {
		t.Fatal(err)
	}
	if owner != "t1" {
		t.Fatalf("TaskForRequest of a request another store created = %q, want t1", owner)
	}
}

// TestReplicasLeaseOnce: leasers on two stores take tasks from one queue at once; each
// task is taken once.
func TestReplicasLeaseOnce(t *testing.T) {
	a, b, _ := twoStores(t)
	ctx := context.Background()
	const n = 24
	if err := a.Update(ctx, func(w store.Writer) error {
		for i := range n {
			rec := storetest.Task("acme", fmt.Sprintf("t%02d", i), time.Unix(int64(i), 0))
			rec.QueueTime = rec.GetCreateTime()
			if err := w.PutTask(rec); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	took := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			err := s.Update(ctx, func(w store.Writer) error {
				took[i] = ""
				var id string
				if err := w.ScanQueue("acme", "", store.IndexRange{}, func(e store.IndexEntry) (bool, error) {
					id = e.ID
					return false, nil
				}); err != nil || id == "" {
					return err
				}
				rec, err := w.GetTask("acme", id)
				if err != nil {
					return err
				}
				if rec.GetQueueTime() == nil {
					return fmt.Errorf("task %s was leased already", id)
				}
				rec.QueueTime = nil
				rec.Lease = &storagev1.LeaseRecord{LeaseId: fmt.Sprint("L", i), Epoch: 1, Deadline: timestamppb.New(time.Unix(1000, 0))}
				took[i] = id
				return w.PutTask(rec)
			})
			if err != nil {
				t.Errorf("lease %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	seen := map[string]int{}
	for _, id := range took {
		seen[id]++
	}
	for i := range n {
		if id := fmt.Sprintf("t%02d", i); seen[id] != 1 {
			t.Errorf("task %s was leased %d times (%v)", id, seen[id], took)
		}
	}
}

// held runs an Update on s that takes task t1 and changes it with change, then holds
// its transaction open until release is closed.
func held(t *testing.T, s *pgstore.Store, change func(w store.Writer, rec *storagev1.TaskRecord) error) (release chan struct{}, done chan error) {
	t.Helper()
	release, done = make(chan struct{}), make(chan error, 1)
	t.Cleanup(func() { // a failed test must not leave the transaction open
		select {
		case <-release:
		default:
			close(release)
		}
	})
	holding := make(chan struct{})
	go func() {
		done <- s.Update(context.Background(), func(w store.Writer) error {
			rec, err := w.GetTask("acme", "t1")
			if err != nil {
				return err
			}
			if err := change(w, rec); err != nil {
				return err
			}
			// A read that sends the writes queued so far: the change is on the server,
			// uncommitted, before the other side looks.
			if _, err := w.GetObligation("acme", "t1", 1); !store.IsNotFound(err) {
				return fmt.Errorf("GetObligation = %v", err)
			}
			close(holding)
			<-release
			return nil
		})
	}()
	testutil.Within(t, holding, "the first transaction to take the task")
	return release, done
}

// TestReplicasLeaseScanSkipsHeld: a writer's scan of due leases leaves out a task
// another writer holds (here renewing its lease): it may act only on what it has
// locked, re-checked in its latest version.
func TestReplicasLeaseScanSkipsHeld(t *testing.T) {
	a, b, _ := twoStores(t)
	ctx := context.Background()
	due := storetest.Task("acme", "t1", time.Unix(1, 0))
	due.Lease = &storagev1.LeaseRecord{LeaseId: "L", Epoch: 1, Deadline: timestamppb.New(time.Unix(10, 0))}
	if err := a.Update(ctx, func(w store.Writer) error { return w.PutTask(due) }); err != nil {
		t.Fatal(err)
	}
	scan := func() (ids []string) {
		if err := b.Update(ctx, func(w store.Writer) error {
			ids = nil
			return w.ScanIndex(store.IndexLeaseDeadlines, "acme", store.IndexRange{Until: time.Unix(100, 0)}, func(e store.IndexEntry) (bool, error) {
				ids = append(ids, e.ID)
				return true, nil
			})
		}); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	if ids := scan(); len(ids) != 1 {
		t.Fatalf("due leases = %v, want t1", ids)
	}
	release, done := held(t, a, func(w store.Writer, rec *storagev1.TaskRecord) error {
		rec.Lease.Deadline = timestamppb.New(time.Unix(1000, 0)) // renewed
		return w.PutTask(rec)
	})
	if ids := scan(); len(ids) != 0 {
		t.Fatalf("a scan returned %v, which another transaction holds", ids)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ids := scan(); len(ids) != 0 {
		t.Fatalf("due leases after the renewal = %v, want none", ids)
	}
}

// TestReplicasInterruptReadWaitsForTask: a writer reading an interrupt whose task
// another writer holds waits for it, and then reads what it wrote: an interrupt is
// read under its task's lock, as everything of a task is.
func TestReplicasInterruptReadWaitsForTask(t *testing.T) {
	a, b, dsn := twoStores(t)
	ctx := context.Background()
	if err := a.Update(ctx, func(w store.Writer) error {
		if err := w.PutTask(storetest.Task("acme", "t1", time.Unix(1, 0))); err != nil {
			return err
		}
		return w.PutInterrupt(storetest.Interrupt("acme", "t1", "i1", time.Unix(2, 0)))
	}); err != nil {
		t.Fatal(err)
	}
	release, done := held(t, a, func(w store.Writer, _ *storagev1.TaskRecord) error {
		in, err := w.GetInterrupt("acme", "i1")
		if err != nil {
			return err
		}
		in.Interrupt.State = agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED
		return w.PutInterrupt(in)
	})
	read := make(chan agentplanev1.InterruptState, 1)
	go func() {
		var state agentplanev1.InterruptState
		err := b.Update(ctx, func(w store.Writer) error {
			in, err := w.GetInterrupt("acme", "i1")
			state = in.GetInterrupt().GetState()
			return err
		})
		if err != nil {
			t.Error(err)
		}
		read <- state
	}()
	// The reader must be waiting on a lock before the holder commits.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	waiting := make(chan struct{})
	go func() {
		for {
			var n int
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&n); err != nil {
				t.Error(err)
				return
			}
			if n > 0 {
				close(waiting)
				return
			}
			select {
			case state := <-read:
				t.Errorf("the interrupt was read (%s) while its task was held", state)
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	testutil.Within(t, waiting, "the reader to wait for the task's lock")
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if state := testutil.Within(t, read, "the interrupt read"); state != agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED {
		t.Fatalf("read %s, want the holder's RESOLVED", state)
	}
}

// TestBatchMateFailsAlone: in one store, concurrent Updates share transactions; one
// whose insert hits a key that exists (a task written without being read, which the
// store takes to be new) fails the shared transaction, runs again alone and
// succeeds, and its batch-mates commit once each.
func TestBatchMateFailsAlone(t *testing.T) {
	s := open(t, pgtest.DSN(t))
	defer s.Close()
	ctx := context.Background()
	existing := storetest.Task("acme", "old", time.Unix(1, 0))
	if err := s.Update(ctx, func(w store.Writer) error { return w.PutTask(existing) }); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 32)
	runs := make([]int, 32)
	hooks := make([]int, 32)
	var mu sync.Mutex
	for i := range errs {
		wg.Go(func() {
			errs[i] = s.Update(ctx, func(w store.Writer) error {
				mu.Lock()
				runs[i]++
				mu.Unlock()
				rec := storetest.Task("acme", fmt.Sprintf("t%02d", i), time.Unix(int64(i), 0))
				if i == 7 {
					rec = existing
					rec.SessionId = "rewritten"
				}
				w.OnCommit(func() { mu.Lock(); hooks[i]++; mu.Unlock() })
				return w.PutTask(rec)
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil || hooks[i] != 1 {
			t.Errorf("Update %d = %v with %d hooks run", i, err, hooks[i])
		}
	}
	if err := s.View(ctx, func(r store.Reader) error {
		rec, err := r.GetTask("acme", "old")
		if err == nil && rec.GetSessionId() != "rewritten" {
			err = errors.New("the rewrite of an existing task was lost")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.TasksByState[agentplanev1.TaskState_TASK_STATE_SUBMITTED] != 32 {
		t.Fatalf("stats = %+v, want 32 tasks (the rewritten one and 31 new)", st)
	}
	t.Logf("%d commits carried %d updates; update 7 ran %d times", st.Commits, st.Updates, runs[7])
}

// TestReplicasBudgetAdds adds to one budget count from two stores on one database at
// once: the row lock makes the adds one after the other, none lost, and one
// transaction alone sees the threshold crossed.
func TestReplicasBudgetAdds(t *testing.T) {
	a, b, _ := twoStores(t)
	storetest.BudgetConcurrentAdds(t, []store.Store{a, b})
}
