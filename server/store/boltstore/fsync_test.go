package boltstore

import (
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// recordFS records the file system operations of the store (see fsTrace) until the
// test ends.
func recordFS(t *testing.T) func() []string {
	t.Helper()
	var mu sync.Mutex
	var ops []string
	f := func(op, path string) {
		mu.Lock()
		ops = append(ops, op+" "+path)
		mu.Unlock()
	}
	fsTrace.Store(&f)
	t.Cleanup(func() { fsTrace.Store(nil) })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(ops)
	}
}

// Open creates the data directory (and its missing parents) and the store file; each
// new directory entry must be durable before Open returns, in both modes, or a crash
// could take a store with acknowledged writes away.
func TestOpenMakesNewEntriesDurable(t *testing.T) {
	for _, wal := range []bool{false, true} {
		root := t.TempDir()
		dir := filepath.Join(root, "a", "data")
		path := filepath.Join(dir, "agentplane.db")
		ops := recordFS(t)
		s, err := Open(path, Options{WAL: wal})
		if err != nil {
			t.Fatal(err)
		}
		got := ops()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		opened := slices.Index(got, "open "+path)
		if opened < 0 {
			t.Fatalf("no open in %q", got)
		}
		for _, d := range []string{root, filepath.Join(root, "a")} {
			if i := slices.Index(got, "syncdir "+d); i < 0 || i > opened {
				t.Errorf("WAL %v: %s (a new entry in it) not synced before the store opened: %q", wal, d, got)
			}
		}
		if !slices.Contains(got[opened:], "syncdir "+dir) {
			t.Errorf("WAL %v: %s not synced after the store file was created: %q", wal, dir, got)
		}
	}
}

// Switching the log off removes the marker, the log and the checkpoint in an order
// that leaves, after a crash at any point, files the next Open reads right: the
// marker goes first (durably: a marker without a log would make a later switch back
// on trust a stale checkpoint), then the whole log at once (renamed away: part of it
// replayed onto the checkpoint would lose writes), then the checkpoint.
func TestWALOffRemovesTheLogInADurableOrder(t *testing.T) {
	for _, clean := range []bool{true, false} {
		s := openTempWith(t, Options{WAL: true})
		path, dir := s.path, filepath.Dir(s.path)
		workload(t, s, 0, 3)
		if clean {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			crashClose(t, s)
		}
		ops := recordFS(t)
		s = reopen(t, path, Options{})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		got := ops()
		got = got[slices.Index(got, "open "+path):]
		first := slices.IndexFunc(got, func(op string) bool {
			return strings.HasPrefix(op, "remove") || strings.HasPrefix(op, "rename")
		})
		if first < 0 {
			t.Fatalf("clean %v: nothing removed: %q", clean, got)
		}
		var want []string
		if clean {
			want = append(want, "remove "+filepath.Join(dir, cleanMarkerName), "syncdir "+dir)
		}
		removed := filepath.Join(dir, walRemovedName)
		want = append(want,
			"rename "+filepath.Join(dir, walDirName)+" -> "+removed, "syncdir "+dir,
			"remove "+filepath.Join(dir, checkpointName), "removeall "+removed, "syncdir "+dir)
		if !slices.Equal(got[first:], want) {
			t.Errorf("clean %v: switching the log off did\n%s\nwant\n%s", clean, strings.Join(got[first:], "\n"), strings.Join(want, "\n"))
		}
	}
}

// Recovering from an unclean shutdown copies the store once (the checkpoint into
// place), in both modes: the segments it replays stay for the next checkpoint.
func TestWALRecoveryCopiesTheStoreOnce(t *testing.T) {
	for _, wal := range []bool{true, false} {
		s := openTempWith(t, Options{WAL: true})
		path := s.path
		workload(t, s, 0, 6)
		want := dump(t, s)
		crashClose(t, s)
		ops := recordFS(t)
		s = reopen(t, path, Options{WAL: wal})
		copies := 0
		for _, op := range ops() {
			if strings.HasPrefix(op, "rename ") && strings.Contains(op, ".tmp -> ") {
				copies++
			}
		}
		if copies != 1 {
			t.Errorf("WAL %v: recovery made %d copies of the store: %q", wal, copies, ops())
		}
		if got := dump(t, s); got != want {
			t.Fatalf("WAL %v: recovered state is wrong", wal)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
