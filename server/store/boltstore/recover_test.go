package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/storetest"
)

// healthLog records what OnHealth was told, in order.
type healthLog struct {
	mu  sync.Mutex
	got []error
}

func (h *healthLog) on(err error) {
	h.mu.Lock()
	h.got = append(h.got, err)
	h.mu.Unlock()
}

func (h *healthLog) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprint(h.got)
}

// failedThenRecovered says whether OnHealth heard of one failure, then of recovery.
func (h *healthLog) failedThenRecovered() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.got) == 2 && h.got[0] != nil && h.got[1] == nil
}

func wantUnavailable(t *testing.T, what string, err error) {
	t.Helper()
	var e *apierr.Error
	if !errors.As(err, &e) || e.Code != codes.Unavailable || e.Reason != apierr.ReasonStoreUnavailable {
		t.Fatalf("%s = %v, want UNAVAILABLE %s", what, err, apierr.ReasonStoreUnavailable)
	}
}

func putTask(s *Store, id string) error {
	return s.Update(context.Background(), func(w store.Writer) error {
		return w.PutTask(storetest.Task("acme", id, time.Unix(1_700_000_000, 0)))
	})
}

func hasTask(t *testing.T, s *Store, id string) bool {
	t.Helper()
	var found bool
	err := s.View(context.Background(), func(r store.Reader) error {
		_, err := r.GetTask("acme", id)
		found = err == nil
		if store.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	return found
}

// After a failed fdatasync the store refuses every call with UNAVAILABLE
// (STORE_UNAVAILABLE) while the disk refuses a probe, then recovers by itself from
// what an fdatasync confirmed: the batch whose sync failed is gone (its caller was
// told so), everything acknowledged is there, and writes work again, across a
// restart too.
func TestWALFailedSyncRecoversFromWhatIsOnDisk(t *testing.T) {
	var health healthLog
	var diskBack atomic.Bool
	s := openTempWith(t, Options{WAL: true, RecoverInterval: time.Millisecond, OnHealth: health.on})
	s.failure.beforeProbe = func() error {
		if !diskBack.Load() {
			return errors.New("injected: the disk still refuses writes")
		}
		return nil
	}
	path := s.path
	workload(t, s, 0, 3)
	before := dump(t, s)
	boom := errors.New("injected fdatasync failure")
	s.commitMu.Lock()
	s.wal.fileMu.Lock()
	s.wal.beforeSync = func() error { return boom }
	s.wal.fileMu.Unlock()
	s.commitMu.Unlock()

	err := putTask(s, "lost")
	wantUnavailable(t, "the Update whose fdatasync failed", err)
	if !errors.Is(err, boom) {
		t.Fatalf("the refusal %v does not keep its cause", err)
	}
	wantUnavailable(t, "Health", s.Health())
	wantUnavailable(t, "the next Update", putTask(s, "refused"))
	wantUnavailable(t, "View", s.View(context.Background(), func(store.Reader) error { return nil }))
	if _, err := s.Stats(context.Background()); err == nil {
		t.Fatal("Stats of a failed store succeeded")
	}

	diskBack.Store(true)
	waitFor(t, func() bool { return s.Health() == nil })
	if !health.failedThenRecovered() {
		t.Fatalf("OnHealth heard %v, want a failure then nil", health.String())
	}
	if got := dump(t, s); got != before {
		t.Fatal("the recovered store is not what was acknowledged before the failure")
	}
	if err := putTask(s, "after"); err != nil {
		t.Fatalf("Update after the recovery: %v", err)
	}
	if err := s.Check(context.Background()); err != nil {
		t.Fatalf("consistency check after the recovery: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close after the recovery: %v", err)
	}
	s = reopen(t, path, Options{WAL: true})
	defer s.Close()
	if hasTask(t, s, "lost") || !hasTask(t, s, "after") {
		t.Fatal("after a restart: want the task written after the recovery and not the one whose sync failed")
	}
}

// A store on a file system that runs out of space refuses writes (and every other
// call) with UNAVAILABLE (STORE_UNAVAILABLE), reports it through Health, and, once
// space is freed, recovers by itself with every acknowledged write, in both modes.
func TestDiskFullRefusesThenRecovers(t *testing.T) {
	for _, tc := range []struct {
		name string
		wal  bool
		// big makes the writes on the full disk one batch larger than the zeros
		// written ahead in the log, so that the log append is what fails.
		big bool
	}{
		{"default", false, false},
		{"wal, the commit fails", true, false},
		{"wal, the log append fails", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := storetest.SmallDisk(t, 24<<20)
			var health healthLog
			path := filepath.Join(dir, "agentplane.db")
			s, err := Open(path, Options{WAL: tc.wal, RecoverInterval: 5 * time.Millisecond, OnHealth: health.on})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var acked []string
			for i := range 20 {
				id := fmt.Sprintf("early-%d", i)
				if err := putTask(s, id); err != nil {
					t.Fatal(err)
				}
				acked = append(acked, id)
			}

			filler := storetest.FillDisk(t, dir)
			var refused error
			for i := 0; i < 20000 && refused == nil; i++ {
				id := fmt.Sprintf("full-%d", i)
				if tc.big {
					refused = s.Update(context.Background(), func(w store.Writer) error {
						for j := range 100 {
							rec := storetest.Task("acme", fmt.Sprintf("%s-%d", id, j), time.Unix(1_700_000_000, 0))
							rec.Labels = map[string]string{"blob": strings.Repeat("x", 60<<10)}
							if err := w.PutTask(rec); err != nil {
								return err
							}
						}
						return nil
					})
				} else {
					refused = putTask(s, id)
				}
				if refused == nil && tc.big {
					acked = append(acked, id+"-99")
				} else if refused == nil {
					acked = append(acked, id)
				}
			}
			wantUnavailable(t, "an Update on a full disk", refused)
			wantUnavailable(t, "Health", s.Health())
			wantUnavailable(t, "the next Update", putTask(s, "refused"))
			wantUnavailable(t, "View", s.View(context.Background(), func(store.Reader) error { return nil }))

			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return s.Health() == nil })
			if !health.failedThenRecovered() {
				t.Fatalf("OnHealth heard %v, want a failure then nil", health.String())
			}
			for _, id := range acked {
				if !hasTask(t, s, id) {
					t.Fatalf("acknowledged task %s is missing after the recovery", id)
				}
			}
			if err := putTask(s, "after"); err != nil {
				t.Fatalf("Update after the recovery: %v", err)
			}
			if err := s.Check(context.Background()); err != nil {
				t.Fatalf("consistency check after the recovery: %v", err)
			}
			t.Logf("%d writes acknowledged, the first refusal: %v", len(acked), refused)
		})
	}
}

// A recovery that fails after it closed the file (here: the checkpoint it restores is
// missing) leaves the store refusing every call and is tried again; once it can
// succeed the store serves what was acknowledged. A store closed in that state closes
// cleanly, and opening it again recovers the same way.
func TestFailedRecoveryIsRetried(t *testing.T) {
	for _, closeWhileDown := range []bool{false, true} {
		t.Run(map[bool]string{false: "retried", true: "closed while down"}[closeWhileDown], func(t *testing.T) {
			var health healthLog
			s := openTempWith(t, Options{WAL: true, RecoverInterval: time.Millisecond, OnHealth: health.on})
			path := s.path
			workload(t, s, 0, 3)
			before := dump(t, s)
			ckpt := filepath.Join(filepath.Dir(path), checkpointName)
			if err := os.Rename(ckpt, ckpt+".away"); err != nil {
				t.Fatal(err)
			}
			s.commitMu.Lock()
			s.wal.fileMu.Lock()
			s.wal.beforeSync = func() error { return errors.New("injected fdatasync failure") }
			s.wal.fileMu.Unlock()
			s.commitMu.Unlock()
			wantUnavailable(t, "the Update whose fdatasync failed", putTask(s, "lost"))
			waitFor(t, func() bool {
				s.closeMu.RLock()
				defer s.closeMu.RUnlock()
				return s.db == nil // a recovery closed the file and could not reopen it
			})
			wantUnavailable(t, "an Update while the file is closed", putTask(s, "refused"))
			wantUnavailable(t, "Health while the file is closed", s.Health())

			if closeWhileDown {
				if err := s.Close(); err != nil {
					t.Fatalf("Close while the file is closed: %v", err)
				}
				if _, err := Open(path, Options{WAL: true}); err == nil || !strings.Contains(err.Error(), "no checkpoint") {
					t.Fatalf("Open without the checkpoint = %v, want the missing checkpoint named", err)
				}
			}
			if err := os.Rename(ckpt+".away", ckpt); err != nil {
				t.Fatal(err)
			}
			if closeWhileDown {
				s = reopen(t, path, Options{WAL: true})
			} else {
				waitFor(t, func() bool { return s.Health() == nil })
				if !health.failedThenRecovered() {
					t.Fatalf("OnHealth heard %v, want a failure then nil", health.String())
				}
			}
			defer s.Close()
			if got := dump(t, s); got != before {
				t.Fatal("the recovered store is not what was acknowledged before the failure")
			}
			if err := putTask(s, "after"); err != nil {
				t.Fatalf("Update after the recovery: %v", err)
			}
		})
	}
}

// Many writers in flight when the disk fills (batches committing while earlier ones
// sync): every write acknowledged before or after the failure is there once the store
// has recovered, and the file is consistent.
func TestDiskFullUnderConcurrentWriters(t *testing.T) {
	for _, wal := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "wal"}[wal], func(t *testing.T) {
			dir := storetest.SmallDisk(t, 24<<20)
			s, err := Open(filepath.Join(dir, "agentplane.db"), Options{WAL: wal, RecoverInterval: 5 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// Leave room for a few hundred commits (and the log's zeros written ahead),
			// so that the disk fills while the writers run.
			room := int64(256 << 10)
			if wal {
				room += walChunk + int64(len(zeros))
			}
			filler := storetest.FillDisk(t, dir)
			fi, err := os.Stat(filler)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(filler, fi.Size()-room); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var acked []string
			var wg sync.WaitGroup
			for w := range 16 {
				wg.Go(func() {
					for i := range 5000 {
						id := fmt.Sprintf("w%02d-%04d", w, i)
						if err := putTask(s, id); err != nil {
							var e *apierr.Error
							if !errors.As(err, &e) || e.Reason != apierr.ReasonStoreUnavailable {
								t.Errorf("writer %d: %v, want %s", w, err, apierr.ReasonStoreUnavailable)
							}
							return
						}
						mu.Lock()
						acked = append(acked, id)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			wantUnavailable(t, "Health after the writers stopped", s.Health())
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return s.Health() == nil })
			for _, id := range acked {
				if !hasTask(t, s, id) {
					t.Fatalf("acknowledged task %s is missing after the recovery", id)
				}
			}
			if err := s.Check(context.Background()); err != nil {
				t.Fatalf("consistency check after the recovery: %v", err)
			}
			if len(acked) == 0 {
				t.Fatal("no write went through before the disk was full: the test tests nothing")
			}
			t.Logf("%d writes acknowledged by 16 writers before the disk was full", len(acked))
		})
	}
}
