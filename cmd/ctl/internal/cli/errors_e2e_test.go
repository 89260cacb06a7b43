package cli

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
)

// rpcName matches what a ctl user cannot type: an RPC or an API field name.
var rpcName = regexp.MustCompile(`\w+Service\.\w+|\w+Service/\w+|\b(older_than|page_token|ListRules)\b`)

// TestErrorsNameCommands: where the server's message tells an API client which RPC or
// field to use, ctl says which command or flag to use instead.
func TestErrorsNameCommands(t *testing.T) {
	in := servertest.Start(t, nil)
	requireServerSide(t, in)
	expect := func(t *testing.T, code int, errOut string, wantCode int, wants ...string) {
		t.Helper()
		if code != wantCode {
			t.Errorf("exit %d, want %d: %s", code, wantCode, errOut)
		}
		for _, w := range wants {
			if !strings.Contains(errOut, w) {
				t.Errorf("stderr lacks %q:\n%s", w, errOut)
			}
		}
		// The reason in parentheses is the API's stable identifier; the words around it are for the user.
		if m := rpcName.FindString(regexp.MustCompile(`\([A-Z_]+\)`).ReplaceAllString(errOut, "")); m != "" {
			t.Errorf("stderr names %s, not a ctl command:\n%s", m, errOut)
		}
	}

	t.Run("purge without a cutoff on a server without retention", func(t *testing.T) {
		code, _, errOut := runCtl(t, in.GRPCAddr, "admin", "purge")
		expect(t, code, errOut, exitUsage, "--older-than", "tasks.retention")
	})

	t.Run("continue a task that is not paused", func(t *testing.T) {
		agent := writeFile(t, "agent.yaml", agentDoc)
		_, out, _ := runCtl(t, in.GRPCAddr, "task", "start", "--agent", agent, "--input", "x", "-o", "json")
		id := regexp.MustCompile(`"taskId":\s*"([^"]+)"`).FindStringSubmatch(out)[1]
		code, _, errOut := runCtl(t, in.GRPCAddr, "task", "continue", id, "--message", "hi")
		expect(t, code, errOut, exitFailed, "task "+id+" is submitted", "input_required")
		if code, _, errOut := runCtl(t, in.GRPCAddr, "task", "cancel", id); code != 0 { // leave the queue empty
			t.Fatalf("cancel: %s", errOut)
		}
	})

	t.Run("approve a chat-mode pause; continue a task waiting for a reviewer", func(t *testing.T) {
		code, out, errOut := runCtl(t, in.GRPCAddr, "task", "start", "--agent", "../../../../examples/runtime/approval.agent.yaml",
			"--policy", "../../../../examples/runtime/approval.policy.yaml", "--input", "refund order 42", "-o", "json")
		if code != 0 {
			t.Fatalf("task start: %d %s", code, errOut)
		}
		taskID := regexp.MustCompile(`"taskId":\s*"([^"]+)"`).FindStringSubmatch(out)[1]
		script := "../../../../examples/runtime/approval.yaml"
		// send_email: the runtime waits for the decision, holding its lease.
		first := ctlAsync(t, in.GRPCAddr, "runtime", "run", "--script", script, "--once")
		email := nextInterrupt(t, in, taskID, 0)
		code, _, errOut = runCtl(t, in.GRPCAddr, "task", "continue", taskID, "--message", "go on")
		expect(t, code, errOut, exitFailed, "ctl hitl show "+email.id, "ctl hitl approve|reject|edit "+email.id)
		if code, _, errOut := runCtl(t, in.GRPCAddr, "hitl", "approve", email.id); code != 0 {
			t.Fatalf("approve: %s", errOut)
		}
		// issue_refund waits durably: the runtime gives the lease up, and --once ends it.
		refund := nextInterrupt(t, in, taskID, email.seq)
		if code, _, errOut := waitCtl(t, "the first runtime", first); code != 0 {
			t.Fatalf("runtime: %s", errOut)
		}
		if code, _, errOut := runCtl(t, in.GRPCAddr, "hitl", "approve", refund.id); code != 0 {
			t.Fatalf("approve: %s", errOut)
		}
		second := ctlAsync(t, in.GRPCAddr, "runtime", "run", "--script", script, "--once")
		pause := nextInterrupt(t, in, taskID, refund.seq)
		if code, _, errOut := waitCtl(t, "the second runtime", second); code != 0 || pause.kind != agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE {
			t.Fatalf("runtime: %d %s; interrupt %v", code, errOut, pause)
		}
		code, _, errOut = runCtl(t, in.GRPCAddr, "hitl", "approve", pause.id)
		expect(t, code, errOut, exitFailed, "ctl task continue "+taskID+" --message")
	})

	t.Run("task start prints every violation with the file name", func(t *testing.T) {
		bad := writeFile(t, "bad.yaml", "apiVersion: qar/v1\nkind: AgentSpec\nmodel: gpt-4o\ncustom_code: 1\nother_code: 2\n")
		code, out, errOut := runCtl(t, in.GRPCAddr, "task", "start", "--agent", bad, "--input", "x")
		_, want, _ := runCtl(t, in.GRPCAddr, "spec", "validate", bad)
		if code != exitFailed || out != "" {
			t.Fatalf("exit %d, stdout %q", code, out)
		}
		violations := strings.Count(want, "\n")
		if violations < 3 || !strings.HasPrefix(errOut, want) {
			t.Fatalf("task start should print what spec validate prints (%d violations):\n%s\ngot:\n%s", violations, want, errOut)
		}
		if !strings.Contains(errOut, bad+" is invalid") {
			t.Errorf("no summary naming the file:\n%s", errOut)
		}
	})

	t.Run("unknown rule", func(t *testing.T) {
		code, _, errOut := runCtl(t, in.GRPCAddr, "spec", "explain", "NO-SUCH-RULE")
		expect(t, code, errOut, exitFailed, "ctl spec rules")
	})

	t.Run("page token from another listing", func(t *testing.T) {
		code, _, errOut := runCtl(t, in.GRPCAddr, "task", "list", "--page-token", "bogus")
		expect(t, code, errOut, exitFailed, "--page-token")
	})

	t.Run("no control plane", func(t *testing.T) {
		code, _, errOut := runCtl(t, "127.0.0.1:1", "health", "--timeout", "2s")
		expect(t, code, errOut, exitFailed, "Unavailable", "no control plane at 127.0.0.1:1", "--addr", "AGENTPLANE_ADDR")
		// What ctl wrapped the failure in stays in front of the hint.
		code, _, errOut = runCtl(t, "127.0.0.1:1", "task", "watch", "t-1", "--reconnects", "0")
		expect(t, code, errOut, exitFailed, "watch t-1: giving up after 0 reconnects: Unavailable: no control plane at 127.0.0.1:1")
	})
}

type raised struct {
	id   string
	kind agentplanev1.InterruptKind
	seq  int64
}

// nextInterrupt waits, on the task's own log, for the next interrupt raised after
// sequence after.
func nextInterrupt(t *testing.T, in *servertest.Instance, taskID string, after int64) raised {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := in.Client.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: taskID, AfterSequence: after})
	if err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("watching for an interrupt: %v", err)
		}
		if it := resp.GetEvent().GetInterruptRaised().GetInterrupt(); it != nil {
			return raised{id: it.GetInterruptId(), kind: it.GetKind(), seq: resp.GetEvent().GetSequence()}
		}
	}
}
