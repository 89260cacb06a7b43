package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/servertest"
)

// buildBinary builds the command in pkg (relative to cmd/runtime) into dir.
func buildBinary(t testing.TB, dir, pkg, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	bin := filepath.Join(dir, name)
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// writeFile writes content to a file named name in a test directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// startRuntime starts the runtime binary with cfgFile as runtime id; it is killed when
// the test ends.
func startRuntime(t testing.TB, bin, cfgFile, id string) (*exec.Cmd, *testutil.SyncBuffer) {
	t.Helper()
	logs := &testutil.SyncBuffer{}
	cmd := exec.Command(bin, "-config", cfgFile, "-runtime-id", id)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, logs
}

// waitTaskState polls the task until one of states (or ctx's end, a failure showing
// logs).
func waitTaskState(t testing.TB, ctx context.Context, in *servertest.Instance, taskID string, logs *testutil.SyncBuffer, states ...agentplanev1.TaskState) *agentplanev1.Task {
	t.Helper()
	for {
		got, err := in.Client.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: taskID})
		if err != nil {
			t.Fatalf("GetTask: %v; runtime log:\n%s", err, logs)
		}
		for _, s := range states {
			if got.GetTask().GetState() == s {
				return got.GetTask()
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("task still %v, want %v; runtime log:\n%s", got.GetTask().GetState(), states, logs)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// killMidCallAndResume starts the runtime, SIGKILLs it once started says its tool call
// is running, starts a second runtime and waits until it completes the task with
// output as its answer.
func killMidCallAndResume(t *testing.T, ctx context.Context, in *servertest.Instance, bin, cfgFile, taskID string, started <-chan struct{}, output string) {
	t.Helper()
	first, logs := startRuntime(t, bin, cfgFile, "first")
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatalf("the tool was never called; runtime log:\n%s", logs)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()

	second, logs2 := startRuntime(t, bin, cfgFile, "second")
	defer func() { _ = second.Process.Signal(syscall.SIGTERM) }()
	task := waitTaskState(t, ctx, in, taskID, logs2, agentplanev1.TaskState_TASK_STATE_COMPLETED, agentplanev1.TaskState_TASK_STATE_FAILED)
	if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || client.MessageText(task.GetOutput().GetMessage()) != output {
		t.Fatalf("task %v %v %v; log:\n%s", task.GetState(), task.GetFailure(), task.GetOutput(), logs2)
	}
}
