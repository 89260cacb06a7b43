package cli

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client/worker/workertest"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
)

// runBench runs a bench subcommand in-process against addr.
func runBench(t *testing.T, addr string, args ...string) (string, string, error) {
	t.Helper()
	g := &globals{addr: addr, output: "table", timeout: 30 * time.Second, stdin: strings.NewReader("")}
	cmd := newBenchCommand(g)
	var out, errOut bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

var summaryLine = `clients=\d+ total=\d+: \d+ req/s p50=[0-9.]+(µs|ms|s) p90=[0-9.]+(µs|ms|s) p99=[0-9.]+(µs|ms|s)`

func TestBenchStart(t *testing.T) {
	f := workertest.New(t)
	out, errOut, err := runBench(t, f.Addr(), "start", "--clients", "4", "--total", "50", "--conns", "2")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	if !regexp.MustCompile(`^start ` + summaryLine + ` label=bench=[0-9a-f]{8}\n$`).MatchString(out) {
		t.Fatalf("summary %q", out)
	}
	var started []*agentplanev1.StartTaskRequest
	f.Do(func(s *workertest.State) { started = s.Started })
	ids := map[string]bool{}
	for _, r := range started {
		ids[r.GetRequestId()] = true
		if f := r.GetSpec().GetFields(); f["apiVersion"].GetStringValue() != "qar/v1" || f["kind"].GetStringValue() != "AgentSpec" {
			t.Fatalf("bench spec %v", r.GetSpec())
		}
	}
	if len(started) != 50 || len(ids) != 50 {
		t.Fatalf("%d starts with %d distinct request ids, want 50 and 50", len(started), len(ids))
	}
	// On a queue of its own, and cleaned up: nothing is left for the next runtime.
	if q := started[0].GetQueue(); !regexp.MustCompile(`^bench-[0-9a-f]{8}$`).MatchString(q) {
		t.Fatalf("bench queue %q", q)
	}
	f.Do(func(s *workertest.State) {
		if len(s.Queue) != 0 || len(s.Ends) != 50 || s.Ends["task-1"] != workertest.Canceled {
			t.Fatalf("after the bench: %d tasks queued, %d ended (task-1 %q)", len(s.Queue), len(s.Ends), s.Ends["task-1"])
		}
	})
	if !strings.Contains(errOut, "canceled the 50 tasks it started") {
		t.Errorf("stderr %q", errOut)
	}
}

func TestBenchEvents(t *testing.T) {
	f := workertest.New(t)
	f.Enqueue("someone-else", nil) // not the bench's, in the default queue: left alone
	out, errOut, err := runBench(t, f.Addr(), "events", "--clients", "3", "--total", "30", "--batch", "2")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	if !regexp.MustCompile(`^events ` + summaryLine + ` batch=2 label=bench=[0-9a-f]{8}\n$`).MatchString(out) {
		t.Fatalf("summary %q", out)
	}
	var s workertest.State
	f.Do(func(st *workertest.State) { s = *st })
	if _, ended := s.Ends["someone-else"]; ended || len(s.Queue) != 1 || s.Queue[0].GetTask().GetTaskId() != "someone-else" {
		t.Errorf("the other task: end %q, queue %v", s.Ends["someone-else"], s.Queue)
	}
	events := 0
	for _, id := range []string{"task-1", "task-2", "task-3"} {
		events += len(s.Events[id])
		if s.Ends[id] != workertest.Completed {
			t.Errorf("%s ended %q", id, s.Ends[id])
		}
	}
	if events != 60 {
		t.Errorf("%d events appended, want 30 calls of 2", events)
	}
}

// TestBenchAddrs: with --addrs the connections are spread over the addresses, each
// caller's calls (and its task's lease, and the cleanup) going to its connection's
// control plane. Two fakes that share nothing show where each call went.
func TestBenchAddrs(t *testing.T) {
	a, b := workertest.New(t), workertest.New(t)
	addrs := "--addrs=" + a.Addr() + "," + b.Addr()
	if _, errOut, err := runBench(t, "127.0.0.1:1", "start", addrs, "--clients", "4", "--total", "40"); err != nil {
		t.Fatalf("start: %v: %s", err, errOut)
	}
	if _, errOut, err := runBench(t, "127.0.0.1:1", "events", addrs, "--clients", "4", "--total", "40"); err != nil {
		t.Fatalf("events: %v: %s", err, errOut)
	}
	for name, f := range map[string]*workertest.Server{"first": a, "second": b} {
		f.Do(func(s *workertest.State) {
			events := 0
			for _, ev := range s.Events {
				events += len(ev)
			}
			// Each fake got some of the starts (two of the four callers) and the
			// leases and events of two bench events tasks; each ended all its own.
			if len(s.Started) < 2 || len(s.Ends) != len(s.Started) || events == 0 || len(s.Queue) != 0 {
				t.Errorf("%s control plane: %d started, %d ended, %d events, %d queued", name, len(s.Started), len(s.Ends), events, len(s.Queue))
			}
		})
	}
}

func TestBenchGate(t *testing.T) {
	f := workertest.New(t)
	f.Do(func(s *workertest.State) {
		s.Gate = func(req *agentplanev1.CheckToolCallRequest) *agentplanev1.CheckToolCallResponse {
			return &agentplanev1.CheckToolCallResponse{Outcome: agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT,
				Interrupt: &agentplanev1.Interrupt{InterruptId: "i-" + req.GetCallId(), CallId: req.GetCallId()}}
		}
	})
	out, errOut, err := runBench(t, f.Addr(), "gate", "--total", "20")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	if !regexp.MustCompile(`^gate ` + summaryLine + ` check_p50=\S+ check_p99=\S+ deliver_p50=\S+ deliver_p99=\S+\n$`).MatchString(out) {
		t.Fatalf("summary %q", out)
	}
	var s workertest.State
	f.Do(func(st *workertest.State) { s = *st })
	if len(s.Checks) != 20 || len(s.Resolutions) != 20 || s.Ends["task-1"] != workertest.Completed {
		t.Fatalf("%d checks, %d resolutions, end %q", len(s.Checks), len(s.Resolutions), s.Ends["task-1"])
	}
	if p := s.Started[0].GetInterruptPolicy().GetAllowlist().GetTools(); len(p) != 1 || p[0] != benchGatedTool {
		t.Errorf("bench task policy %v", s.Started[0].GetInterruptPolicy())
	}
}

func TestBenchGateTakesTwoAddrs(t *testing.T) {
	_, _, err := runBench(t, "127.0.0.1:1", "gate", "--addrs=127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "--total", "3")
	if err == nil || !strings.Contains(err.Error(), "at most two --addrs") {
		t.Fatalf("err %v", err)
	}
}

func TestBenchGateNeedsAnInterrupt(t *testing.T) {
	f := workertest.New(t) // its gate allows everything
	_, _, err := runBench(t, f.Addr(), "gate", "--total", "3")
	if err == nil || !strings.Contains(err.Error(), "the gate answered GATE_OUTCOME_ALLOW") {
		t.Fatalf("err %v", err)
	}
}

func TestPercentileAndFormat(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.9, 90 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}} {
		if got := percentile(lat, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p*100, got, tc.want)
		}
	}
	if percentile(nil, 0.5) != 0 {
		t.Error("percentile of nothing")
	}
	for d, want := range map[time.Duration]string{
		512 * time.Microsecond: "512µs", 1210 * time.Microsecond: "1.21ms", 12345 * time.Microsecond: "12.3ms", 2500 * time.Millisecond: "2.5s",
	} {
		if got := fmtLatency(d); got != want {
			t.Errorf("fmtLatency(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{{"start", "--clients", "0"}, {"events", "--total", "-1"}, {"events", "--batch", "-2"}} {
		_, _, err := runBench(t, "127.0.0.1:1", args...)
		var ee *exitError
		if err == nil || !errors.As(err, &ee) || ee.code != exitUsage {
			t.Errorf("%v: %v", args, err)
		}
	}
}

func TestBenchHealth(t *testing.T) {
	in := servertest.Start(t, nil)
	out, errOut, err := runBench(t, in.GRPCAddr, "health", "--clients", "4", "--total", "200", "--conns", "2")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	if !regexp.MustCompile(`^health ` + summaryLine + `\n$`).MatchString(out) {
		t.Fatalf("summary %q", out)
	}
}

// TestBenchStartBuildsItsSpecOnce: every StartTask of a run sends the one Struct the run
// built (the request id still differs), so the client's cost per call is not a Struct.
func TestBenchStartBuildsItsSpecOnce(t *testing.T) {
	b := &benchRun{id: "x", specs: [2]*structpb.Struct{specwire.MustStruct(benchAgent(false)), specwire.MustStruct(benchAgent(true))}}
	for _, gated := range []bool{false, true} {
		r1, r2 := b.startRequest(1, gated), b.startRequest(2, gated)
		if r1.GetSpec() != r2.GetSpec() || r1.GetSpec() != b.spec(gated) || r1.GetRequestId() == r2.GetRequestId() {
			t.Fatalf("gated=%v: specs %p and %p, request ids %q and %q", gated, r1.GetSpec(), r2.GetSpec(), r1.GetRequestId(), r2.GetRequestId())
		}
		if !proto.Equal(r1.GetSpec(), specwire.MustStruct(benchAgent(gated))) {
			t.Fatalf("gated=%v: the run's spec is not benchAgent's", gated)
		}
	}
	if b.spec(false) == b.spec(true) {
		t.Fatal("the gated and plain runs share a spec")
	}
}
