package boltstore

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/storetest"
)

const crashChildEnv = "AGENTPLANE_BOLTSTORE_CRASH_CHILD"

// TestCrashChild is the writer that TestCrashSafety kills; it does nothing unless
// started by it.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashChildEnv)
	if path == "" {
		t.Skip("run by TestCrashSafety")
	}
	opts := Options{WAL: os.Getenv(crashChildEnv+"_WAL") == "1"}
	if os.Getenv(crashChildEnv+"_CHECKPOINTS") == "1" {
		// Checkpoints all the time, so that kills land in them too.
		opts.CheckpointBytes, opts.CheckpointInterval = 32<<10, 5*time.Millisecond
	}
	s, err := Open(path, opts)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	var out sync.Mutex
	var wg sync.WaitGroup
	round := os.Getenv(crashChildEnv + "_ROUND")
	for g := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("r%s-g%02d-%06d", round, g, i)
				err := s.Update(context.Background(), func(w store.Writer) error {
					rec := storetest.Task("crash", id, time.Now())
					rec.LastSequence = 2
					if err := w.PutTask(rec); err != nil {
						return err
					}
					return w.AppendEvents("crash", id, storetest.Event(1, id), storetest.Event(2, id))
				})
				if err != nil {
					fmt.Println("update:", err)
					os.Exit(2)
				}
				out.Lock()
				fmt.Println("ack", id) // acknowledged: durable from here on
				out.Unlock()
			}
		})
	}
	wg.Wait()
}

// TestCrashSafety SIGKILLs a process in the middle of concurrent group-committed
// writes, over several rounds on one file, and checks after each that every
// acknowledged write is there, that nothing is half-written, and that bbolt's
// consistency check passes; in both durability modes, and in the write-ahead log
// mode once more with checkpoints running all the time.
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes")
	}
	for _, mode := range []struct {
		name             string
		wal, checkpoints bool
	}{{"bbolt", false, false}, {"wal", true, false}, {"wal-checkpointing", true, true}} {
		t.Run(mode.name, func(t *testing.T) { testCrashSafety(t, mode.wal, mode.checkpoints) })
	}
}

func testCrashSafety(t *testing.T, wal, checkpoints bool) {
	path := filepath.Join(t.TempDir(), "crash.db")
	walEnv, ckptEnv := "0", "0"
	if wal {
		walEnv = "1"
	}
	if checkpoints {
		ckptEnv = "1"
	}
	acked := map[string]bool{}
	for round := range 10 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path, fmt.Sprintf("%s_ROUND=%d", crashChildEnv, round), crashChildEnv+"_WAL="+walEnv, crashChildEnv+"_CHECKPOINTS="+ckptEnv)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stdout)
		killAfter := 20 + rand.IntN(200) // acknowledgements before the kill
		n := 0
		for lines.Scan() {
			line := lines.Text()
			id, ok := strings.CutPrefix(line, "ack ")
			if !ok {
				t.Fatalf("child: %s", line)
			}
			acked[id] = true
			if n++; n == killAfter {
				_ = cmd.Process.Signal(syscall.SIGKILL)
			}
		}
		_ = cmd.Wait()
		if n < killAfter {
			t.Fatalf("round %d: child stopped after %d acknowledgements", round, n)
		}

		if wal {
			// The file's commits were not fsynced: an OS crash could have torn it any
			// way, so recovery must not need it.
			if err := os.WriteFile(path, []byte("torn"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		s, err := Open(path, Options{WAL: wal})
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		if err := s.Check(context.Background()); err != nil {
			t.Fatalf("round %d: consistency check: %v", round, err)
		}
		found := map[string]bool{}
		err = s.View(context.Background(), func(r store.Reader) error {
			return r.ScanTasks("crash", store.TaskRange{}, func(_ []byte, rec *storagev1.TaskRecord) (bool, error) {
				found[rec.GetTaskId()] = true
				var seqs int64
				if err := r.ScanEvents("crash", rec.GetTaskId(), 0, func(*storagev1.EventRecord) (bool, error) {
					seqs++
					return true, nil
				}); err != nil {
					return false, err
				}
				if seqs != rec.GetLastSequence() {
					return false, fmt.Errorf("task %s is half-written: %d events, last_sequence %d", rec.GetTaskId(), seqs, rec.GetLastSequence())
				}
				return true, nil
			})
		})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for id := range acked {
			if !found[id] {
				t.Fatalf("round %d: acknowledged task %s was lost", round, id)
			}
		}
		st, err := s.Stats(context.Background())
		if err != nil || st.Events != 2*int64(len(found)) {
			t.Fatalf("round %d: counters say %d events for %d tasks (%v)", round, st.Events, len(found), err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d acknowledged so far, %d stored", round, len(acked), len(found))
	}
}
