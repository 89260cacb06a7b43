package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
)

// TestCrashSafety drives the real controlplane binary with concurrent StartTask calls
// and runtime event reports, SIGKILLs it at random moments, restarts it on the same
// file, and checks that every acknowledged write is there, that nothing is half
// written (every task's log is gap-free, idempotency keys still map to their task),
// and that bbolt's consistency check passes. It does so in both store modes: the
// default write-ahead log (every restart recovers from checkpoint and log) and
// bbolt's own commits.
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	bin := buildBinary(t)
	for _, wal := range []bool{true, false} {
		t.Run(fmt.Sprintf("wal=%v", wal), func(t *testing.T) { testCrashSafety(t, bin, wal) })
	}
}

func testCrashSafety(t *testing.T, bin string, wal bool) {
	dataDir := t.TempDir()
	configFile := writeConfig(t, fmt.Sprintf("store:\n  wal: %v\n", wal))
	acked := newLedger()
	const rounds = 10
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for round := 1; round <= rounds; round++ {
		proc := startBinary(t, bin, dataDir, configFile)
		c, err := client.Dial(context.Background(), proc.addr)
		if err != nil {
			t.Fatal(err)
		}
		acked.verify(t, c, round)

		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() { defer wg.Done(); startLoop(ctx, c, acked, round, w) }()
		}
		wg.Add(1)
		go func() { defer wg.Done(); runtimeLoop(ctx, c, acked, round) }()

		time.Sleep(time.Duration(150+rng.IntN(500)) * time.Millisecond) // let load build up; the kill lands at a random moment
		proc.kill(t)
		cancel()
		wg.Wait()
		c.Close()
		t.Logf("round %d: %d tasks and %d event reports acknowledged so far", round, acked.taskCount(), acked.eventCount())
	}
	// One last clean start verifies the final round's writes, then a graceful stop.
	proc := startBinary(t, bin, dataDir, configFile)
	c, err := client.Dial(context.Background(), proc.addr)
	if err != nil {
		t.Fatal(err)
	}
	acked.verify(t, c, rounds+1)
	c.Close()
	proc.stop(t)
	if acked.taskCount() == 0 || acked.eventCount() == 0 {
		t.Fatalf("no acknowledged writes to check (tasks %d, events %d)", acked.taskCount(), acked.eventCount())
	}
	checkBolt(t, filepath.Join(dataDir, "agentplane.db"))
}

// ledger records what the server acknowledged.
type ledger struct {
	mu       sync.Mutex
	tasks    map[string]string // request id -> task id
	events   map[string]int64  // task id -> highest acknowledged sequence
	reports  int
	failures map[codes.Code]int // failed calls other than the server going away, by code
}

func newLedger() *ledger {
	return &ledger{tasks: map[string]string{}, events: map[string]int64{}, failures: map[codes.Code]int{}}
}

func (l *ledger) taskCount() int  { l.mu.Lock(); defer l.mu.Unlock(); return len(l.tasks) }
func (l *ledger) eventCount() int { l.mu.Lock(); defer l.mu.Unlock(); return l.reports }

func (l *ledger) verify(t *testing.T, c *client.Client, round int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for reqID, taskID := range l.tasks {
		resp, err := c.Tasks.StartTask(ctx, startRequest(reqID))
		if err != nil {
			t.Fatalf("round %d: retrying acknowledged start %s: %v", round, reqID, err)
		}
		if resp.GetTask().GetTaskId() != taskID || resp.GetCreated() {
			t.Fatalf("round %d: request %s maps to %s (created=%v), acknowledged as %s",
				round, reqID, resp.GetTask().GetTaskId(), resp.GetCreated(), taskID)
		}
	}
	for taskID, seq := range l.events {
		task, err := c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: taskID})
		if err != nil {
			t.Fatalf("round %d: task %s: %v", round, taskID, err)
		}
		last := task.GetTask().GetLastSequence()
		if last < seq {
			t.Fatalf("round %d: task %s has %d events, %d were acknowledged", round, taskID, last, seq)
		}
		checkGapFree(ctx, t, c, taskID, last)
	}
}

// checkGapFree replays a task's log and checks sequences 1..last, each exactly once.
func checkGapFree(ctx context.Context, t *testing.T, c *client.Client, taskID string, last int64) {
	t.Helper()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Tasks.WatchTask(wctx, &agentplanev1.WatchTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	want := int64(1)
	for want <= last {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("watch %s after %d: %v", taskID, want-1, err)
		}
		if got := resp.GetEvent().GetSequence(); got != want {
			t.Fatalf("task %s: event sequence %d, want %d (gap or repeat)", taskID, got, want)
		}
		want++
	}
}

func startRequest(reqID string) *agentplanev1.StartTaskRequest {
	return &agentplanev1.StartTaskRequest{
		RequestId: reqID,
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(&agentplanev1.AgentSpec{
			ApiVersion:   "qar/v1",
			Kind:         "AgentSpec",
			Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "Answer briefly."}},
			Model:        "test-model",
		})},
		Input: client.UserText("crash test " + reqID),
	}
}

func startLoop(ctx context.Context, c *client.Client, l *ledger, round, worker int) {
	for i := 0; ctx.Err() == nil; i++ {
		reqID := fmt.Sprintf("r%d-w%d-%d", round, worker, i)
		resp, err := c.Tasks.StartTask(ctx, startRequest(reqID))
		if err != nil {
			return // the server died; unacknowledged writes may or may not be there
		}
		l.mu.Lock()
		l.tasks[reqID] = resp.GetTask().GetTaskId()
		l.mu.Unlock()
	}
}

func runtimeLoop(ctx context.Context, c *client.Client, l *ledger, round int) {
	for ctx.Err() == nil {
		resp, err := c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{
			RuntimeId: fmt.Sprintf("crash-runtime-%d", round), MaxTasks: 4, Wait: durationpb.New(200 * time.Millisecond),
		})
		if err != nil {
			return
		}
		for _, lease := range resp.GetLeases() {
			ref := &agentplanev1.LeaseRef{TaskId: lease.GetTask().GetTaskId(), LeaseId: lease.GetLeaseId(), Epoch: lease.GetEpoch()}
			for j := 0; j < 3; j++ {
				r, err := c.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref, Events: []*agentplanev1.RuntimeEvent{
					{Payload: &agentplanev1.RuntimeEvent_Message{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, fmt.Sprintf("step %d", j))}},
				}})
				if err != nil {
					return
				}
				l.mu.Lock()
				if r.GetLastSequence() > l.events[ref.TaskId] {
					l.events[ref.TaskId] = r.GetLastSequence()
				}
				l.reports++
				l.mu.Unlock()
			}
			if _, err := c.Runtime.CompleteTask(ctx, &agentplanev1.CompleteTaskRequest{Lease: ref, Output: &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "done")}}); err != nil {
				return
			}
		}
	}
}

type process struct {
	cmd    *exec.Cmd
	addr   string
	done   chan error
	stderr *testutil.SyncBuffer // what the process logged
}

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "controlplane")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func startBinary(t *testing.T, bin, dataDir, configFile string) *process {
	t.Helper()
	cmd := exec.Command(bin, "--data-dir", dataDir, "--grpc-addr", "127.0.0.1:0", "--http-addr", "off", "--log-level", "warn")
	cmd.Env = append(os.Environ(), "AGENTPLANE_CONFIG="+configFile)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &testutil.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, done: make(chan error, 1), stderr: stderr}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "gRPC" {
				addrc <- f[1]
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { p.done <- cmd.Wait() }()
	select {
	case p.addr = <-addrc:
	case err := <-p.done:
		t.Fatalf("controlplane exited at start: %v\n%s", err, stderr.String())
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("controlplane did not print its address\n%s", stderr.String())
	}
	return p
}

func (p *process) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

func (p *process) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		if err != nil {
			t.Fatalf("graceful stop exited with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("controlplane did not stop on SIGTERM")
	}
}

// checkBolt runs bbolt's consistency check over the whole file.
func checkBolt(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		var problems []string
		for err := range tx.Check() {
			problems = append(problems, err.Error())
		}
		if len(problems) > 0 {
			return fmt.Errorf("bbolt check: %s", strings.Join(problems, "; "))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
