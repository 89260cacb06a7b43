package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/schema"
	"github.com/agentplane/agentplane/server/store/storetest"
)

// segWrite is one write a real run made to the open log segment.
type segWrite struct {
	off int64
	p   []byte
}

// syncPoint is one fdatasync of the log in that run: it covers the first writes
// writes, and once it returns the store acknowledges every batch up to acked.
type syncPoint struct {
	writes int
	acked  uint64
}

// loggedRun is a recorded run of the write-ahead log mode: the checkpoint it started
// from, the writes to its one log segment and the fdatasyncs between them, and the
// task keys each record (batch) of the log put, in log order.
type loggedRun struct {
	ckpt    []byte
	segName string
	writes  []segWrite
	syncs   []syncPoint
	records [][]string
}

// recordRun runs concurrent writers of records from a few bytes to a few pages long
// (so that a page holds several records and a record spans several pages) and
// records every write to the log segment and every fdatasync.
func recordRun(t *testing.T) *loggedRun {
	t.Helper()
	s := openTempWith(t, Options{WAL: true, CheckpointBytes: 1 << 40, CheckpointInterval: time.Hour})
	run := &loggedRun{}
	var mu sync.Mutex
	s.commitMu.Lock()
	s.wal.fileMu.Lock()
	s.wal.log.wrote = func(off int64, p []byte) {
		mu.Lock()
		run.writes = append(run.writes, segWrite{off, slices.Clone(p)})
		mu.Unlock()
	}
	s.wal.beforeSync = func() error {
		// Every batch up to acked was written before this load, so its writes are
		// among those recorded so far; the fdatasync (after this) covers them all.
		acked := s.dur.written.Load()
		mu.Lock()
		run.syncs = append(run.syncs, syncPoint{len(run.writes), acked})
		mu.Unlock()
		time.Sleep(200 * time.Microsecond) // lets the next batches write meanwhile
		return nil
	}
	s.wal.fileMu.Unlock()
	s.commitMu.Unlock()

	sizes := []int{20, 700, 3000, 90, 9000, 1500, 400, 5000, 60, 2200}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 25 {
				id := fmt.Sprintf("g%d-%03d", g, i)
				err := s.Update(context.Background(), func(w store.Writer) error {
					rec := storetest.Task("acme", id, time.Unix(1_700_000_000, 0))
					rec.Labels = map[string]string{"blob": strings.Repeat("x", sizes[(g*7+i)%len(sizes)])}
					return w.PutTask(rec)
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	seg := lastSegment(t, s)
	run.segName = filepath.Base(seg)
	crashClose(t, s)
	var err error
	if run.ckpt, err = os.ReadFile(filepath.Join(filepath.Dir(s.path), checkpointName)); err != nil {
		t.Fatal(err)
	}
	final, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	if got := applyWrites(nil, run.writes); !bytes.Equal(got, final) {
		t.Fatal("the recorded writes do not add up to the segment file")
	}
	run.records = taskKeysPerRecord(t, final)
	if uint64(len(run.records)) != s.dur.last {
		t.Fatalf("the log holds %d records, the store committed %d batches", len(run.records), s.dur.last)
	}
	return run
}

// applyWrites applies writes to a copy of file, as a file system would.
func applyWrites(file []byte, writes []segWrite) []byte {
	return applyInPlace(slices.Clone(file), writes)
}

func applyInPlace(file []byte, writes []segWrite) []byte {
	for _, w := range writes {
		if end := int(w.off) + len(w.p); end > len(file) {
			file = append(file, make([]byte, end-len(file))...)
		}
		copy(file[w.off:], w.p)
	}
	return file
}

// taskKeysPerRecord decodes a segment that holds only whole records (then zeros) and
// returns the task keys each record puts.
func taskKeysPerRecord(t *testing.T, data []byte) [][]string {
	t.Helper()
	var out [][]string
	for off := 0; off+walHeader <= len(data); {
		n := int(binary.LittleEndian.Uint32(data[off:]))
		if n == 0 {
			break
		}
		p := data[off+walHeader : off+walHeader+n]
		var keys []string
		field := func() []byte {
			l, k := binary.Uvarint(p)
			f := p[k : k+int(l)]
			p = p[k+int(l):]
			return f
		}
		for len(p) > 0 {
			op := p[0]
			p = p[1:]
			bucket, key := field(), field()
			if op == walPut {
				field()
				if bytes.Equal(bucket, schema.Tasks) {
					keys = append(keys, string(key))
				}
			}
		}
		out = append(out, keys)
		off += walHeader + n
	}
	return out
}

// crashState is a segment file a crash can leave.
type crashState struct {
	name  string
	data  []byte
	acked uint64 // batches the store had acknowledged
}

const page = 4096

// crashStates builds, for each fdatasync of the run (and for none), segment files a
// crash before the next one returned can leave: what that fdatasync covered, plus any
// subset of the 4 KiB pages written after it, each page as one of the versions the
// writes gave it, or as it was. Every in-order prefix of those pages is there, and
// random subsets. The pages are those written before the second fdatasync after
// (while the next one was in flight the writes went on), and for some states every
// page written up to the end of the run.
func crashStates(run *loggedRun, rng *rand.Rand) []crashState {
	var states []crashState
	seen := map[uint64]bool{}
	seed := maphash.MakeSeed()
	add := func(name string, data []byte, acked uint64) {
		key := maphash.Bytes(seed, data)
		if seen[key] {
			return
		}
		seen[key] = true
		states = append(states, crashState{name, data, acked})
	}
	points := append([]syncPoint{{0, 0}}, run.syncs...)
	for k, sp := range points {
		base := applyWrites(nil, run.writes[:sp.writes])
		window := len(run.writes)
		if k+2 < len(points) {
			window = points[k+2].writes
		}
		for _, whole := range []bool{false, true} {
			end := window
			if whole {
				if end == len(run.writes) || k%8 != 0 {
					continue
				}
				end = len(run.writes)
			}
			// Every version of every page the writes after the sync touched.
			cur := slices.Clone(base)
			versions := map[int64][][]byte{}
			for _, w := range run.writes[sp.writes:end] {
				cur = applyInPlace(cur, []segWrite{w})
				for pg := w.off / page * page; pg < w.off+int64(len(w.p)); pg += page {
					v := slices.Clone(cur[pg:min(int64(len(cur)), pg+page)])
					old := make([]byte, len(v))
					if pg < int64(len(base)) {
						copy(old, base[pg:])
					}
					if !bytes.Equal(v, old) {
						versions[pg] = append(versions[pg], v)
					}
				}
			}
			pages := make([]int64, 0, len(versions))
			for pg := range versions {
				pages = append(pages, pg)
			}
			slices.Sort(pages)
			build := func(choice map[int64][]byte, fullLength bool) []byte {
				data := slices.Clone(base)
				size := int64(len(base))
				if fullLength {
					size = max(size, int64(len(cur)))
				}
				for pg, v := range choice {
					size = max(size, pg+int64(len(v)))
				}
				data = append(data, make([]byte, max(0, size-int64(len(data))))...)
				for pg, v := range choice {
					copy(data[pg:], v)
				}
				return data
			}
			if !whole {
				for i := 0; i <= len(pages); i++ { // in order, each page in its last version
					choice := map[int64][]byte{}
					for _, pg := range pages[:i] {
						choice[pg] = versions[pg][len(versions[pg])-1]
					}
					add(fmt.Sprintf("sync %d + first %d of %d pages", k, i, len(pages)), build(choice, false), sp.acked)
				}
			}
			for r := range 4 {
				choice := map[int64][]byte{}
				for _, pg := range pages {
					if rng.IntN(2) == 0 {
						vs := versions[pg]
						choice[pg] = vs[rng.IntN(len(vs))]
					}
				}
				add(fmt.Sprintf("sync %d + random subset %d of %d pages (to the end: %v)", k, r, len(pages), whole),
					build(choice, rng.IntN(2) == 0), sp.acked)
			}
		}
	}
	return states
}

// TestWALTornTailsFromARealRun opens every crash state of a real run's log (see
// crashStates): each must open, in both modes, and hold every acknowledged write, and
// exactly the writes of a prefix of the log's batches.
func TestWALTornTailsFromARealRun(t *testing.T) {
	run := recordRun(t)
	rng := rand.New(rand.NewPCG(1, 2))
	states := crashStates(run, rng)
	const budget = 400 // each state is a real Open; keep the test's time bounded
	if len(states) > budget {
		rng.Shuffle(len(states), func(i, j int) { states[i], states[j] = states[j], states[i] })
		states = states[:budget]
	}
	t.Logf("%d records, %d fdatasyncs, %d crash states", len(run.records), len(run.syncs), len(states))
	root := fastTempDir(t)
	for i, st := range states {
		dir := filepath.Join(root, fmt.Sprint(i))
		path := filepath.Join(dir, "agentplane.db")
		if err := os.MkdirAll(filepath.Join(dir, walDirName), 0o700); err != nil {
			t.Fatal(err)
		}
		for name, data := range map[string][]byte{
			checkpointName:                         run.ckpt,
			filepath.Join(walDirName, run.segName): st.data,
			"agentplane.db":                        []byte("torn"), // never trusted after a crash
		} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		opts := Options{WAL: i%4 != 3}
		s, err := Open(path, opts)
		if err != nil {
			t.Fatalf("state %d (%s), WAL %v: %v", i, st.name, opts.WAL, err)
		}
		if err := s.Check(context.Background()); err != nil {
			t.Fatalf("state %d (%s): consistency check: %v", i, st.name, err)
		}
		m := checkPrefix(t, s, run, st, i)
		if opts.WAL && i%10 == 0 {
			// The recovered store goes on: a write, another crash, and nothing is lost.
			if err := s.Update(context.Background(), func(w store.Writer) error {
				return w.PutTask(storetest.Task("acme", "after", time.Now()))
			}); err != nil {
				t.Fatal(err)
			}
			crashClose(t, s)
			s = reopen(t, path, opts)
			if got := checkPrefix(t, s, run, st, i); got != m {
				t.Fatalf("state %d: %d batches after the second recovery, %d after the first", i, got, m)
			}
			if !hasTask(t, s, "after") {
				t.Fatalf("state %d: the write after recovery was lost", i)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
}

// fastTempDir is a temporary directory on a memory file system where there is one
// (fsync costs nothing there, and the test opens hundreds of stores), or t.TempDir.
func fastTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "boltstore-test-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// checkPrefix checks that s holds exactly the tasks of the first m batches of the run,
// for an m of at least st.acked, and returns m.
func checkPrefix(t *testing.T, s *Store, run *loggedRun, st crashState, i int) int {
	t.Helper()
	present := map[string]bool{}
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(schema.Tasks).ForEach(func(k, _ []byte) error {
			present[string(k)] = true
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	delete(present, string(schema.TaskKey("acme", "after")))
	m, n := 0, 0
	for m < len(run.records) && len(run.records[m]) > 0 && present[run.records[m][0]] {
		n += len(run.records[m])
		m++
	}
	if uint64(m) < st.acked {
		t.Fatalf("state %d (%s): recovered %d batches, but %d were acknowledged", i, st.name, m, st.acked)
	}
	if n != len(present) {
		t.Fatalf("state %d (%s): recovered %d tasks, but the first %d batches hold %d: not a prefix of the log",
			i, st.name, len(present), m, n)
	}
	for _, rec := range run.records[:m] {
		for _, k := range rec {
			if !present[k] {
				t.Fatalf("state %d (%s): batch partly recovered (%q missing)", i, st.name, k)
			}
		}
	}
	return m
}

// A torn tail is tolerated only where a crash leaves one; damage a crash cannot
// explain still refuses the open, and a refused open changes nothing.
func TestWALDamageATornTailCannotExplainRefusesToOpen(t *testing.T) {
	for _, tc := range []struct {
		name string
		// damage changes the log: first is a segment a checkpoint covered, cut after
		// its records, and last is the open segment, with its zeros.
		damage func(t *testing.T, first, last []byte) (newFirst, newLast []byte)
		want   string
	}{
		{"a flipped bit in the last segment, records after it", func(t *testing.T, first, last []byte) ([]byte, []byte) {
			last[walHeader+3] ^= 0x10
			return first, last
		}, "checksum mismatch"},
		{"a zeroed sector in an earlier segment", func(t *testing.T, first, last []byte) ([]byte, []byte) {
			clear(first[sectorSize : 2*sectorSize])
			return first, last
		}, "checksum mismatch"},
		{"a zero length in an earlier segment", func(t *testing.T, first, last []byte) ([]byte, []byte) {
			n := int(binary.LittleEndian.Uint32(first))
			clear(first[walHeader+n : walHeader+n+4])
			return first, last
		}, "bad length 0"},
		{"a header cut short in an earlier segment", func(t *testing.T, first, last []byte) ([]byte, []byte) {
			return append(first, 1, 2, 3), last
		}, "short header"},
		{"a record cut short in an earlier segment", func(t *testing.T, first, last []byte) ([]byte, []byte) {
			return first[:len(first)-3], last
		}, "short record"},
		{"a huge length in the last segment, records after it", func(t *testing.T, first, last []byte) ([]byte, []byte) {
			binary.LittleEndian.PutUint32(last, walMaxRecord+1)
			return first, last
		}, "bad length"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTempWith(t, Options{WAL: true})
			path := s.path
			workload(t, s, 0, 6)
			// The segment the checkpoint covers, kept as a crash before its removal
			// leaves it.
			firstSeg := lastSegment(t, s)
			first, err := os.ReadFile(firstSeg)
			if err != nil {
				t.Fatal(err)
			}
			first = first[:s.wal.log.off]
			if err := s.checkpoint(); err != nil {
				t.Fatal(err)
			}
			workload(t, s, 1, 6)
			lastSeg := lastSegment(t, s)
			crashClose(t, s)
			last, err := os.ReadFile(lastSeg)
			if err != nil {
				t.Fatal(err)
			}
			first, last = tc.damage(t, first, last)
			if err := os.WriteFile(firstSeg, first, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(lastSeg, last, 0o600); err != nil {
				t.Fatal(err)
			}
			for range 2 { // refusing leaves the log as it was: it refuses again
				for _, opts := range []Options{{WAL: true}, {}} {
					_, err := Open(path, opts)
					if !errors.Is(err, errCorruptWAL) || !strings.Contains(err.Error(), tc.want) {
						t.Fatalf("Open (WAL %v) = %v, want a corrupt-log error with %q", opts.WAL, err, tc.want)
					}
				}
			}
		})
	}
}

// Recovery cuts the torn tail off its segment, so that it is never read again.
func TestWALTornTailIsTruncated(t *testing.T) {
	s := openTempWith(t, Options{WAL: true})
	path := s.path
	workload(t, s, 0, 6)
	want := dump(t, s)
	seg, end := lastSegment(t, s), s.wal.log.off
	crashClose(t, s)
	f, err := os.OpenFile(seg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A record whose first page never reached the disk, and a later page that did.
	if _, err := f.WriteAt(bytes.Repeat([]byte{7}, 100), (end/page+2)*page); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, path, Options{WAL: true})
	defer s.Close()
	if got := dump(t, s); got != want {
		t.Fatal("recovered state is wrong")
	}
	if fi, err := os.Stat(seg); err != nil || fi.Size() != end {
		t.Fatalf("torn segment after recovery: %v, %v; want it cut at %d", fi, err, end)
	}
}
