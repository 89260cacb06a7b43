package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/testutil"
)

// TestReadmeTour runs the README's "A short tour" as a user would type it: it builds
// ctl and controlplane, starts a control plane on a temporary data directory and free
// ports, and runs every line of the tour's code blocks with sh in the repository root,
// ctl on the PATH and AGENTPLANE_ADDR pointing at the control plane. TASK_ID and
// INTERRUPT_ID are taken from the output of the lines before, as a user would, and
// the default addresses are replaced by the real ones. Lines ending in & run in the
// background until the test ends. Each line's outcome is checked against what the
// README says it does.
func TestReadmeTour(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ctl and controlplane and runs the README tour against them")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := tourLines(t, string(readme))

	bin := t.TempDir()
	for _, pkg := range []string{"./cmd/ctl", "./cmd/controlplane"} {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	grpcAddr, httpAddr := startControlPlane(t, filepath.Join(bin, "controlplane"))

	tour := &tour{t: t, root: root, env: append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"AGENTPLANE_ADDR="+grpcAddr, "AGENTPLANE_TOKEN=", "HOME="+t.TempDir()),
		replacer: strings.NewReplacer("127.0.0.1:7233", grpcAddr, "127.0.0.1:7280", httpAddr)}
	for _, l := range lines {
		tour.run(l)
	}
	tour.finish()
}

// tourLine is one command of the tour, with its comment and, when the README shows
// the output below it (a comment line of its own), that output.
type tourLine struct {
	command, comment, shown string
}

// tourLines extracts the commands of the ```sh blocks of the README's tour section,
// joining continued lines. The A2A step is a ```bash block, not run here: it restarts
// the control plane with the example's static agents and runs a multi-line Node
// script; server/a2a's TestA2AJSClient makes the same calls with the same client.
func tourLines(t *testing.T, readme string) []tourLine {
	t.Helper()
	start := strings.Index(readme, "\n## A short tour")
	if start < 0 {
		t.Fatal("README has no \"A short tour\" section")
	}
	section := readme[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var out []tourLine
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1)
	for _, b := range blocks {
		text := strings.ReplaceAll(b[1], "\\\n", " ")
		for _, raw := range strings.Split(text, "\n") {
			raw = strings.TrimSpace(raw)
			switch {
			case raw == "":
			case strings.HasPrefix(raw, "#"):
				if len(out) > 0 {
					out[len(out)-1].shown = strings.TrimSpace(strings.TrimPrefix(raw, "#"))
				}
			default:
				command, comment, _ := strings.Cut(raw, " # ")
				out = append(out, tourLine{command: strings.Join(strings.Fields(command), " "), comment: comment})
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %d tour lines", len(out))
	}
	return out
}

// startControlPlane starts the binary on free loopback ports and a fresh data
// directory and returns its addresses; it is stopped with SIGTERM when the test ends.
func startControlPlane(t *testing.T, bin string) (grpcAddr, httpAddr string) {
	t.Helper()
	cmd := exec.Command(bin, "--data-dir", t.TempDir(), "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-level", "warn")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testutil.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	addrs := make(chan [2]string, 1)
	go func() {
		defer close(done)
		defer func() { _ = cmd.Wait() }()
		var a [2]string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) >= 2 && f[0] == "gRPC":
				a[0] = f[1]
			case len(f) >= 2 && f[0] == "HTTP/JSON":
				a[1] = strings.TrimPrefix(f[1], "http://")
			case len(f) >= 1 && f[0] == "store":
				addrs <- a
			}
		}
	}()
	select {
	case a := <-addrs:
		if a[0] == "" || a[1] == "" {
			t.Fatalf("control plane addresses not printed: %q", a)
		}
		return a[0], a[1]
	case <-done:
		t.Fatalf("control plane exited: %s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("control plane did not start: %s", stderr.String())
	}
	return "", ""
}

type tour struct {
	t        *testing.T
	root     string
	env      []string
	replacer *strings.Replacer

	taskID, interruptID string
	hitlLists           int
	background          []*bgProcess
}

type bgProcess struct {
	line   string
	queues []string // the run queues a runtime serves (--queue; default "default")
	cmd    *exec.Cmd
	out    *testutil.SyncBuffer
	done   chan struct{}
}

// settle bounds how long a line whose outcome depends on a runtime's progress (an
// interrupt showing up in the inbox, a turn ending) is retried, as a person would
// look again.
const settle = 60 * time.Second

// run runs one tour line and checks what the README says about it.
func (r *tour) run(l tourLine) {
	t := r.t
	typed := l.command
	command := r.replacer.Replace(strings.NewReplacer("TASK_ID", r.taskID, "INTERRUPT_ID", r.interruptID).Replace(typed))
	if strings.Contains(typed, "TASK_ID") && r.taskID == "" || strings.Contains(typed, "INTERRUPT_ID") && r.interruptID == "" {
		t.Fatalf("%s: no id from the lines before", typed)
	}
	if bg, ok := strings.CutSuffix(command, "&"); ok {
		r.startBackground(typed, strings.TrimSpace(bg))
		return
	}
	program := strings.Fields(command)[0]
	if _, err := exec.LookPath(program); err != nil && program != "ctl" {
		t.Logf("skipped (%s is not installed here): %s", program, typed)
		return
	}

	// Lines whose outcome waits on a runtime's progress are looked at again, as a
	// person would; any other line is run once.
	waits := typed == "ctl hitl list" || strings.HasPrefix(typed, "ctl task continue")
	deadline := time.Now().Add(settle)
	for {
		out, err := r.sh(command)
		ready, why := r.check(l, out, err)
		if ready {
			break
		}
		if !waits || time.Now().After(deadline) {
			r.fail(typed, "%s\n%s", why, out)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// fail reports a line that does not do what the README says.
func (r *tour) fail(typed, format string, args ...any) {
	r.t.Helper()
	args = append([]any{typed}, args...)
	r.t.Errorf("README line %q: "+format, args...)
}

// check says whether a line's output is what the README claims, and if not, why.
func (r *tour) check(l tourLine, out string, err error) (bool, string) {
	typed := l.command
	failed := func() (bool, string) { return false, "failed: " + errText(err) }
	switch {
	case typed == "ctl health":
		if err != nil || !strings.Contains(out, "SERVING") {
			return false, "want SERVING"
		}
	case strings.HasPrefix(typed, "ctl task start"):
		if err != nil {
			return failed()
		}
		m := regexp.MustCompile(`(?m)^TASK\s+(\S+)`).FindStringSubmatch(out)
		if m == nil {
			return false, "no task id printed"
		}
		r.taskID = m[1]
		// Routing: exactly one of the runtimes running now serves the task's queue, so
		// no runtime takes a task meant for another script.
		q := regexp.MustCompile(`(?m)^queue\s+(\S+)`).FindStringSubmatch(out)
		if q == nil {
			return false, "no queue printed"
		}
		var serving []string
		for _, p := range r.background {
			if slices.Contains(p.queues, q[1]) {
				serving = append(serving, p.line)
			}
		}
		if len(serving) != 1 {
			return false, fmt.Sprintf("task %s is on queue %q, which %d of the running runtimes serve (%q); want exactly one", r.taskID, q[1], len(serving), serving)
		}
		if err != nil || !strings.Contains(out, r.taskID) {
			return false, "the task started just before is not listed"
		}
	case strings.HasPrefix(typed, "ctl task watch"):
		// It replays the log and follows it until the task ends: it returns.
		if err != nil {
			return failed()
		}
		if !strings.Contains(out, "-> completed") {
			return false, "the watch ended without the task completing"
		}
	case typed == "ctl hitl list":
		// The comments say what waits: first send_email, then issue_refund.
		tool := []string{"send_email", "issue_refund"}[min(r.hitlLists, 1)]
		if err != nil {
			return failed()
		}
		m := regexp.MustCompile(`(?m)^(\S+)\s+` + regexp.QuoteMeta(r.taskID) + `\s+` + tool + `\b`).FindStringSubmatch(out)
		if m == nil {
			return false, tool + " of task " + r.taskID + " is not in the inbox"
		}
		r.interruptID = m[1]
		r.hitlLists++
	case strings.HasPrefix(typed, "ctl task continue"):
		// The task pauses at the end of its turn once the runtime gets there.
		if err != nil {
			return failed()
		}
	case l.shown != "":
		// The README shows the output on the line below (JSON compared without its
		// insignificant spaces, which protojson varies on purpose).
		if err != nil || compactJSON(out) != compactJSON(l.shown) {
			return false, "want the output the README shows: " + l.shown
		}
	default:
		if err != nil {
			return failed()
		}
	}
	return true, ""
}

// compactJSON is s without insignificant spaces if it is JSON, else s trimmed.
func compactJSON(s string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(strings.TrimSpace(s))) != nil {
		return strings.TrimSpace(s)
	}
	return b.String()
}

func errText(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

// sh runs a command line in the repository root, with a deadline.
func (r *tour) sh(command string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), settle)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Dir, cmd.Env = r.root, r.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (r *tour) startBackground(typed, command string) {
	cmd := exec.Command("sh", "-c", "exec "+command)
	cmd.Dir, cmd.Env = r.root, r.env
	p := &bgProcess{line: typed, cmd: cmd, out: &testutil.SyncBuffer{}, done: make(chan struct{}), queues: []string{"default"}}
	if m := regexp.MustCompile(`--queue[= ](\S+)`).FindAllStringSubmatch(command, -1); m != nil {
		p.queues = nil
		for _, q := range m {
			p.queues = append(p.queues, strings.Split(q[1], ",")...)
		}
	}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("%s: %v", typed, err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	r.background = append(r.background, p)
	r.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
}

// finish checks the background runtimes: each is still serving, and each played only
// the tasks started for it (the approval task went to the approval runtime alone).
func (r *tour) finish() {
	t := r.t
	for _, p := range r.background {
		select {
		case <-p.done:
			t.Errorf("%s exited early:\n%s", p.line, p.out.String())
		default:
		}
	}
	var hello, approval *bgProcess
	for _, p := range r.background {
		switch {
		case strings.Contains(p.line, "hello.yaml"):
			hello = p
		case strings.Contains(p.line, "approval.yaml"):
			approval = p
		}
	}
	if hello == nil || approval == nil {
		t.Fatal("the tour does not run both the hello and the approval runtime")
	}
	// r.taskID is the approval task, the last one started.
	if strings.Contains(hello.out.String(), r.taskID) {
		t.Errorf("the hello runtime played the approval task %s:\n%s", r.taskID, hello.out.String())
	}
	if !strings.Contains(approval.out.String(), r.taskID+": completed") {
		t.Errorf("the approval runtime did not complete task %s:\n%s", r.taskID, approval.out.String())
	}
}
