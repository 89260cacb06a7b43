package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/servertest"
)

// buildRuntime builds this command's binary into a test directory.
func buildRuntime(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := filepath.Join(t.TempDir(), "runtime")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runtimeProc is a running runtime binary and its log.
type runtimeProc struct {
	cmd  *exec.Cmd
	logs *testutil.SyncBuffer
}

// startRuntime writes cfg to a file and starts the binary with it; the process is
// killed when the test ends.
func startRuntime(t *testing.T, bin, cfg, id string) *runtimeProc {
	t.Helper()
	file := filepath.Join(t.TempDir(), "runtime.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &runtimeProc{logs: &testutil.SyncBuffer{}}
	p.cmd = exec.Command(bin, "-config", file, "-runtime-id", id)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); _ = p.cmd.Wait() })
	return p
}

// waitEnded polls until the task is COMPLETED or FAILED; log is shown on a timeout.
func waitEnded(t *testing.T, ctx context.Context, in *servertest.Instance, taskID string, log interface{ String() string }) *agentplanev1.Task {
	t.Helper()
	for {
		got, err := in.Client.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: taskID})
		if err != nil {
			t.Fatal(err)
		}
		task := got.GetTask()
		if s := task.GetState(); s == agentplanev1.TaskState_TASK_STATE_COMPLETED || s == agentplanev1.TaskState_TASK_STATE_FAILED {
			return task
		}
		select {
		case <-ctx.Done():
			t.Fatalf("task %s still %v; runtime log:\n%s", taskID, task.GetState(), log)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
