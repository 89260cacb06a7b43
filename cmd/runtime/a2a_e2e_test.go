package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/runtime/internal/agenttest"
	"github.com/agentplane/agentplane/cmd/runtime/internal/fakemodel"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/servertest"
)

// TestTwoControlPlanesOverA2A: agentplane calling agentplane over A2A v1.0, each side
// with its own control plane and runtime, all four real processes (the controlplane
// and runtime binaries). A's agent has B's static
// agent "shipping" as an A2A peer: the call is gated on A and approved there; A's
// runtime calls B's A2A face (v1.0 JSON-RPC, read from B's card); B's agent calls its
// HTTP tool lookup_order, gated on B by a2a.agents.shipping.interrupt_policy. While
// that call waits for B's approver, B's runtime is SIGKILLed; the call is approved on
// B with no B runtime up, a new B runtime takes the task over, runs the tool once and
// completes; A's call, which kept polling B's task, returns B's answer and A's task
// completes with it. Both task logs are gap-free and hold every step, the tool ran once
// and neither model was asked twice for the same turn.
func TestTwoControlPlanesOverA2A(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir := t.TempDir()
	bin := buildBinary(t, dir, ".", "runtime")
	cpBin := buildBinary(t, dir, "../controlplane", "controlplane")

	// Control plane B: the static agent "shipping", on its own queue, its lookups gated.
	specB := filepath.Join(dir, "shipping.yaml")
	if err := os.WriteFile(specB, []byte("apiVersion: qar/v1\nkind: AgentSpec\nname: shipping\ninstructions: Track parcels with lookup_order.\nmodel: fake-b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startControlPlane(t, cpBin, fmt.Sprintf(`tasks: {lease_ttl: 2s}
spec:
  static_agents: {shipping: %q}
a2a:
  blocking_timeout: 1s
  agents:
    shipping:
      description: Knows where parcels are.
      queue: shipping
      interrupt_policy: {allowlist: {tools: [lookup_order]}}
`, specB))
	a := startControlPlane(t, cpBin, "")

	modelB := fakemodel.Start(t,
		fakemodel.Turn{Calls: []fakemodel.Call{{ID: "b1", Name: "lookup_order", Arguments: `{"order_id":42}`}}},
		fakemodel.Turn{Text: "Order 42 is on the truck and arrives tomorrow."},
	)
	modelA := fakemodel.Start(t,
		fakemodel.Turn{Calls: []fakemodel.Call{{ID: "a1", Name: "a2a__shipping__shipping", Arguments: `{"message":"Where is order 42?"}`}}},
		fakemodel.Turn{Text: "The shipping desk says order 42 arrives tomorrow."},
	)
	var lookups atomic.Int32
	lookup := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lookups.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"order_id":42,"status":"on the truck","eta":"tomorrow"}`)
	}))
	defer lookup.Close()

	cfgA := writeFile(t, "runtime-a.yaml", fmt.Sprintf(`control_plane: {address: %q}
concurrency: 1
log_level: warn
models:
  - {match: "fake-*", base_url: %q, max_retries: 0}
`, a.GRPCAddr, modelA.URL))
	cfgB := writeFile(t, "runtime-b.yaml", fmt.Sprintf(`control_plane: {address: %q}
queues: [shipping]
concurrency: 1
log_level: warn
models:
  - {match: "fake-*", base_url: %q, max_retries: 0}
tools:
  - name: lookup_order
    description: Look an order's parcel up
    parameters: {type: object, properties: {order_id: {type: integer}}, required: [order_id]}
    url: %q
    timeout: 10s
`, b.GRPCAddr, modelB.URL, lookup.URL))

	// A reaches B's HTTP listener through a proxy that records the A2A calls.
	bURL, seen := recordingProxy(t, "http://"+b.HTTPAddr)
	_, logsA := startRuntime(t, bin, cfgA, "a-1")
	firstB, logsB := startRuntime(t, bin, cfgB, "b-1")

	taskA := agenttest.StartTask(t, ctx, a, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Document{Document: []byte("apiVersion: qar/v1\nkind: AgentSpec\nname: support\ninstructions: Help, asking the shipping desk.\nmodel: fake-a\n")},
		Format: agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML, Input: client.UserText("where is my order 42?"),
		A2APeers: &agentplanev1.A2APeerList{Peers: []*agentplanev1.A2APeer{{Name: "shipping", Url: bURL + "/a2a/shipping"}}},
		InterruptPolicy: &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Allowlist{Allowlist: &agentplanev1.ToolListPolicy{
			Tools: []string{"nothing_else"}}}},
	})

	// On A: the A2A call waits for A's approver; B has no task yet.
	itA := waitInterrupt(t, ctx, a, &agentplanev1.ListInterruptsRequest{TaskId: taskA}, logsA)
	if got := itA.GetApproval().GetToolName(); got != "a2a__shipping__shipping" {
		t.Fatalf("A's interrupt is for %q", got)
	}
	if l, err := b.Client.Tasks.ListTasks(ctx, &agentplanev1.ListTasksRequest{}); err != nil || len(l.GetTasks()) != 0 {
		t.Fatalf("B has %d tasks (%v) before A's call was approved", len(l.GetTasks()), err)
	}
	agenttest.Approve(t, ctx, a, itA)

	// On B: A's call started B's task; its lookup waits for B's approver. Kill B's runtime.
	itB := waitInterrupt(t, ctx, b, &agentplanev1.ListInterruptsRequest{ToolName: "lookup_order"}, logsB)
	taskB := itB.GetTaskId()
	if err := firstB.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = firstB.Wait()
	agenttest.Approve(t, ctx, b, itB)
	if n := lookups.Load(); n != 0 {
		t.Fatalf("the lookup ran %d times with no B runtime up", n)
	}
	_, logsB2 := startRuntime(t, bin, cfgB, "b-2")

	doneB := waitTaskState(t, ctx, b, taskB, logsB2, agentplanev1.TaskState_TASK_STATE_COMPLETED, agentplanev1.TaskState_TASK_STATE_FAILED)
	if doneB.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || client.MessageText(doneB.GetOutput().GetMessage()) != "Order 42 is on the truck and arrives tomorrow." {
		t.Fatalf("B's task %v %v %v; log:\n%s", doneB.GetState(), doneB.GetFailure(), doneB.GetOutput(), logsB2)
	}
	doneA := waitTaskState(t, ctx, a, taskA, logsA, agentplanev1.TaskState_TASK_STATE_COMPLETED, agentplanev1.TaskState_TASK_STATE_FAILED)
	if doneA.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || client.MessageText(doneA.GetOutput().GetMessage()) != "The shipping desk says order 42 arrives tomorrow." {
		t.Fatalf("A's task %v %v %v; log:\n%s", doneA.GetState(), doneA.GetFailure(), doneA.GetOutput(), logsA)
	}

	if n := lookups.Load(); n != 1 {
		t.Errorf("the lookup ran %d times, want exactly 1", n)
	}
	if n := len(modelB.Requests()); n != 2 {
		t.Errorf("B's model got %d requests, want 2 (none repeated by the second runtime)", n)
	}
	reqsA := modelA.Requests()
	if len(reqsA) != 2 || !strings.Contains(string(reqsA[1].Messages[len(reqsA[1].Messages)-1]), "Order 42 is on the truck and arrives tomorrow.") {
		t.Errorf("A's model got %d requests; the last did not carry B's answer", len(reqsA))
	}

	// Both logs: gap-free, and each step once, in order.
	evA := checkLog(t, ctx, a, taskA, "a2a__shipping__shipping", "Order 42 is on the truck and arrives tomorrow.")
	evB := checkLog(t, ctx, b, taskB, "lookup_order", `"on the truck"`)
	if !strings.Contains(evA, "lease") || strings.Count(evB, "lease") < 2 {
		t.Errorf("leases: A %s; B %s (want B's task leased by both of B's runtimes)", evA, evB)
	}
	if task := agenttest.Task(t, ctx, b, taskB); task.GetLabels()["a2a.agent"] != "shipping" {
		t.Errorf("B's task labels %v", task.GetLabels())
	}
	// A's runtime spoke v1.0 to B: SendMessage, then GetTask polls; no 0.3 method.
	calls := seen()
	if len(calls) < 2 || calls[0] != "1.0 SendMessage" {
		t.Errorf("A's calls to B: %q, want 1.0 SendMessage then 1.0 GetTask polls", calls)
	}
	for _, c := range calls[1:] {
		if c != "1.0 GetTask" {
			t.Errorf("A's calls to B: %q, want 1.0 SendMessage then 1.0 GetTask polls", calls)
			break
		}
	}
}

// recordingProxy forwards to target as a load balancer in front of it would (the Host
// header kept), recording the A2A-Version header and JSON-RPC method of each POST.
func recordingProxy(t *testing.T, target string) (string, func() []string) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	var (
		mu    sync.Mutex
		calls []string
	)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			var req struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(body, &req)
			mu.Lock()
			calls = append(calls, r.Header.Get("A2A-Version")+" "+req.Method)
			mu.Unlock()
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), calls...)
	}
}

// startControlPlane runs the controlplane binary with config (YAML) on loopback ports
// and a fresh data directory until the test ends, and dials it. The Instance it
// returns has Client, GRPCAddr and HTTPAddr set.
func startControlPlane(t *testing.T, bin, config string) *servertest.Instance {
	t.Helper()
	cfgFile := writeFile(t, "controlplane.yaml", config+"log: {level: warn}\n")
	cmd := exec.Command(bin, "--data-dir", t.TempDir(), "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "AGENTPLANE_CONFIG="+cfgFile)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &testutil.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	type addrs struct{ grpc, http string }
	ready := make(chan addrs, 1)
	go func() {
		var a addrs
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) >= 2 && f[0] == "gRPC":
				a.grpc = f[1]
			case len(f) >= 2 && f[0] == "HTTP/JSON":
				a.http = strings.TrimPrefix(f[1], "http://")
				ready <- a
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var got addrs
	select {
	case got = <-ready:
	case <-time.After(30 * time.Second):
		t.Fatalf("controlplane did not print its addresses\n%s", stderr)
	}
	c, err := client.Dial(context.Background(), got.grpc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &servertest.Instance{Client: c, GRPCAddr: got.grpc, HTTPAddr: got.http}
}

// waitInterrupt waits for the first pending interrupt req lists.
func waitInterrupt(t *testing.T, ctx context.Context, in *servertest.Instance, req *agentplanev1.ListInterruptsRequest, logs *testutil.SyncBuffer) *agentplanev1.Interrupt {
	t.Helper()
	for {
		l, err := in.Client.Hitl.ListInterrupts(ctx, req)
		if err != nil {
			t.Fatalf("ListInterrupts: %v", err)
		}
		for _, it := range l.GetInterrupts() {
			if it.GetState() == agentplanev1.InterruptState_INTERRUPT_STATE_PENDING {
				return it
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no interrupt for %v; runtime log:\n%s", req, logs)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// checkLog checks that the task's log has no gap in its sequence numbers and holds
// tool's call gated, approved, called once and answered once with a result holding
// want, before the task's output, in that order. It returns the log's event kinds.
func checkLog(t *testing.T, ctx context.Context, in *servertest.Instance, taskID, tool, want string) string {
	t.Helper()
	evs := agenttest.Events(t, ctx, in, taskID)
	var kinds []string
	step := 0
	steps := []string{"tool_gated", "interrupt_resolved", "tool_call", "tool_result", "output"}
	calls, results := 0, 0
	for i, ev := range evs {
		if ev.GetSequence() != evs[0].GetSequence()+int64(i) {
			t.Errorf("task %s: event %d has sequence %d after %d", taskID, i, ev.GetSequence(), evs[i-1].GetSequence())
		}
		kind := ""
		switch {
		case ev.GetToolGated() != nil && ev.GetToolGated().GetToolName() == tool:
			kind = "tool_gated"
		case ev.GetInterruptResolved() != nil:
			kind = "interrupt_resolved"
		case ev.GetToolCall() != nil && ev.GetToolCall().GetToolName() == tool:
			kind = "tool_call"
			calls++
		case ev.GetToolResult() != nil && ev.GetToolResult().GetToolName() == tool:
			kind = "tool_result"
			results++
			if r := ev.GetToolResult(); r.GetIsError() || !strings.Contains(r.GetResult().GetStringValue(), want) {
				t.Errorf("task %s: %s's result %v (error %v), want %q", taskID, tool, r.GetResult(), r.GetIsError(), want)
			}
		case ev.GetOutput() != nil:
			kind = "output"
		case ev.GetLease() != nil:
			kind = "lease"
		default:
			kind = strings.TrimPrefix(fmt.Sprintf("%T", ev.GetPayload()), "*agentplanev1.TaskEvent_")
		}
		kinds = append(kinds, kind)
		if step < len(steps) && kind == steps[step] {
			step++
		}
	}
	if step != len(steps) || calls != 1 || results != 1 {
		t.Errorf("task %s's log %v: want %v in order, one call and one result of %s", taskID, kinds, steps, tool)
	}
	return strings.Join(kinds, " ")
}
