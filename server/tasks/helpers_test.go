package tasks

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/boltstore"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// fakeClock is a Clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func testConfig() Config {
	return Config{
		LeaseTTL:             10 * time.Second,
		MaxAttempts:          3,
		MaxLeaseWait:         10 * time.Second,
		PurgeInterval:        time.Minute,
		MaxInputBytes:        1024,
		MaxEventBytes:        512,
		MaxTaskHistoryBytes:  64 << 10,
		MaxTaskEvents:        1000,
		MaxLabels:            4,
		MaxWatchBuffer:       8,
		MaxListResponseBytes: 1 << 20,
	}
}

type harness struct {
	m     *Manager
	clock *fakeClock
	store store.Store
	path  string
}

func newHarness(t testing.TB, mods ...func(*Config)) *harness {
	t.Helper()
	cfg := testConfig()
	for _, mod := range mods {
		mod(&cfg)
	}
	clock := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	return openHarness(t, filepath.Join(t.TempDir(), "agentplane.db"), cfg, clock)
}

func openHarness(t testing.TB, path string, cfg Config, clock *fakeClock) *harness {
	t.Helper()
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{Store: st, Config: cfg, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Stop()
		_ = st.Close()
	})
	return &harness{m: m, clock: clock, store: st, path: path}
}

// reopen simulates a restart: a new store and Manager on the same file.
func reopen(t testing.TB, h *harness) *harness {
	t.Helper()
	return openHarness(t, h.path, h.m.cfg, h.clock)
}

var ctx = context.Background()

func params(tenant string) StartParams {
	name := "echo"
	return StartParams{
		Tenant:    tenant,
		Principal: "owner",
		AgentID:   "echo",
		Resolved:  &agentplanev1.ResolvedSpec{Spec: &agentplanev1.ResolvedSpec_Agent{Agent: &agentplanev1.AgentSpec{Name: &name, Model: "m"}}},
		Input:     userText("hello"),
	}
}

func (h *harness) start(t testing.TB, p StartParams) *agentplanev1.Task {
	t.Helper()
	task, created, err := h.m.Start(ctx, p)
	if err != nil || !created {
		t.Fatalf("Start = %v, created=%v", err, created)
	}
	return task
}

// lease leases exactly one task without waiting.
func (h *harness) lease(t testing.TB, runtimeID string) *agentplanev1.Lease {
	t.Helper()
	leases, err := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: runtimeID})
	if err != nil || len(leases) != 1 {
		t.Fatalf("LeaseTasks = %d leases, %v; want 1", len(leases), err)
	}
	return leases[0]
}

func ref(l *agentplanev1.Lease) *agentplanev1.LeaseRef {
	return &agentplanev1.LeaseRef{TaskId: l.GetTask().GetTaskId(), LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
}

func (h *harness) get(t testing.TB, tenant, id string) *agentplanev1.Task {
	t.Helper()
	task, err := h.m.Get(ctx, tenant, id, ViewFull)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// events reads a task's whole log through Watch's replay.
func (h *harness) events(t testing.TB, tenant, id string) []*agentplanev1.TaskEvent {
	t.Helper()
	var out []*agentplanev1.TaskEvent
	c, cancel := context.WithCancel(ctx)
	defer cancel()
	last := h.get(t, tenant, id).GetLastSequence()
	err := h.m.Watch(c, tenant, id, 0, func(msg *agentplanev1.WatchTaskResponse) error {
		ev := msg.GetEvent()
		if ev == nil {
			return nil
		}
		out = append(out, ev)
		if ev.GetSequence() == last {
			cancel()
		}
		return nil
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	return out
}

// kinds names each event's payload, with the target state of state changes and the
// kind of lease changes, so that a whole log reads as one line.
func kinds(evs []*agentplanev1.TaskEvent) []string {
	var out []string
	for _, ev := range evs {
		switch p := ev.GetPayload().(type) {
		case *agentplanev1.TaskEvent_StateChanged:
			out = append(out, "state:"+p.StateChanged.GetToState().String()[len("TASK_STATE_"):])
		case *agentplanev1.TaskEvent_Lease:
			out = append(out, "lease:"+p.Lease.GetKind().String()[len("LEASE_CHANGE_KIND_"):])
		default:
			out = append(out, string(ev.ProtoReflect().WhichOneof(ev.ProtoReflect().Descriptor().Oneofs().ByName("payload")).Name()))
		}
	}
	return out
}

func wantErr(t testing.TB, err error, code codes.Code, reason apierr.Reason) {
	t.Helper()
	var e *apierr.Error
	if !errors.As(err, &e) || e.Code != code || (reason != 0 && e.Reason != reason) {
		t.Fatalf("err = %v, want %s (%s)", err, code, reason)
	}
}

// allowCall records the gate's ALLOW for a call of the leased task, as
// RuntimeService.CheckToolCall does, so that the call may be reported once.
func (h *harness) allowCall(t testing.TB, l *agentplanev1.Lease, callID, tool string, args string) {
	t.Helper()
	digest := hitl.ArgsDigest(args)
	call := hitl.Call{CallID: callID, ToolName: tool, ArgumentsJSON: args, AgentName: "echo"}
	res := hitl.GateResult{Outcome: agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW, ArgsDigest: digest, Decision: &agentplanev1.Decision{
		Type: agentplanev1.DecisionType_DECISION_TYPE_APPROVE, ArgumentsJson: args, ArgsDigest: digest, RuledArgsDigest: digest,
		DecidedBy: hitl.SystemPrincipal, Source: agentplanev1.DecisionSource_DECISION_SOURCE_POLICY,
	}}
	err := h.m.UpdateLeased(ctx, ref(l), func(op *Op) error {
		rec := op.Task()
		in := hitl.DecidedCall(hitl.InterruptMeta{
			InterruptID: hitl.InterruptID(rec.GetTaskId(), callID), TaskID: rec.GetTaskId(), Tenant: rec.GetTenant(), Now: op.Now(),
		}, call, res)
		return op.Writer().PutInterrupt(&storagev1.InterruptRecord{Interrupt: in, CreateTime: timestamppb.New(op.Now()), RaisedEpoch: op.Epoch()})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func toolCall(callID, tool string, args string) *agentplanev1.RuntimeEvent {
	return &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_ToolCall{ToolCall: &agentplanev1.ToolCall{CallId: callID, ToolName: tool, ArgumentsJson: args}}}
}

func toolResult(callID string, isError bool) *agentplanev1.RuntimeEvent {
	return &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_ToolResult{ToolResult: &agentplanev1.ToolResult{CallId: callID, IsError: isError}}}
}

func note(text string) *agentplanev1.RuntimeEvent {
	return &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_Note{Note: &agentplanev1.RuntimeNote{Text: text}}}
}

func equal(t testing.TB, what string, got, want any) {
	t.Helper()
	if gm, ok := got.(proto.Message); ok {
		if !proto.Equal(gm, want.(proto.Message)) {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
		return
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func textParts(s string) []*agentplanev1.Part {
	return []*agentplanev1.Part{{Kind: &agentplanev1.Part_Text{Text: s}}}
}

// userText is a user message of one text part; "" gives a message with no parts.
func userText(s string) *agentplanev1.Message {
	if s == "" {
		return &agentplanev1.Message{}
	}
	return &agentplanev1.Message{Role: agentplanev1.MessageRole_MESSAGE_ROLE_USER, Parts: textParts(s)}
}

// assistantText is an assistant message of one text part; "" gives none.
func assistantText(s string) *agentplanev1.Message {
	if s == "" {
		return nil
	}
	return &agentplanev1.Message{Role: agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, Parts: textParts(s)}
}

func texts(msgs []*agentplanev1.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = MessageText(m)
	}
	return out
}
