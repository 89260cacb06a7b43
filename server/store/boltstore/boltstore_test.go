package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"

	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/storetest"
)

func openTemp(t *testing.T) *Store {
	t.Helper()
	return openTempWith(t, Options{})
}

func openTempWith(t *testing.T, opts Options) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "agentplane.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts Options
	}{{"wal-off", Options{}}, {"wal-on", Options{WAL: true}}} {
		t.Run(mode.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) store.Store { return openTempWith(t, mode.opts) })
		})
	}
}

func TestSecondOpenFailsFast(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentplane.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	_, err = Open(path, Options{OpenTimeout: 100 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Fatalf("error %q does not name the file", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("second Open waited %s", waited)
	}
}

func TestReopenKeepsDataAndTokenKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentplane.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := s.TokenKey()
	if len(key) < 16 {
		t.Fatalf("token key has %d bytes", len(key))
	}
	if err := s.Update(context.Background(), func(w store.Writer) error {
		return w.PutTask(storetest.Task("acme", "t1", time.Now()))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !bytes.Equal(s.TokenKey(), key) {
		t.Fatal("token key changed across reopen")
	}
	if err := s.View(context.Background(), func(r store.Reader) error { _, err := r.GetTask("acme", "t1"); return err }); err != nil {
		t.Fatalf("task lost across reopen: %v", err)
	}
}

func TestOpenRefusesForeignAndNewerFiles(t *testing.T) {
	for name, tc := range map[string]struct {
		prepare func(*bolt.Tx) error
		reason  apierr.Reason
		text    string
	}{
		"newer schema": {
			prepare: func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket(schema.Meta)
				if err != nil {
					return err
				}
				v, _ := proto.Marshal(&storagev1.SchemaInfo{Version: schema.Version + 1, TokenKey: make([]byte, 32)})
				return b.Put(schema.MetaSchemaKey, v)
			},
			reason: apierr.ReasonStoreSchemaMismatch,
			text:   fmt.Sprintf("schema version %d but this binary reads version %d", schema.Version+1, schema.Version),
		},
		"not an agentplane store": {
			prepare: func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("something_else")); return err },
			text:    "not an agentplane store",
		},
		"header without buckets": {
			prepare: func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket(schema.Meta)
				if err != nil {
					return err
				}
				v, _ := proto.Marshal(&storagev1.SchemaInfo{Version: schema.Version, TokenKey: make([]byte, 32)})
				return b.Put(schema.MetaSchemaKey, v)
			},
			text: "lacks bucket",
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agentplane.db")
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(tc.prepare); err != nil {
				t.Fatal(err)
			}
			_ = db.Close()
			s, err := Open(path, Options{})
			if err == nil {
				s.Close()
				t.Fatal("Open accepted the file")
			}
			if tc.reason != 0 && !apierr.HasReason(err, tc.reason) {
				t.Fatalf("Open = %v, want reason %s", err, tc.reason)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Open = %q, want it to say %q", err, tc.text)
			}
		})
	}
}

// TestGroupCommitSharesCommits holds the leader inside its function while others
// queue, then checks that the queued Updates were carried by one commit, that one of
// them failing after writing did not fail the rest, and that a panic stayed contained.
func TestGroupCommitSharesCommits(t *testing.T) {
	s := openTemp(t)
	defer closeWithin(t, s)
	entered, release := make(chan struct{}), make(chan struct{})
	leaderDone := make(chan error, 1)
	go func() {
		leaderDone <- s.Update(context.Background(), func(w store.Writer) error {
			close(entered)
			<-release
			return w.PutTask(storetest.Task("acme", "leader", time.Now()))
		})
	}()
	testutil.Within(t, entered, "the leader's function to run")
	before, _ := s.Stats(context.Background())

	const followers = 20
	errs := make([]error, followers)
	var wg sync.WaitGroup
	for i := range followers {
		wg.Go(func() {
			errs[i] = s.Update(context.Background(), func(w store.Writer) error {
				if err := w.PutTask(storetest.Task("acme", fmt.Sprint("f", i), time.Now())); err != nil {
					return err
				}
				switch i {
				case 5:
					return errors.New("fails after writing")
				case 6:
					panic("broken caller")
				}
				return nil
			})
		})
	}
	// Wait until every follower is queued behind the blocked leader.
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.queue) == followers })
	close(release)
	testutil.Within(t, allDone(&wg), "the queued Updates to return")
	if err := testutil.Within(t, leaderDone, "the leader's Update to return"); err != nil {
		t.Fatal(err)
	}
	after, _ := s.Stats(context.Background())
	if got := after.Commits - before.Commits; got != 2 {
		t.Fatalf("%d commits for 1 leader + %d queued Updates; want 2 (the leader's, then one shared)", got, followers)
	}
	for i, err := range errs {
		failed := i == 5 || i == 6
		if failed != (err != nil) {
			t.Errorf("follower %d: err = %v", i, err)
		}
		if i == 6 && (err == nil || !strings.Contains(err.Error(), "panicked")) {
			t.Errorf("panic became %v", err)
		}
	}
	if n := after.TasksByState[agentplanev1.TaskState_TASK_STATE_SUBMITTED]; n != followers-2+1 {
		t.Fatalf("%d tasks stored, want %d", n, followers-2+1)
	}
}

func TestMaxBatchBoundsACommit(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "agentplane.db"), Options{MaxBatch: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer closeWithin(t, s)
	entered, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = s.Update(context.Background(), func(store.Writer) error { close(entered); <-release; return nil })
	}()
	testutil.Within(t, entered, "the first Update's function to run")
	before, _ := s.Stats(context.Background())
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			if err := s.Update(context.Background(), func(w store.Writer) error {
				return w.PutTask(storetest.Task("acme", fmt.Sprint("t", i), time.Now()))
			}); err != nil {
				t.Error(err)
			}
		})
	}
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.queue) == 10 })
	close(release)
	testutil.Within(t, allDone(&wg), "the queued Updates to return")
	after, _ := s.Stats(context.Background())
	if got := after.Commits - before.Commits; got != 3 {
		t.Fatalf("10 queued Updates with MaxBatch 4 took %d commits, want 3", got)
	}
}

func TestSnapshotIsARestorableStore(t *testing.T) {
	s := openTemp(t)
	defer s.Close()
	if err := s.Update(context.Background(), func(w store.Writer) error {
		if err := w.PutTask(storetest.Task("acme", "t1", time.Now())); err != nil {
			return err
		}
		return w.AppendEvents("acme", "t1", storetest.Event(1, "hello"))
	}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "restored", "agentplane.db")
	if err := os.MkdirAll(filepath.Dir(backup), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(backup)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snap.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Close(), snap.Close()); err != nil {
		t.Fatal(err)
	}
	restored, err := Open(backup, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	if err := restored.Check(context.Background()); err != nil {
		t.Fatalf("restored file fails the consistency check: %v", err)
	}
	if !bytes.Equal(restored.TokenKey(), s.TokenKey()) {
		t.Fatal("a backup must carry the token key, so page tokens survive a restore")
	}
	var text string
	if err := restored.View(context.Background(), func(r store.Reader) error {
		return r.ScanEvents("acme", "t1", 0, func(e *storagev1.EventRecord) (bool, error) {
			text = e.GetEvent().GetNote().GetText()
			return false, nil
		})
	}); err != nil || text != "hello" {
		t.Fatalf("restored event = %q, %v", text, err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

// A writer remembers the task it last found or wrote and the request key it last
// found unused; neither memory may outlive what invalidates it within one function.
func TestWriterLookupMemoryStaysTrue(t *testing.T) {
	s := openTemp(t)
	defer s.Close()
	ctx := context.Background()
	err := s.Update(ctx, func(w store.Writer) error {
		if owner, err := w.TaskForRequest("acme", "r1"); err != nil || owner != "" {
			t.Fatalf("TaskForRequest = %q, %v", owner, err)
		}
		a := storetest.Task("acme", "a", time.Now())
		a.RequestId = "r1"
		if err := w.PutTask(a); err != nil {
			t.Fatalf("PutTask a: %v", err)
		}
		b := storetest.Task("acme", "b", time.Now())
		b.RequestId = "r1"
		if err := w.PutTask(b); apierr.ReasonOf(err) != apierr.ReasonRequestIDReused {
			t.Fatalf("PutTask b with a used request id = %v, want %s", err, apierr.ReasonRequestIDReused)
		}
		if _, err := w.DeleteTask("acme", "a"); err != nil {
			t.Fatal(err)
		}
		if err := w.AppendEvents("acme", "a", storetest.Event(1, "a")); !store.IsNotFound(err) {
			t.Fatalf("AppendEvents to a task deleted in the same function = %v, want NOT_FOUND", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A filtered ScanTasks steps over the tasks its filters exclude without decoding them
// (a nil record, its cursor still given), and decodes those that match: a listing
// with a selective filter reads a few fields of each record, not the whole of it.
func TestScanTasksStepsOverExcludedTasks(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	states := []agentplanev1.TaskState{agentplanev1.TaskState_TASK_STATE_SUBMITTED, agentplanev1.TaskState_TASK_STATE_FAILED}
	if err := s.Update(ctx, func(w store.Writer) error {
		for i := range 6 {
			rec := storetest.Task("acme", fmt.Sprintf("t%d", i), base.Add(time.Duration(i)*time.Second))
			rec.State = states[i%2]
			rec.Labels = map[string]string{"env": []string{"prod", "dev", "prod"}[i%3]}
			if err := w.PutTask(rec); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	scan := func(tr store.TaskRange) (decoded []string, skipped int) {
		t.Helper()
		if err := s.View(ctx, func(r store.Reader) error {
			return r.ScanTasks("acme", tr, func(c []byte, rec *storagev1.TaskRecord) (bool, error) {
				if c == nil {
					t.Error("no cursor")
				}
				if rec == nil {
					skipped++
				} else {
					decoded = append(decoded, rec.GetTaskId())
				}
				return true, nil
			})
		}); err != nil {
			t.Fatal(err)
		}
		return decoded, skipped
	}
	for _, c := range []struct {
		name string
		tr   store.TaskRange
		want string
	}{
		{"state", store.TaskRange{States: []agentplanev1.TaskState{agentplanev1.TaskState_TASK_STATE_FAILED}}, "t5 t3 t1"},
		{"label", store.TaskRange{Labels: map[string]string{"env": "dev"}}, "t4 t1"},
		{"both", store.TaskRange{States: states[1:], Labels: map[string]string{"env": "prod"}}, "t5 t3"},
		{"queue", store.TaskRange{Queue: "elsewhere"}, ""},
		{"default queue", store.TaskRange{Queue: store.DefaultQueue}, "t5 t4 t3 t2 t1 t0"},
	} {
		decoded, skipped := scan(c.tr)
		want := strings.Fields(c.want)
		if got := strings.Join(decoded, " "); got != c.want || skipped != 6-len(want) {
			t.Errorf("%s: decoded %q and stepped over %d, want %q and the other %d", c.name, got, skipped, c.want, 6-len(want))
		}
	}
}
