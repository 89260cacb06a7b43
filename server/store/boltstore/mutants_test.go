package boltstore

// Tests that pin behaviour a mutation run found unguarded. Each names, in its
// comment, the plausible bug (the mutant) it fails on.

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/schema"
	"github.com/agentplane/agentplane/server/store/storetest"
)

// setBeforeSync installs the fdatasync hook the way holdSyncs does (beforeSync is read
// under fileMu and set under commitMu and fileMu).
func setBeforeSync(s *Store, f func() error) {
	s.commitMu.Lock()
	s.wal.fileMu.Lock()
	s.wal.beforeSync = f
	s.wal.fileMu.Unlock()
	s.commitMu.Unlock()
}

// inFile says whether the store file (not the log) holds tenant acme's task id.
func inFile(t *testing.T, s *Store, id string) bool {
	t.Helper()
	var in bool
	if err := s.db.View(func(tx *bolt.Tx) error {
		in = tx.Bucket(schema.Tasks).Get(schema.TaskKey("acme", id)) != nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return in
}

// A checkpoint moves the log to a new segment. A batch whose record is in the old
// segment but whose leader has not synced yet must be covered by an fdatasync of
// the old segment before it is acknowledged: the leader's own fdatasync, coming after
// the switch, syncs the new segment, and a power loss before the checkpoint's copy is
// in place would take the acknowledged write back. Killing the process cannot show
// this (the page cache survives it), so the test records which segment each fdatasync
// covered and up to which batch.
//
// The test drives one leader by hand, as leadOnce does (commitBatch under commitMu,
// then settle), with a whole checkpoint between the two steps: the interleaving a
// leader that lost the race for fileMu to a checkpoint goes through.
//
// Mutant: checkpoint without its syncTo of the open segment.
func TestWALCheckpointSyncsTheOpenSegmentBeforeSwitching(t *testing.T) {
	s := openTempWith(t, Options{WAL: true, CheckpointInterval: time.Hour, CheckpointBytes: 1 << 40})
	defer s.Close()
	workload(t, s, 0, 2)
	type covered struct{ segment, upTo uint64 }
	var syncs []covered // appended under fileMu, read after the last sync
	setBeforeSync(s, func() error {
		syncs = append(syncs, covered{s.wal.log.seq, s.dur.written.Load()})
		return nil
	})

	c := &call{ctx: context.Background(), wake: make(chan struct{}, 1), fn: func(w store.Writer) error {
		return w.PutTask(storetest.Task("acme", "straddler", time.Now()))
	}}
	s.commitMu.Lock()
	segment := s.wal.log.seq
	r := s.commitBatch([]*call{c})
	s.commitMu.Unlock()
	if r.err != nil || !r.committed {
		t.Fatalf("commitBatch: %v (committed %v)", r.err, r.committed)
	}
	if err := s.checkpoint(); err != nil {
		t.Fatal(err)
	}
	s.settle(r)
	if c.err != nil {
		t.Fatalf("the batch failed: %v", c.err)
	}
	s.wal.fileMu.Lock()
	got := slices.Clone(syncs)
	s.wal.fileMu.Unlock()
	for _, sync := range got {
		if sync.segment == segment && sync.upTo >= r.seq {
			return
		}
	}
	t.Fatalf("batch %d (in segment %d) was acknowledged, but no fdatasync of that segment covered it; fdatasyncs (segment, up to batch): %v",
		r.seq, segment, got)
}

// After a failed fdatasync the store refuses writes until a restart. A refused write
// must not reach the file or the log: it would be read back before the restart and
// replayed after it, although its caller was told it failed.
//
// Mutant: commitBatch without its failedErr check (the batch runs, is logged and
// committed, and only its settle reports the failure).
func TestWALWriteRefusedAfterAFailedSyncLeavesNoTrace(t *testing.T) {
	s := openTempWith(t, Options{WAL: true})
	path := s.path
	workload(t, s, 0, 2)
	boom := errors.New("injected fdatasync failure")
	setBeforeSync(s, func() error { return boom })
	if err := putTask(s, "lost"); !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want the fdatasync failure", err)
	}
	if err := putTask(s, "refused"); !errors.Is(err, boom) {
		t.Fatalf("the next Update = %v, want a refusal naming the failure", err)
	}
	if inFile(t, s, "refused") {
		t.Fatal("a write refused after the failure reached the store file")
	}
	if err := s.Close(); err != nil && !errors.Is(err, boom) {
		t.Fatalf("Close: %v", err)
	}
	s = reopen(t, path, Options{WAL: true})
	defer s.Close()
	if inFile(t, s, "refused") {
		t.Fatal("a write refused after the failure reappeared after the restart")
	}
}

// A batch whose log record is written but whose bbolt commit fails leaves the log
// and the file disagreeing: the store must refuse later writes until it has
// recovered from the log (here: until a restart, recovery being off). The commit is made to fail for real, by capping
// the file's size (bbolt's MaxSize) below what the batch needs.
//
// Mutant: commitBatch without the fail/markFailed of a failed tx.Commit.
func TestWALFailedCommitAfterItsRecordFailsTheStore(t *testing.T) {
	s := openTempWith(t, Options{WAL: true, RecoverInterval: -1})
	path := s.path
	workload(t, s, 0, 2)
	s.commitMu.Lock() // bbolt reads MaxSize only while committing
	s.db.MaxSize = 1  // no page past the file's high-water mark
	s.commitMu.Unlock()
	big := s.Update(context.Background(), func(w store.Writer) error {
		rec := storetest.Task("acme", "big", time.Now())
		rec.Labels = map[string]string{"blob": strings.Repeat("x", 4<<20)}
		return w.PutTask(rec)
	})
	if !errors.Is(big, berrors.ErrMaxSizeReached) {
		t.Fatalf("Update past the size cap = %v, want bbolt's max-size error", big)
	}
	s.commitMu.Lock()
	s.db.MaxSize = 0
	s.commitMu.Unlock()
	wantUnavailable(t, "Update after a failed commit", putTask(s, "after"))
	if err := s.Close(); err != nil && !errors.Is(err, berrors.ErrMaxSizeReached) {
		t.Fatalf("Close: %v", err)
	}
	s = reopen(t, path, Options{WAL: true})
	defer s.Close()
	if err := putTask(s, "restarted"); err != nil {
		t.Fatalf("Update after the restart: %v", err)
	}
}

// A damaged record is tolerated only as the last thing the log holds. One at the end
// of a segment that a later segment with records follows is corruption: replaying
// past it would apply later batches without an earlier acknowledged one. The test
// first checks that the split log it builds replays as it is (so the refusal is the
// damage's), then damages the first segment's last record.
//
// Mutant: replayLog passing last=true (or i <= last) for every segment.
func TestWALDamagedRecordBeforeASegmentWithRecordsRefusesToOpen(t *testing.T) {
	s := openTempWith(t, Options{WAL: true})
	path := s.path
	workload(t, s, 0, 6)
	want := dump(t, s)
	seg := lastSegment(t, s)
	seqs := segments(t, s)
	crashClose(t, s)
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	var ends []int // where each record ends
	for off := 0; off+walHeader <= len(data); {
		n := int(binary.LittleEndian.Uint32(data[off:]))
		if n == 0 {
			break
		}
		off += walHeader + n
		ends = append(ends, off)
	}
	if len(ends) < 4 {
		t.Fatalf("the workload left %d records, want at least 4", len(ends))
	}
	split := ends[len(ends)/2]
	next := filepath.Join(filepath.Dir(seg), segmentName(seqs[len(seqs)-1]+1))
	write := func(first []byte) {
		t.Helper()
		pad := make([]byte, 4096)
		if err := os.WriteFile(seg, append(slices.Clone(first), pad...), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(next, append(slices.Clone(data[split:ends[len(ends)-1]]), pad...), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	checkpoint, err := os.ReadFile(filepath.Join(filepath.Dir(path), checkpointName))
	if err != nil {
		t.Fatal(err)
	}

	write(data[:split])
	s = reopen(t, path, Options{WAL: true})
	if got := dump(t, s); got != want {
		t.Fatal("the log split over two segments does not replay to the acknowledged state")
	}
	crashClose(t, s)
	// That recovery checkpointed and removed the log: lay the pre-recovery files again.
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), checkpointName), checkpoint, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, n := range segments(t, s) {
		if err := os.Remove(filepath.Join(filepath.Dir(seg), segmentName(n))); err != nil {
			t.Fatal(err)
		}
	}
	damaged := slices.Clone(data[:split])
	damaged[split-1] ^= 0xff // the last byte of the first segment's last record
	write(damaged)
	_, err = Open(path, Options{WAL: true})
	if !errors.Is(err, errCorruptWAL) || !strings.Contains(err.Error(), seg) {
		t.Fatalf("Open = %v, want a corrupt-log error naming %s", err, seg)
	}
}

// A counter that returns to zero is deleted from the file, and the log must record
// the deletion: replay would otherwise bring back the old count.
//
// Mutant: txState.apply without its logDelete.
func TestWALCounterBackToZeroIsReplayed(t *testing.T) {
	s := openTempWith(t, Options{WAL: true})
	path := s.path
	ctx := context.Background()
	if err := s.Update(ctx, func(w store.Writer) error {
		return w.PutTask(storetest.Task("solo", "only", time.Now()))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(w store.Writer) error {
		_, err := w.DeleteTask("solo", "only")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want := dump(t, s)
	if strings.Contains(want, `"`+string(schema.Counters)+`"`) {
		t.Fatalf("the tenant's counters are not all back to zero:\n%s", want)
	}
	crashClose(t, s)
	s = reopen(t, path, Options{WAL: true})
	defer s.Close()
	if got := dump(t, s); got != want {
		t.Fatalf("replay differs from the acknowledged state:\ngot:\n%s\nwant:\n%s", got, want)
	}
}

// Commit hooks announce what is durable (events to watchers, decisions to waiting
// runtimes): the hooks of a batch whose fdatasync failed must not run.
//
// Mutant: settle running the hooks when only one of "failed" and "not committed"
// holds (err != nil && !r.committed).
func TestWALFailedSyncRunsNoCommitHooks(t *testing.T) {
	s := openTempWith(t, Options{WAL: true})
	defer closeWithin(t, s)
	boom := errors.New("injected fdatasync failure")
	setBeforeSync(s, func() error { return boom })
	ran := false
	err := s.Update(context.Background(), func(w store.Writer) error {
		w.OnCommit(func() { ran = true })
		return w.PutTask(storetest.Task("acme", "lost", time.Now()))
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want the fdatasync failure", err)
	}
	if ran {
		t.Fatal("the commit hook of a batch whose fdatasync failed ran")
	}
}

// In the default mode a batch that bbolt fails to commit fails its callers at once
// (nothing of it is in the file), and the store goes on once it has recovered. The commit is made to fail
// for real, by capping the file's size (bbolt's MaxSize).
//
// Mutant: settle waiting for the failed batch to become durable (err == nil ||
// r.seq > 0), which no later commit of the test ever makes it.
func TestFailedCommitFailsItsCallersAndTheStoreGoesOn(t *testing.T) {
	s := openTempWith(t, Options{RecoverInterval: time.Millisecond})
	defer closeWithin(t, s)
	workload(t, s, 0, 2)
	s.commitMu.Lock()
	s.db.MaxSize = 1 // no page past the file's high-water mark
	s.commitMu.Unlock()
	failed := make(chan error, 1)
	go func() {
		failed <- s.Update(context.Background(), func(w store.Writer) error {
			rec := storetest.Task("acme", "big", time.Now())
			rec.Labels = map[string]string{"blob": strings.Repeat("x", 4<<20)}
			return w.PutTask(rec)
		})
	}()
	if err := testutil.Within(t, failed, "the failed Update to return"); !errors.Is(err, berrors.ErrMaxSizeReached) {
		t.Fatalf("Update past the size cap = %v, want bbolt's max-size error", err)
	}
	s.commitMu.Lock()
	s.db.MaxSize = 0
	s.commitMu.Unlock()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		err := putTask(s, "after")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Update after a failed commit, 30 s on: %v", err)
		}
	}
	if inFile(t, s, "big") || !inFile(t, s, "after") {
		t.Fatal("the file holds the failed batch, or not the one after it")
	}
}

// A leader hands leadership to the next queued Update before it waits for its own
// batch; with a single Update queued, and no other coming, that one must still be
// committed.
//
// Mutant: leadOnce handing on only when more than one Update is queued.
func TestLoneQueuedUpdateIsHandedLeadership(t *testing.T) {
	s := openTemp(t)
	defer closeWithin(t, s)
	entered, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- s.Update(context.Background(), func(w store.Writer) error {
			close(entered)
			<-release
			return w.PutTask(storetest.Task("acme", "first", time.Now()))
		})
	}()
	testutil.Within(t, entered, "the first Update's function to run")
	second := make(chan error, 1)
	go func() { second <- putTask(s, "second") }()
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.queue) == 1 })
	close(release)
	if err := testutil.Within(t, first, "the first Update to return"); err != nil {
		t.Fatal(err)
	}
	if err := testutil.Within(t, second, "the Update queued behind it to return"); err != nil {
		t.Fatal(err)
	}
}

// A damaged request record is an error, not "no task for this request id": the
// latter would let a retried Start create a second task.
//
// Mutant: TaskForRequest without its decoding error return.
func TestDamagedRequestRecordIsAnError(t *testing.T) {
	s := openTemp(t)
	defer s.Close()
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(schema.Requests).Put(schema.RequestKey("acme", "req-1"), []byte{0xff, 0xff, 0xff})
	}); err != nil {
		t.Fatal(err)
	}
	err := s.View(context.Background(), func(r store.Reader) error {
		id, err := r.TaskForRequest("acme", "req-1")
		if err == nil {
			t.Errorf("TaskForRequest on a damaged record = %q, nil; want an error", id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
