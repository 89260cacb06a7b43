package boltstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/schema"
	"github.com/agentplane/agentplane/server/store/storetest"
)

// holdSyncs makes every later fdatasync of s's log wait for release; entered gets a
// value as each one starts waiting.
func holdSyncs(s *Store) (entered chan struct{}, release func()) {
	entered = make(chan struct{}, 16)
	gate := make(chan struct{})
	s.commitMu.Lock() // beforeSync is read under fileMu (syncTo, checkpoint), set under both
	s.wal.fileMu.Lock()
	s.wal.beforeSync = func() error {
		entered <- struct{}{}
		<-gate
		return nil
	}
	s.wal.fileMu.Unlock()
	s.commitMu.Unlock()
	var once sync.Once
	return entered, func() { once.Do(func() { close(gate) }) }
}

// In the write-ahead log mode a batch is in the file before its record is durable
// (its leader syncs it while the next batch runs): neither its callers nor any reader
// may learn of it until the fdatasync returns.
func TestWALNoOneSeesABatchBeforeItIsDurable(t *testing.T) {
	s := openTempWith(t, Options{WAL: true})
	defer closeWithin(t, s)
	ctx := context.Background()
	entered, release := holdSyncs(s)
	defer release()

	acked := make(chan error, 1)
	go func() {
		acked <- s.Update(ctx, func(w store.Writer) error { return w.PutTask(storetest.Task("acme", "t1", time.Now())) })
	}()
	testutil.Within(t, entered, "the batch's fdatasync to start") // the record is written; its fdatasync is held
	// The batch commits to the file regardless.
	waitFor(t, func() bool {
		var in bool
		_ = s.db.View(func(tx *bolt.Tx) error {
			in = tx.Bucket(schema.Tasks).Get(schema.TaskKey("acme", "t1")) != nil
			return nil
		})
		return in
	})
	read := make(chan error, 1)
	go func() {
		read <- s.View(ctx, func(r store.Reader) error {
			_, err := r.GetTask("acme", "t1")
			return err
		})
	}()
	select {
	case err := <-acked:
		t.Fatalf("Update returned (%v) before its batch was durable", err)
	case err := <-read:
		t.Fatalf("View returned (%v) while a batch it could see was not durable", err)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	if err := testutil.Within(t, acked, "the Update to return after the sync"); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if err := testutil.Within(t, read, "the View to return after the sync"); err != nil {
		t.Fatalf("View after the sync: %v", err)
	}
}

// A failed fdatasync fails the batch it was for, and the store refuses writes and
// reads of what was not made durable until a restart (here: it does not recover by
// itself), which recovers from the log.
func TestWALFailedSyncFailsTheBatchAndLaterWrites(t *testing.T) {
	s := openTempWith(t, Options{WAL: true, RecoverInterval: -1})
	path := s.path
	ctx := context.Background()
	workload(t, s, 0, 3)
	boom := errors.New("injected fdatasync failure")
	s.commitMu.Lock()
	s.wal.fileMu.Lock()
	s.wal.beforeSync = func() error { return boom }
	s.wal.fileMu.Unlock()
	s.commitMu.Unlock()

	put := func(id string) error {
		return s.Update(ctx, func(w store.Writer) error { return w.PutTask(storetest.Task("acme", id, time.Now())) })
	}
	if err := put("lost"); !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want the fdatasync failure", err)
	}
	if err := put("refused"); !errors.Is(err, boom) {
		t.Fatalf("the next Update = %v, want a refusal naming the failure", err)
	}
	if err := s.View(ctx, func(store.Reader) error { return nil }); !errors.Is(err, boom) {
		t.Fatalf("View = %v, want the failure: it could see a batch that is not durable", err)
	}
	if err := s.Close(); err != nil && !errors.Is(err, boom) {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), cleanMarkerName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a store whose log failed left a clean-shutdown marker (stat: %v)", err)
	}
	s = reopen(t, path, Options{WAL: true})
	defer s.Close()
	if err := put("after"); err != nil {
		t.Fatalf("Update after the restart: %v", err)
	}
}

// Commit hooks announce what committed (new events, decisions), so they must run in
// commit order although batches settle concurrently.
func TestCommitHooksRunInCommitOrder(t *testing.T) {
	for _, wal := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "wal"}[wal], func(t *testing.T) {
			s := openTempWith(t, Options{WAL: wal})
			defer closeWithin(t, s)
			ctx := context.Background()
			if err := s.Update(ctx, func(w store.Writer) error {
				return w.PutTask(storetest.Task("acme", "counter", time.Now()))
			}); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var seen []int64
			const callers, each = 32, 20
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					for range each {
						if err := s.Update(ctx, func(w store.Writer) error {
							rec, err := w.GetTask("acme", "counter")
							if err != nil {
								return err
							}
							rec.LastSequence++
							n := rec.LastSequence
							w.OnCommit(func() {
								mu.Lock()
								seen = append(seen, n)
								mu.Unlock()
							})
							return w.PutTask(rec)
						}); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			testutil.Within(t, allDone(&wg), "the concurrent Updates to return")
			if len(seen) != callers*each {
				t.Fatalf("%d hooks ran, want %d", len(seen), callers*each)
			}
			for i, n := range seen {
				if n != int64(i+1) {
					t.Fatalf("hook %d announced update %d: hooks ran out of commit order", i+1, n)
				}
			}
		})
	}
}
