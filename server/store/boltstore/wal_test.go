package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/storetest"
)

// crashClose closes s the way a SIGKILL would leave it: no final checkpoint, no clean
// marker; then it wipes the store file, so that reopening can only succeed by
// rebuilding it from the checkpoint and the log (an OS crash may leave the file of
// fsync-less commits torn in any way).
func crashClose(t *testing.T, s *Store) {
	t.Helper()
	s.closeMu.Lock()
	s.closed = true
	close(s.wal.stop)
	<-s.wal.done
	err := errors.Join(s.wal.log.close(), s.db.Close(), s.wal.lock.Close())
	s.closeMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.path, []byte("torn"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// workload writes n rounds touching every kind of record, index and counter,
// including deletes (cursor deletes of a task's children, counters back to zero).
func workload(t *testing.T, s *Store, round, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		id := fmt.Sprintf("t%d-%03d", round, i)
		created := time.Unix(1_700_000_000+int64(round*1000+i), 0)
		if err := s.Update(ctx, func(w store.Writer) error {
			rec := storetest.Task("acme", id, created)
			rec.RequestId = "req-" + id
			rec.LastSequence = 2
			if err := w.PutTask(rec); err != nil {
				return err
			}
			if err := w.AppendEvents("acme", id, storetest.Event(1, id), storetest.Event(2, id)); err != nil {
				return err
			}
			return w.PutInterrupt(storetest.Interrupt("acme", id, "i-"+id, created))
		}); err != nil {
			t.Fatal(err)
		}
		switch i % 3 {
		case 1:
			if err := s.Update(ctx, func(w store.Writer) error {
				_, err := w.DeleteTask("acme", id)
				return err
			}); err != nil {
				t.Fatal(err)
			}
		case 2:
			if err := s.Update(ctx, func(w store.Writer) error {
				rec, err := w.GetTask("acme", id)
				if err != nil {
					return err
				}
				rec.State = agentplanev1.TaskState_TASK_STATE_WORKING
				return w.PutTask(rec)
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// dump is every key and value of every bucket, for comparing files exactly.
func dump(t *testing.T, s *Store) string {
	t.Helper()
	var b strings.Builder
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
			return bk.ForEach(func(k, v []byte) error {
				fmt.Fprintf(&b, "%q %x=%x\n", name, k, v)
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func reopen(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if err := s.Check(context.Background()); err != nil {
		t.Fatalf("consistency check after reopen: %v", err)
	}
	return s
}

func segments(t *testing.T, s *Store) []uint64 {
	t.Helper()
	seqs, err := listSegments(filepath.Join(filepath.Dir(s.path), walDirName))
	if err != nil {
		t.Fatal(err)
	}
	return seqs
}

func TestWALRecoversAfterUncleanClose(t *testing.T) {
	walOn := Options{WAL: true}
	for _, tc := range []struct {
		name string
		// between runs after the first workload, before the second.
		between func(t *testing.T, s *Store)
	}{
		{"log only", func(*testing.T, *Store) {}},
		{"checkpoint then more writes", func(t *testing.T, s *Store) {
			before := segments(t, s)
			if err := s.checkpoint(); err != nil {
				t.Fatal(err)
			}
			if after := segments(t, s); len(after) != 1 || after[0] <= before[len(before)-1] {
				t.Fatalf("segments %v after a checkpoint, were %v: covered ones must go", after, before)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTempWith(t, walOn)
			path := s.path
			workload(t, s, 0, 12)
			tc.between(t, s)
			workload(t, s, 1, 12)
			want := dump(t, s)
			token := s.TokenKey()
			crashClose(t, s)

			s = reopen(t, path, walOn)
			if got := dump(t, s); got != want {
				t.Fatalf("recovered store differs from the one acknowledged:\ngot:\n%s\nwant:\n%s", got, want)
			}
			if !bytes.Equal(s.TokenKey(), token) {
				t.Fatal("token key changed across recovery")
			}
			// And again, after more writes on the recovered store.
			workload(t, s, 2, 6)
			want = dump(t, s)
			crashClose(t, s)
			s = reopen(t, path, walOn)
			if got := dump(t, s); got != want {
				t.Fatal("second recovery differs from the acknowledged state")
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestWALCleanCloseTrustsTheFile(t *testing.T) {
	s := openTempWith(t, Options{WAL: true})
	path := s.path
	workload(t, s, 0, 6)
	want := dump(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), cleanMarkerName)); err != nil {
		t.Fatalf("clean close left no marker: %v", err)
	}
	s = reopen(t, path, Options{WAL: true})
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), cleanMarkerName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("open must remove the clean marker (stat: %v)", err)
	}
	if got := dump(t, s); got != want {
		t.Fatal("store differs after a clean close and reopen")
	}
	workload(t, s, 1, 6)
	want = dump(t, s)
	crashClose(t, s)
	s = reopen(t, path, Options{WAL: true})
	defer s.Close()
	if got := dump(t, s); got != want {
		t.Fatal("recovery after a clean restart lost writes")
	}
}

func TestWALOffReplaysAndRemovesTheLog(t *testing.T) {
	s := openTempWith(t, Options{WAL: true})
	path, dir := s.path, filepath.Dir(s.path)
	workload(t, s, 0, 9)
	want := dump(t, s)
	crashClose(t, s)
	s = reopen(t, path, Options{})
	defer s.Close()
	if got := dump(t, s); got != want {
		t.Fatal("opening without the log mode lost the log's writes")
	}
	for _, name := range []string{walDirName, checkpointName, cleanMarkerName} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after switching the log mode off (stat: %v)", name, err)
		}
	}
}

// lastSegment returns the path of the newest log segment.
func lastSegment(t *testing.T, s *Store) string {
	t.Helper()
	seqs := segments(t, s)
	return filepath.Join(filepath.Dir(s.path), walDirName, segmentName(seqs[len(seqs)-1]))
}

func TestWALTornTailIsSkipped(t *testing.T) {
	for _, tc := range []struct {
		name string
		// tear damages the log's last record (of size n at offset off), or appends a
		// partial one.
		tear func(data []byte, off, n int) []byte
		// lost says whether the last acknowledged batch is gone (its record damaged).
		lost bool
	}{
		{"partial header", func(d []byte, _, _ int) []byte { return append(d, 0x10, 0, 0) }, false},
		{"partial record", func(d []byte, _, _ int) []byte { return append(d, 100, 0, 0, 0, 1, 2, 3, 4, 5, 6) }, false},
		{"zeros", func(d []byte, _, _ int) []byte { return append(d, make([]byte, 4096)...) }, false},
		{"record cut short", func(d []byte, off, n int) []byte { return d[:off+n-3] }, true},
		{"checksum mismatch", func(d []byte, off, n int) []byte { d[off+n-1] ^= 0xff; return d }, true},
	} {
		// The log is written ahead with zeros (walChunk); a tear is checked both as
		// the file leaves it (zeros after) and cut at the tear.
		for _, padded := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/padded=%v", tc.name, padded), func(t *testing.T) {
				s := openTempWith(t, Options{WAL: true})
				path := s.path
				workload(t, s, 0, 3)
				before := dump(t, s)
				off := s.wal.log.off
				if err := s.Update(context.Background(), func(w store.Writer) error {
					return w.PutTask(storetest.Task("acme", "last", time.Now()))
				}); err != nil {
					t.Fatal(err)
				}
				n := int(s.wal.log.off - off)
				after := dump(t, s)
				seg := lastSegment(t, s)
				crashClose(t, s)
				data, err := os.ReadFile(seg)
				if err != nil {
					t.Fatal(err)
				}
				if !allZero(data[int(off)+n:]) {
					t.Fatal("the log holds something after its last record")
				}
				torn := tc.tear(slices.Clone(data[:int(off)+n]), int(off), n)
				if padded {
					torn = append(torn, make([]byte, max(0, len(data)-len(torn)))...)
				}
				if err := os.WriteFile(seg, torn, 0o600); err != nil {
					t.Fatal(err)
				}
				s = reopen(t, path, Options{WAL: true})
				defer s.Close()
				want := after
				if tc.lost {
					want = before
				}
				if got := dump(t, s); got != want {
					t.Fatalf("recovered state is wrong (last batch lost: want %v)", tc.lost)
				}
			})
		}
	}
}

func TestWALCorruptMiddleRecordRefusesToOpen(t *testing.T) {
	s := openTempWith(t, Options{WAL: true})
	path := s.path
	workload(t, s, 0, 6)
	seg := lastSegment(t, s)
	crashClose(t, s)
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	data[walHeader+2] ^= 0xff // inside the first record's payload
	if err := os.WriteFile(seg, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(path, Options{WAL: true})
	if !errors.Is(err, errCorruptWAL) || !strings.Contains(err.Error(), seg) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("Open = %v, want a corrupt-log error naming %s", err, seg)
	}
	// Refusing must not have consumed the log: it still refuses.
	if _, err := Open(path, Options{WAL: true}); !errors.Is(err, errCorruptWAL) {
		t.Fatalf("second Open = %v, want the same refusal", err)
	}
}

// A checkpoint starts in the background once the log holds CheckpointBytes, or an
// eighth of the store if that is more (a checkpoint copies the whole store).
func TestWALCheckpointsInTheBackground(t *testing.T) {
	s := openTempWith(t, Options{WAL: true, CheckpointBytes: 1, CheckpointInterval: time.Hour})
	defer s.Close()
	first := segments(t, s)[0]
	putBulk(t, s, "bulk", 400, 4000) // far more log than an eighth of the store
	waitFor(t, func() bool { st, _ := s.Stats(context.Background()); return st.Checkpoints == 1 })
	if seqs := segments(t, s); seqs[0] <= first {
		t.Fatalf("segments %v after a checkpoint: the first one (%d) is still there", seqs, first)
	}
	before, _ := s.Stats(context.Background())
	putBulk(t, s, "small", 1, 100) // more than CheckpointBytes, less than an eighth
	time.Sleep(200 * time.Millisecond)
	if st, _ := s.Stats(context.Background()); st.Checkpoints != before.Checkpoints {
		t.Fatalf("a log of %d bytes on a %d-byte store started a checkpoint", st.LogBytes, st.SizeBytes)
	}
	putBulk(t, s, "more", 100, 4000)
	waitFor(t, func() bool { st, _ := s.Stats(context.Background()); return st.Checkpoints > before.Checkpoints })
}

// putBulk writes n tasks with a label of labelBytes each, in one Update.
func putBulk(t *testing.T, s *Store, prefix string, n, labelBytes int) {
	t.Helper()
	if err := s.Update(context.Background(), func(w store.Writer) error {
		for i := range n {
			rec := storetest.Task("acme", fmt.Sprintf("%s-%04d", prefix, i), time.Now())
			rec.Labels = map[string]string{"blob": strings.Repeat("x", labelBytes)}
			if err := w.PutTask(rec); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestWALSecondOpenFailsFast(t *testing.T) {
	s := openTempWith(t, Options{WAL: true})
	defer s.Close()
	for _, opts := range []Options{{WAL: true}, {}} {
		opts.OpenTimeout = 50 * time.Millisecond
		if _, err := Open(s.path, opts); !errors.Is(err, ErrLocked) {
			t.Fatalf("second Open (WAL %v) = %v, want ErrLocked", opts.WAL, err)
		}
	}
	workload(t, s, 0, 2) // and the first is unharmed
}

// A recovery that crashed after starting its new segment but before deleting the old
// ones leaves the torn tail in a segment that is no longer the last: the empty (or
// zero-filled) segments after it do not make the tear corruption.
func TestWALTornTailBeforeAnEmptySegment(t *testing.T) {
	s := openTempWith(t, Options{WAL: true})
	path := s.path
	workload(t, s, 0, 3)
	want := dump(t, s)
	seg := lastSegment(t, s)
	seqs := segments(t, s)
	crashClose(t, s)
	f, err := os.OpenFile(seg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{100, 0, 0, 0, 1, 2, 3}, s.wal.log.off); err != nil { // a torn append
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(filepath.Dir(path), walDirName)
	next := seqs[len(seqs)-1] + 1
	if err := os.WriteFile(filepath.Join(dir, segmentName(next)), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, segmentName(next+1)), make([]byte, 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, path, Options{WAL: true})
	defer s.Close()
	if got := dump(t, s); got != want {
		t.Fatal("recovered state is wrong")
	}
}

// The periodic checkpoint copies the whole store, so it waits until the log holds at
// least 1/checkpointRatio of the store's size; Stats says what the log holds and how
// many checkpoints ran.
func TestWALPeriodicCheckpointWaitsForEnoughLog(t *testing.T) {
	s := openTempWith(t, Options{WAL: true, CheckpointInterval: 10 * time.Millisecond, CheckpointBytes: 1 << 40})
	defer s.Close()
	ctx := context.Background()
	putTasks := func(prefix string, n, labelBytes int) { t.Helper(); putBulk(t, s, prefix, n, labelBytes) }
	stats := func() store.Stats {
		t.Helper()
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	putTasks("bulk", 400, 4000) // a large log on a small store: checkpointed at the next tick
	waitFor(t, func() bool { st := stats(); return st.Checkpoints >= 1 && st.LogBytes == 0 })
	before := stats()

	putTasks("small", 1, 100) // far less than 1/64 of the store
	time.Sleep(200 * time.Millisecond)
	if st := stats(); st.Checkpoints != before.Checkpoints || st.LogBytes == 0 {
		t.Fatalf("a log of %d bytes on a %d-byte store was checkpointed (%d checkpoints, %d before)",
			st.LogBytes, st.SizeBytes, st.Checkpoints, before.Checkpoints)
	}
	putTasks("more", 40, 4000)
	waitFor(t, func() bool { st := stats(); return st.Checkpoints > before.Checkpoints && st.LogBytes == 0 })
	if st := stats(); st.CheckpointTime <= 0 {
		t.Fatalf("CheckpointTime %v after %d checkpoints", st.CheckpointTime, st.Checkpoints)
	}
}

// Turning the log on for a store made without it (an upgrade to the default mode)
// keeps its data, and the first crash after that recovers it from the checkpoint the
// switch took.
func TestWALOnKeepsAStoreMadeWithoutIt(t *testing.T) {
	s := openTempWith(t, Options{})
	path := s.path
	workload(t, s, 0, 9)
	want := dump(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, path, Options{WAL: true})
	if got := dump(t, s); got != want {
		t.Fatal("switching the log on changed the data")
	}
	workload(t, s, 1, 3)
	want = dump(t, s)
	crashClose(t, s) // wipes the store file: only the checkpoint and the log remain
	s = reopen(t, path, Options{WAL: true})
	defer s.Close()
	if got := dump(t, s); got != want {
		t.Fatal("recovery after switching the log on lost data")
	}
}
