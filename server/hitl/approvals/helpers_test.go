package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/gates"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/spec"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/boltstore"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/tasks"
)

var ctx = context.Background()

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// env is a control plane without the gRPC layer: a bbolt file, the task domain and
// the approvals service over it, wired as the server wires them.
type env struct {
	path  string
	clock *clock
	store store.Store
	tasks *tasks.Manager
	svc   *Service
	cfg   Config
	// opts opens the store (the zero value: bbolt's own commits).
	opts boltstore.Options
}

func testConfig() Config {
	return Config{MaxUntrustedBytes: 4096}
}

func newEnv(t testing.TB, cfg Config) *env {
	t.Helper()
	return newEnvStore(t, cfg, boltstore.Options{})
}

// newEnvStore is newEnv with the store opened with opts.
func newEnvStore(t testing.TB, cfg Config, opts boltstore.Options) *env {
	t.Helper()
	e := &env{path: filepath.Join(t.TempDir(), "agentplane.db"), clock: &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}, cfg: cfg, opts: opts}
	e.open(t)
	t.Cleanup(e.close)
	return e
}

// open opens (or reopens, after close) the store file and builds the services.
func (e *env) open(t testing.TB) {
	t.Helper()
	st, err := boltstore.Open(e.path, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	e.build(t, st)
}

// build makes the task domain and the approvals service over st.
func (e *env) build(t testing.TB, st store.Store) {
	t.Helper()
	m, err := tasks.New(tasks.Options{Store: st, Clock: e.clock, Config: tasks.Config{
		LeaseTTL: time.Hour, MaxAttempts: 3, MaxLeaseWait: time.Second, PurgeInterval: time.Hour,
		MaxInputBytes: 4096, MaxEventBytes: 64 << 10, MaxTaskHistoryBytes: 64 << 20, MaxTaskEvents: 1 << 20,
		MaxLabels: 4, MaxWatchBuffer: 64, MaxListResponseBytes: 1 << 20,
	}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(Options{Tasks: m, Store: st, Gate: hitl.NewGate(nil, gates.AlwaysGated), ValidateArgs: spec.ValidateArgs, Config: e.cfg, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	e.store, e.tasks, e.svc = st, m, svc
}

func (e *env) close() {
	if e.store == nil {
		return
	}
	e.svc.Stop()
	e.tasks.Stop()
	_ = e.store.Close()
	e.store = nil
}

// restart closes everything and opens the same file again, as a control-plane restart.
func (e *env) restart(t testing.TB) {
	t.Helper()
	e.close()
	e.open(t)
}

var writeParams = func() *structpb.Struct {
	s, _ := structpb.NewStruct(map[string]any{
		"type":       "object",
		"properties": map[string]any{"path": map[string]any{"type": "string"}, "data": map[string]any{"type": "string"}},
		"required":   []any{"path"},
	})
	return s
}()

func plainAgent() *agentplanev1.ResolvedSpec {
	return &agentplanev1.ResolvedSpec{Spec: &agentplanev1.ResolvedSpec_Agent{Agent: &agentplanev1.AgentSpec{
		ApiVersion: "qar/v1", Kind: "AgentSpec", Model: "m",
		Tools: []*agentplanev1.FunctionTool{{Type: "function", Function: &agentplanev1.FunctionDef{Name: "fs.write", Parameters: writeParams}}},
	}}}
}

func allowlist(tools ...string) *agentplanev1.InterruptPolicy {
	return &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Allowlist{Allowlist: &agentplanev1.ToolListPolicy{
		Tools: tools, Tags: map[string]*agentplanev1.TagList{"fs.write": {Tags: []string{"io"}}},
	}}}
}

type startOpt func(*tasks.StartParams)

// startAndLease starts a task in tenant and leases it.
func (e *env) startAndLease(t testing.TB, tenant string, opts ...startOpt) *agentplanev1.LeaseRef {
	t.Helper()
	p := tasks.StartParams{Tenant: tenant, Principal: "owner", AgentID: "writer", Resolved: plainAgent(), Input: &agentplanev1.Message{Parts: []*agentplanev1.Part{{Kind: &agentplanev1.Part_Text{Text: "write the report"}}}},
		InterruptPolicy: allowlist("fs.write"), SessionID: "s-1"}
	for _, o := range opts {
		o(&p)
	}
	if _, _, err := e.tasks.Start(ctx, p); err != nil {
		t.Fatal(err)
	}
	return e.lease(t, tenant)
}

func (e *env) lease(t testing.TB, tenant string) *agentplanev1.LeaseRef {
	t.Helper()
	l := e.leaseFull(t, tenant)
	return &agentplanev1.LeaseRef{TaskId: l.GetTask().GetTaskId(), LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
}

func (e *env) leaseFull(t testing.TB, tenant string) *agentplanev1.Lease {
	t.Helper()
	leases, err := e.tasks.LeaseTasks(ctx, tasks.LeaseRequest{RuntimeID: "rt-1", Tenant: tenant})
	if err != nil || len(leases) != 1 {
		t.Fatalf("LeaseTasks = %d leases, %v; want 1", len(leases), err)
	}
	return leases[0]
}

// args is v as JSON text, as a model would write it.
func args(t testing.TB, v map[string]any) string {
	t.Helper()
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func checkReq(ref *agentplanev1.LeaseRef, callID, tool string, a string) *agentplanev1.CheckToolCallRequest {
	return &agentplanev1.CheckToolCallRequest{Lease: ref, CallId: callID, ToolName: tool, ArgumentsJson: a, AgentName: "writer", TripIndex: 2}
}

// gated raises an interrupt for fs.write and returns it.
func (e *env) gated(t testing.TB, ref *agentplanev1.LeaseRef, callID string) *agentplanev1.Interrupt {
	t.Helper()
	resp, err := e.svc.CheckToolCall(ctx, checkReq(ref, callID, "fs.write", args(t, map[string]any{"path": "/tmp/" + callID, "data": "x"})))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetOutcome() != agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT {
		t.Fatalf("outcome %v, want INTERRUPT", resp.GetOutcome())
	}
	return resp.GetInterrupt()
}

// report reports one tool call under ref, as a runtime does before running it.
func (e *env) report(ref *agentplanev1.LeaseRef, callID, tool string, a string) error {
	_, err := e.tasks.ReportEvents(ctx, ref, tasks.Request{}, []*agentplanev1.RuntimeEvent{{Payload: &agentplanev1.RuntimeEvent_ToolCall{
		ToolCall: &agentplanev1.ToolCall{CallId: callID, ToolName: tool, ArgumentsJson: a, Node: "writer"},
	}}})
	return err
}

func approve(id string) *agentplanev1.ResolveInterruptRequest {
	return &agentplanev1.ResolveInterruptRequest{InterruptId: id, Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}}}
}

func reject(id, reason string) *agentplanev1.ResolveInterruptRequest {
	return &agentplanev1.ResolveInterruptRequest{InterruptId: id, Decision: &agentplanev1.ResolveInterruptRequest_Reject{Reject: &agentplanev1.RejectDecision{Reason: reason}}}
}

func edit(id string, a string) *agentplanev1.ResolveInterruptRequest {
	return &agentplanev1.ResolveInterruptRequest{InterruptId: id, Decision: &agentplanev1.ResolveInterruptRequest_Edit{Edit: &agentplanev1.EditDecision{ArgumentsJson: a}}}
}

func (e *env) task(t testing.TB, tenant, id string) *agentplanev1.Task {
	t.Helper()
	task, err := e.tasks.Get(ctx, tenant, id, tasks.ViewFull)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// record reads an interrupt straight from the store (no lazy deadline).
func (e *env) record(t testing.TB, tenant, id string) *storagev1.InterruptRecord {
	t.Helper()
	var rec *storagev1.InterruptRecord
	if err := e.store.View(ctx, func(r store.Reader) error {
		var err error
		rec, err = r.GetInterrupt(tenant, id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return rec
}

// events lists a task's event payload kinds, in order.
func (e *env) events(t testing.TB, tenant, taskID string) ([]string, []*agentplanev1.TaskEvent) {
	t.Helper()
	var names []string
	var evs []*agentplanev1.TaskEvent
	if err := e.store.View(ctx, func(r store.Reader) error {
		return r.ScanEvents(tenant, taskID, 0, func(rec *storagev1.EventRecord) (bool, error) {
			ev := rec.GetEvent()
			name := string(ev.ProtoReflect().WhichOneof(ev.ProtoReflect().Descriptor().Oneofs().ByName("payload")).Name())
			if sc := ev.GetStateChanged(); sc != nil {
				name += ":" + sc.GetToState().String()[len("TASK_STATE_"):]
			}
			names = append(names, name)
			evs = append(evs, ev)
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return names, evs
}

func wantErr(t testing.TB, err error, code codes.Code, reason apierr.Reason) {
	t.Helper()
	var e *apierr.Error
	if !errors.As(err, &e) || e.Code != code || (reason != 0 && e.Reason != reason) {
		t.Fatalf("err = %v, want %s (%s)", err, code, reason)
	}
}

// waitFor polls cond until it holds or a deadline passes; it never sleeps on a guess.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// awaitDecision runs Service.AwaitDecision and returns the decision it sent (nil when
// it sent none, or ended with a cancellation).
func awaitDecision(svc *Service, ctx context.Context, ref *agentplanev1.LeaseRef, id string) (*agentplanev1.Decision, error) {
	var d *agentplanev1.Decision
	err := svc.AwaitDecision(ctx, ref, id, func(msg *agentplanev1.AwaitDecisionResponse) error {
		if msg.GetDecision() != nil {
			d = msg.GetDecision()
		}
		return nil
	})
	return d, err
}

// awaitAll runs Service.AwaitDecision and returns every message it sent.
func awaitAll(svc *Service, ctx context.Context, ref *agentplanev1.LeaseRef, id string) ([]*agentplanev1.AwaitDecisionResponse, error) {
	var out []*agentplanev1.AwaitDecisionResponse
	err := svc.AwaitDecision(ctx, ref, id, func(msg *agentplanev1.AwaitDecisionResponse) error {
		out = append(out, msg)
		return nil
	})
	return out, err
}

// bothStates lists pending and resolved interrupts.
var bothStates = []agentplanev1.InterruptState{
	agentplanev1.InterruptState_INTERRUPT_STATE_PENDING, agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED,
}
