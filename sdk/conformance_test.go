//go:build unix

package sdk_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// The conformance scenarios (testdata/conformance/scenarios.json) run against the three
// SDKs: the same expectations, read from that one file, checked against what each SDK's
// driver saw. The server side is real: a control plane process with its bbolt file, a
// proxy in front of it that fails calls, a SIGKILL and a restart, a lease handed back
// behind the runtime's back.

type conformanceCall struct {
	Method           string          `json:"method"`
	Request          json.RawMessage `json:"request"`
	FailFirst        int             `json:"fail_first"`
	WantAttempts     int             `json:"want_attempts"`
	WantCode         string          `json:"want_code"`
	WantReason       string          `json:"want_reason"`
	WantMetadataKeys []string        `json:"want_metadata_keys"`
}

type conformanceScenario struct {
	Name            string            `json:"name"`
	Calls           []conformanceCall `json:"calls"`
	EventsBefore    int               `json:"events_before"`
	EventsAfter     int               `json:"events_after"`
	WantWaitState   string            `json:"want_wait_state"`
	Queue           string            `json:"queue"`
	WantWriteReason string            `json:"want_write_reason"`
	WantStopReason  string            `json:"want_stop_reason"`
}

func loadScenarios(t *testing.T) map[string]conformanceScenario {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "conformance", "scenarios.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Scenarios []conformanceScenario `json:"scenarios"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("scenarios.json: %v", err)
	}
	out := map[string]conformanceScenario{}
	for _, s := range f.Scenarios {
		out[s.Name] = s
	}
	for _, name := range []string{"retry_after_unavailable", "watch_across_restart", "lease_lost_mid_handler", "error_reason_and_metadata"} {
		if _, ok := out[name]; !ok {
			t.Fatalf("scenarios.json has no scenario %q", name)
		}
	}
	return out
}

// wireOf resolves a reason named as in errors.proto without ERROR_REASON_ to its wire string.
func wireOf(t *testing.T, name string) string {
	t.Helper()
	v, ok := agentplanev1.ErrorReason_value["ERROR_REASON_"+name]
	if !ok {
		t.Fatalf("no reason %s in errors.proto", name)
	}
	return reasons.Wire(agentplanev1.ErrorReason(v))
}

var stopReasonNames = map[string]string{
	"LEASE_LOST": worker.StopLeaseLost, "CANCELED": worker.StopCanceled, "STOPPING": worker.StopStopping,
}

// TestConformanceScenariosFollowThePolicy: the attempts scenarios.json expects are what
// the generated retry policy gives, so the file cannot drift from the policy.
func TestConformanceScenariosFollowThePolicy(t *testing.T) {
	sc := loadScenarios(t)["retry_after_unavailable"]
	seen := map[client.Idempotency]bool{}
	for _, c := range sc.Calls {
		retry := client.Retryable("/"+c.Method, status.Error(codes.Unavailable, "proxy"))
		want := 1
		if retry {
			want = min(c.FailFirst+1, client.RetryAttempts)
		}
		wantCode := "OK"
		if c.FailFirst >= want {
			wantCode = "UNAVAILABLE"
		}
		if c.WantAttempts != want || c.WantCode != wantCode {
			t.Errorf("%s failing %d times: scenarios.json expects %d attempts and %s; the policy makes %d and %s",
				c.Method, c.FailFirst, c.WantAttempts, c.WantCode, want, wantCode)
		}
		seen[idempotencyOf(t, c.Method)] = true
	}
	// The scenario covers every level: a read, a write idempotent by its request id, a call never repeated.
	for _, l := range []client.Idempotency{client.NoSideEffects, client.Idempotent, client.IdempotencyUnknown} {
		if !seen[l] {
			t.Errorf("retry_after_unavailable has no call of idempotency level %d", l)
		}
	}
	for name, value := range stopReasonNames {
		if value == "" {
			t.Errorf("stop reason %s has no value", name)
		}
	}
}

// idempotencyOf reads a method's idempotency_level from the compiled descriptors.
func idempotencyOf(t *testing.T, method string) client.Idempotency {
	t.Helper()
	switch methodDesc(t, method).Options().(*descriptorpb.MethodOptions).GetIdempotencyLevel() {
	case descriptorpb.MethodOptions_NO_SIDE_EFFECTS:
		return client.NoSideEffects
	case descriptorpb.MethodOptions_IDEMPOTENT:
		return client.Idempotent
	}
	return client.IdempotencyUnknown
}

func methodDesc(t *testing.T, method string) protoreflect.MethodDescriptor {
	t.Helper()
	service, name, _ := strings.Cut(method, "/")
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	md := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(name))
	if md == nil {
		t.Fatalf("no method %s", method)
	}
	return md
}

// TestConformance runs every scenario against the Go, TypeScript and Python SDKs.
func TestConformance(t *testing.T) {
	skip := skipped(t)
	scenarios := loadScenarios(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := buildControlPlane(t, root)
	trackInputs(t, root, "testdata/conformance", "sdk/conformance")
	drivers := []conformanceDriver{{lang: "go"}, {lang: "typescript"}, {lang: "python"}}
	for i := range drivers {
		d := &drivers[i]
		switch d.lang {
		case "go":
			exe := filepath.Join(t.TempDir(), "godriver")
			run(t, root, nil, "go", "build", "-o", exe, "./sdk/conformance/godriver")
			d.argv = []string{exe}
		case "typescript":
			if skip["ts"] {
				continue
			}
			sdkDir := filepath.Join(root, "sdk", "typescript")
			trackInputs(t, root, "sdk/typescript/src", "sdk/typescript/test/conformance-driver.ts", "sdk/typescript/gen",
				"sdk/typescript/package.json", "sdk/typescript/package-lock.json", "sdk/typescript/tsconfig.json")
			requireNodeModules(t, sdkDir)
			run(t, sdkDir, nil, "npm", "run", "build")
			d.argv = []string{"node", filepath.Join(sdkDir, "dist", "test", "conformance-driver.js")}
		case "python":
			if skip["py"] {
				continue
			}
			trackInputs(t, root, "sdk/python/src", "sdk/python/tests/conformance_driver.py")
			d.argv = []string{python, filepath.Join(root, "sdk", "python", "tests", "conformance_driver.py")}
			d.env = []string{"PYTHONDONTWRITEBYTECODE=1"}
		}
	}
	for _, d := range drivers {
		t.Run(d.lang, func(t *testing.T) {
			if d.argv == nil {
				t.Skipf("!!! %s: the %s SDK's conformance was NOT checked", skipEnv, d.lang)
			}
			t.Run("retry_after_unavailable", func(t *testing.T) { conformRetry(t, bin, d, scenarios["retry_after_unavailable"]) })
			t.Run("watch_across_restart", func(t *testing.T) { conformWatch(t, bin, d, scenarios["watch_across_restart"]) })
			t.Run("lease_lost_mid_handler", func(t *testing.T) { conformLeaseLost(t, bin, d, scenarios["lease_lost_mid_handler"]) })
			t.Run("error_reason_and_metadata", func(t *testing.T) { conformErrors(t, bin, d, scenarios["error_reason_and_metadata"]) })
		})
	}
}

// conformRetry: a proxy fails the first attempts of each call with a bare UNAVAILABLE.
func conformRetry(t *testing.T, bin string, d conformanceDriver, sc conformanceScenario) {
	cp := startConformanceServer(t, bin)
	px := startFailingProxy(t, cp.addr)
	for _, c := range sc.Calls {
		px.failFirst["/"+c.Method] = c.FailFirst
	}
	dr := d.start(t, px.addr(), map[string]any{"name": sc.Name, "calls": sc.Calls})
	for _, c := range sc.Calls {
		got := dr.next(t)
		if got["method"] != c.Method {
			t.Fatalf("driver reported %v, want the result of %s", got, c.Method)
		}
		ids := px.attempts("/" + c.Method)
		if got["code"] != c.WantCode || len(ids) != c.WantAttempts {
			t.Errorf("%s failing %d times: %v after %d attempts; want %s after %d", c.Method, c.FailFirst, got["code"], len(ids), c.WantCode, c.WantAttempts)
		}
		if methodDesc(t, c.Method).Input().Fields().ByName("request_id") == nil {
			continue
		}
		if len(ids) == 0 || ids[0] == "" || slices.ContainsFunc(ids, func(id string) bool { return id != ids[0] }) {
			t.Errorf("%s: request ids of the attempts %q; want one id, generated once and sent with every attempt", c.Method, ids)
		}
		if got["caller_request_id"] != "" {
			t.Errorf("%s: the caller's request_id became %v; the caller's message must stay as it was", c.Method, got["caller_request_id"])
		}
	}
	dr.finish(t)
}

// conformWatch: the test is the task's runtime; the server is SIGKILLed and started again
// on the same port and bbolt file while the driver watches.
func conformWatch(t *testing.T, bin string, d conformanceDriver, sc conformanceScenario) {
	cp := startConformanceServer(t, bin)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := dialTest(t, ctx, cp.addr)
	queue := "conformance-watch-" + d.lang
	started, err := c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{Source: &agentplanev1.StartTaskRequest_Document{Document: []byte(conformanceAgent)}, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	taskID := started.GetTask().GetTaskId()
	leased, err := c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "conformance-test", MaxTasks: 1, Queues: []string{queue}, Wait: durationpb.New(10 * time.Second)})
	if err != nil || len(leased.GetLeases()) != 1 {
		t.Fatalf("LeaseTasks = %v, %v", leased, err)
	}
	l := leased.GetLeases()[0]
	ref := &agentplanev1.LeaseRef{TaskId: taskID, LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
	if _, err := c.Runtime.Heartbeat(ctx, &agentplanev1.HeartbeatRequest{Lease: ref}); err != nil {
		t.Fatal(err)
	}
	say := func(i int) int64 {
		resp, err := c.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{
			Lease: ref, Events: []*agentplanev1.RuntimeEvent{worker.MessageEvent(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, fmt.Sprintf("message %d", i), "")},
		})
		if err != nil {
			t.Fatalf("ReportEvents %d: %v", i, err)
		}
		return resp.GetLastSequence()
	}
	var last int64
	for i := range sc.EventsBefore {
		last = say(i)
	}
	dr := d.start(t, cp.addr, map[string]any{"name": sc.Name, "task_id": taskID})
	var seqs []int64
	var waited string
	collect := func(m map[string]any) {
		switch {
		case m["seq"] != nil:
			seqs = append(seqs, int64(m["seq"].(float64)))
		case m["wait"] != nil:
			waited = m["wait"].(string)
		default:
			t.Errorf("driver: %v", m)
		}
	}
	for len(seqs) == 0 || seqs[len(seqs)-1] < last {
		collect(dr.next(t))
	}
	cp.restart(t)
	for i := range sc.EventsAfter {
		say(sc.EventsBefore + i)
	}
	if _, err := c.Runtime.CompleteTask(ctx, &agentplanev1.CompleteTaskRequest{Lease: ref, Output: &agentplanev1.TaskOutput{}}); err != nil {
		t.Fatal(err)
	}
	for m := dr.next(t); m["done"] == nil; m = dr.next(t) {
		collect(m)
	}
	dr.finish(t)
	events, err := c.Tasks.ListTaskEvents(ctx, &agentplanev1.ListTaskEventsRequest{TaskId: taskID, PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for _, e := range events.GetEvents() {
		want = append(want, e.GetSequence())
	}
	if !slices.Equal(seqs, want) {
		t.Errorf("the watch across the restart delivered %v; the task's log is %v (no gap, no duplicate)", seqs, want)
	}
	if waited != sc.WantWaitState {
		t.Errorf("wait across the restart returned %q; want %s", waited, sc.WantWaitState)
	}
}

// conformLeaseLost: the handler's lease is handed back behind its back, then it writes.
func conformLeaseLost(t *testing.T, bin string, d conformanceDriver, sc conformanceScenario) {
	cp := startConformanceServer(t, bin)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := dialTest(t, ctx, cp.addr)
	queue := sc.Queue + "-" + d.lang
	if _, err := c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{Source: &agentplanev1.StartTaskRequest_Document{Document: []byte(conformanceAgent)}, Queue: queue}); err != nil {
		t.Fatal(err)
	}
	dr := d.start(t, cp.addr, map[string]any{"name": sc.Name, "queue": queue})
	m := dr.next(t)
	started, ok := m["started"].(map[string]any)
	if !ok {
		t.Fatalf("driver: %v; want the handler's start", m)
	}
	ref := &agentplanev1.LeaseRef{TaskId: started["task_id"].(string), LeaseId: started["lease_id"].(string), Epoch: int64(started["epoch"].(float64))}
	if _, err := c.Runtime.FailTask(ctx, &agentplanev1.FailTaskRequest{Lease: ref, Reason: "conformance.handback", Message: "taken away", Retry: true}); err != nil {
		t.Fatal(err)
	}
	dr.send(t, "go")
	got := dr.next(t)
	if want := wireOf(t, sc.WantWriteReason); got["write_reason"] != want {
		t.Errorf("the handler's write was refused with reason %v; want %q (%s)", got["write_reason"], want, sc.WantWriteReason)
	}
	if want := stopReasonNames[sc.WantStopReason]; got["stop_reason"] != want {
		t.Errorf("the handler saw stop reason %v; want %q", got["stop_reason"], want)
	}
	dr.closeStdin()
	for m := dr.next(t); m["done"] == nil; m = dr.next(t) {
		t.Errorf("driver: %v", m)
	}
	dr.finish(t)
}

// conformErrors: failed calls decoded by the driver as Go's status package reads them.
func conformErrors(t *testing.T, bin string, d conformanceDriver, sc conformanceScenario) {
	cp := startConformanceServer(t, bin)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := dialTest(t, ctx, cp.addr)
	started, err := c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{Source: &agentplanev1.StartTaskRequest_Document{Document: []byte(conformanceAgent)}, Queue: "conformance-errors"})
	if err != nil {
		t.Fatal(err)
	}
	calls := slices.Clone(sc.Calls)
	for i := range calls {
		calls[i].Request = bytes.ReplaceAll(calls[i].Request, []byte("$task_id"), []byte(started.GetTask().GetTaskId()))
	}
	dr := d.start(t, cp.addr, map[string]any{"name": sc.Name, "calls": calls})
	for _, call := range calls {
		got := dr.next(t)
		// What Go's own status package reads from the same call (made again: it is refused the same way).
		md := methodDesc(t, call.Method)
		req := dynamicMessage(t, md.Input())
		if err := protojson.Unmarshal(call.Request, req); err != nil {
			t.Fatal(err)
		}
		callErr := c.Conn().Invoke(ctx, "/"+call.Method, req, dynamicMessage(t, md.Output()))
		st, _ := status.FromError(callErr)
		var info *errdetails.ErrorInfo
		for _, det := range st.Details() {
			if i, ok := det.(*errdetails.ErrorInfo); ok {
				info = i
			}
		}
		wire := wireOf(t, call.WantReason)
		want := map[string]any{
			"method": call.Method, "code": call.WantCode, "reason": wire, "reason_name": call.WantReason,
			"retryable": client.RetryableReason(wire), "domain": info.GetDomain(), "metadata": map[string]any{},
		}
		for k, v := range info.GetMetadata() {
			want["metadata"].(map[string]any)[k] = v
		}
		if info.GetReason() != wire {
			t.Fatalf("%s: the server answered %v; the scenario expects reason %s", call.Method, callErr, wire)
		}
		delete(got, "caller_request_id")
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s decoded as\n  %v\nwant (Go's status package)\n  %v", call.Method, got, want)
		}
		for _, k := range call.WantMetadataKeys {
			if _, ok := info.GetMetadata()[k]; !ok {
				t.Errorf("%s: the server's ErrorInfo has no metadata %q: %v", call.Method, k, info.GetMetadata())
			}
		}
	}
	dr.finish(t)
}

func dynamicMessage(t *testing.T, d protoreflect.MessageDescriptor) proto.Message {
	t.Helper()
	mt, err := protoregistry.GlobalTypes.FindMessageByName(d.FullName())
	if err != nil {
		t.Fatal(err)
	}
	return mt.New().Interface()
}

const conformanceAgent = "apiVersion: qar/v1\nkind: AgentSpec\nname: conformance\ninstructions: Answer briefly.\nmodel: m\n"

func dialTest(t *testing.T, ctx context.Context, addr string) *client.Client {
	t.Helper()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// conformanceServer is a control plane process on a fixed loopback port and data directory,
// so that it can be SIGKILLed and started again where it was.
type conformanceServer struct {
	bin, dir, addr string
	cmd            *exec.Cmd
	log            *lockedBuffer
}

func startConformanceServer(t *testing.T, bin string) *conformanceServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	cp := &conformanceServer{bin: bin, dir: t.TempDir(), addr: addr, log: &lockedBuffer{}}
	cp.start(t)
	t.Cleanup(func() {
		if cp.cmd.ProcessState == nil {
			_ = cp.cmd.Process.Signal(syscall.SIGTERM)
			_ = cp.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("control plane log:\n%s", cp.log.String())
		}
	})
	return cp
}

func (cp *conformanceServer) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(cp.bin, "--data-dir", cp.dir, "--grpc-addr", cp.addr, "--http-addr", "off", "--log-level", "warn")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cp.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cp.cmd = cmd
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			fmt.Fprintln(cp.log, sc.Text())
			if regexp.MustCompile(`^\s+store\s`).MatchString(sc.Text()) {
				once.Do(func() { close(ready) })
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		t.Fatalf("the control plane did not start within 60 s:\n%s", cp.log.String())
	}
}

// restart SIGKILLs the server (no graceful shutdown) and starts it on the same port and bbolt file.
func (cp *conformanceServer) restart(t *testing.T) {
	t.Helper()
	_ = cp.cmd.Process.Kill()
	_ = cp.cmd.Wait()
	cp.start(t)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// failingProxy forwards every call to the server as raw bytes, except that it answers
// the first failFirst[method] attempts of a method with a bare UNAVAILABLE (no
// ErrorInfo, as a load balancer would), and records every attempt's request id.
type failingProxy struct {
	lis       net.Listener
	backend   *grpc.ClientConn
	mu        sync.Mutex
	failFirst map[string]int
	seen      map[string][]string
}

type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

var _ encoding.Codec = rawCodec{}

func startFailingProxy(t *testing.T, backend string) *failingProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(backend, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	p := &failingProxy{lis: lis, backend: conn, failFirst: map[string]int{}, seen: map[string][]string{}}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(p.handle))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); _ = conn.Close() })
	return p
}

func (p *failingProxy) addr() string { return p.lis.Addr().String() }

func (p *failingProxy) attempts(method string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen[method])
}

func (p *failingProxy) handle(_ any, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	var req []byte
	if err := ss.RecvMsg(&req); err != nil {
		return err
	}
	p.mu.Lock()
	p.seen[method] = append(p.seen[method], requestIDOf(method, req))
	fail := len(p.seen[method]) <= p.failFirst[method]
	p.mu.Unlock()
	if fail {
		return status.Error(codes.Unavailable, "conformance proxy: this attempt fails")
	}
	md, _ := metadata.FromIncomingContext(ss.Context())
	out := metadata.MD{}
	for k, v := range md {
		if k == "authorization" || strings.HasPrefix(k, "x-") {
			out[k] = v
		}
	}
	ctx := metadata.NewOutgoingContext(ss.Context(), out)
	cs, err := p.backend.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	if err := cs.SendMsg(&req); err != nil {
		return err
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	for {
		var resp []byte
		err := cs.RecvMsg(&resp)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := ss.SendMsg(&resp); err != nil {
			return err
		}
	}
}

// requestIDOf reads the request_id of a raw request, "" when its message has none.
func requestIDOf(method string, raw []byte) string {
	service, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return ""
	}
	md := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return ""
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	if err != nil {
		return ""
	}
	m := mt.New()
	if proto.Unmarshal(raw, m.Interface()) != nil {
		return ""
	}
	fd := md.Input().Fields().ByName("request_id")
	if fd == nil {
		return ""
	}
	return m.Get(fd).String()
}

// conformanceDriver is one SDK's driver program.
type conformanceDriver struct {
	lang string
	argv []string
	env  []string
}

type runningDriver struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan map[string]any
	stderr *lockedBuffer
}

func (d conformanceDriver) start(t *testing.T, addr string, scenario map[string]any) *runningDriver {
	t.Helper()
	sc, err := json.Marshal(scenario)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(d.argv[0], d.argv[1:]...)
	cmd.Env = append(append(os.Environ(), d.env...), "AGENTPLANE_ADDRESS="+addr, "AGENTPLANE_SCENARIO="+string(sc))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r := &runningDriver{cmd: cmd, stdin: stdin, lines: make(chan map[string]any, 1024), stderr: &lockedBuffer{}}
	cmd.Stderr = r.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"unreadable": sc.Text()}
			}
			r.lines <- m
		}
	}()
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
			_ = r.cmd.Wait()
		}
	})
	return r
}

// next is the driver's next line; the driver ending or a minute without a line fails the test.
func (r *runningDriver) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case m, ok := <-r.lines:
		if !ok {
			t.Fatalf("the driver ended early:\n%s", r.stderr.String())
		}
		return m
	case <-time.After(time.Minute):
		t.Fatalf("no line from the driver in a minute:\n%s", r.stderr.String())
	}
	return nil
}

func (r *runningDriver) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(r.stdin, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

func (r *runningDriver) closeStdin() { _ = r.stdin.Close() }

// finish reads the driver's last line ("done") and its exit.
func (r *runningDriver) finish(t *testing.T) {
	t.Helper()
	r.closeStdin()
	for m := range r.lines {
		if m["done"] == nil {
			t.Errorf("driver: %v", m)
		}
	}
	if err := r.cmd.Wait(); err != nil {
		t.Errorf("the driver failed: %v\n%s", err, r.stderr.String())
	}
}
