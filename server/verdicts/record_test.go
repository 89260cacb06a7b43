package verdicts

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/spec"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/boltstore"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/tasks"
)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

func reviewGraph() *agentplanev1.GraphSpec {
	node := func(role string) *agentplanev1.GraphAgent {
		return &agentplanev1.GraphAgent{Role: role, Spec: &agentplanev1.NodeSpec{Spec: &agentplanev1.NodeSpec_Agent{Agent: &agentplanev1.AgentSpec{Model: "m"}}}}
	}
	return &agentplanev1.GraphSpec{ApiVersion: "qar/v1", Kind: "GraphSpec", Entry: "sup", Agents: map[string]*agentplanev1.GraphAgent{
		"sup": node("supervisor"), "audit": node("evaluator"),
	}}
}

// startReview starts a review graph task and leases it.
var ctx = context.Background()

func startReview(t *testing.T) (*tasks.Manager, *agentplanev1.LeaseRef) {
	t.Helper()
	m, _, ref := startReviewStore(t)
	return m, ref
}

func startReviewStore(t *testing.T) (*tasks.Manager, store.Store, *agentplanev1.LeaseRef) {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "agentplane.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	m, err := tasks.New(tasks.Options{Store: st, Clock: fixedClock{t0}, Config: tasks.Config{
		LeaseTTL: time.Hour, MaxAttempts: 3, MaxLeaseWait: time.Second, PurgeInterval: time.Hour, MaxInputBytes: 1024,
		MaxEventBytes: 64 << 10, MaxTaskHistoryBytes: 1 << 20, MaxTaskEvents: 1000, MaxLabels: 4, MaxWatchBuffer: 8,
		MaxListResponseBytes: 1 << 20,
	}})
	if err != nil {
		t.Fatal(err)
	}
	g := reviewGraph()
	if _, _, err := m.Start(ctx, tasks.StartParams{Tenant: "default", Principal: "owner", Graph: g,
		Resolved: &agentplanev1.ResolvedSpec{Spec: &agentplanev1.ResolvedSpec_Graph{Graph: g}}, Input: &agentplanev1.Message{Parts: []*agentplanev1.Part{{Kind: &agentplanev1.Part_Text{Text: "review this"}}}}}); err != nil {
		t.Fatal(err)
	}
	leases, err := m.LeaseTasks(ctx, tasks.LeaseRequest{RuntimeID: "rt"})
	if err != nil || len(leases) != 1 {
		t.Fatalf("lease: %v %v", leases, err)
	}
	l := leases[0]
	return m, st, &agentplanev1.LeaseRef{TaskId: l.GetTask().GetTaskId(), LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
}

func TestRecord(t *testing.T) {
	m, st, ref := startReviewStore(t)
	r := NewRecorder(m)

	firstReq := &agentplanev1.RecordVerdictRequest{Lease: ref, Node: "audit", RequestId: "v1",
		Result:   &agentplanev1.VerdictResult{Verdict: "fail", Rationale: proto.String("no tests")},
		Resolved: []*agentplanev1.ObligationResolution{addressed("1")}, Raised: []string{"add tests", "update docs"}}
	first, err := r.Record(ctx, firstReq)
	if err != nil {
		t.Fatal(err)
	}
	// A retry after a lost response records nothing more and answers as the first call did.
	if retry, err := r.Record(ctx, firstReq); err != nil || !proto.Equal(retry, first) {
		t.Fatalf("retried Record = %v, %v; want the first answer %v", retry, err, first)
	}
	if v := first.GetVerdict(); v.GetVerdictId() != "V1" || v.GetApproved() || !slices.Equal(v.GetDroppedObligationIds(), []string{"1"}) || v.GetSequence() == 0 ||
		!slices.Equal(ids(first.GetOpenObligations()), []string{"O1", "O2"}) {
		t.Errorf("first verdict = %v", first)
	}
	second, err := r.Record(ctx, &agentplanev1.RecordVerdictRequest{Lease: ref, Node: "audit", EndsTurn: true,
		Result:   &agentplanev1.VerdictResult{Verdict: "pass", Confidence: proto.Float64(0.75)},
		Resolved: []*agentplanev1.ObligationResolution{addressed("O1"), withdrawn("O2", "out of scope"), addressed("O9")}, Raised: []string{"follow up"}})
	if err != nil {
		t.Fatal(err)
	}
	if v := second.GetVerdict(); v.GetVerdictId() != "V2" || !v.GetApproved() || !v.GetEndsTurn() || !slices.Equal(v.GetDroppedObligationIds(), []string{"O9"}) ||
		!slices.Equal(ids(second.GetOpenObligations()), []string{"O3"}) {
		t.Errorf("second verdict = %v", second)
	}

	vs, _, err := m.ListVerdicts(ctx, "default", ref.GetTaskId(), 0, "")
	if err != nil || len(vs) != 2 || !proto.Equal(vs[1], second.GetVerdict()) {
		t.Fatalf("ListVerdicts = %v, %v", vs, err)
	}
	obs, _, err := m.ListObligations(ctx, "default", ref.GetTaskId(), nil, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]agentplanev1.ObligationState{}
	for _, o := range obs {
		states[o.GetObligationId()] = o.GetState()
	}
	want := map[string]agentplanev1.ObligationState{
		"O1": agentplanev1.ObligationState_OBLIGATION_STATE_ADDRESSED, "O2": agentplanev1.ObligationState_OBLIGATION_STATE_WITHDRAWN,
		"O3": agentplanev1.ObligationState_OBLIGATION_STATE_OPEN,
	}
	if len(states) != len(want) {
		t.Errorf("ledger %v, want %v", states, want)
	}
	for id, s := range want {
		if states[id] != s {
			t.Errorf("%s is %v, want %v", id, states[id], s)
		}
	}
	// The verdict is in the log at its sequence.
	var logged *agentplanev1.Verdict
	if err := st.View(ctx, func(rd store.Reader) error {
		return rd.ScanEvents("default", ref.GetTaskId(), second.GetVerdict().GetSequence()-1, func(ev *storagev1.EventRecord) (bool, error) {
			logged = ev.GetEvent().GetVerdictRecorded().GetVerdict()
			return false, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(logged, second.GetVerdict()) {
		t.Errorf("logged verdict %v, want %v", logged, second.GetVerdict())
	}

	for name, tc := range map[string]struct {
		req    *agentplanev1.RecordVerdictRequest
		code   codes.Code
		reason apierr.Reason
	}{
		"not an evaluator": {&agentplanev1.RecordVerdictRequest{Lease: ref, Node: "sup", Result: &agentplanev1.VerdictResult{Verdict: "pass"}},
			codes.FailedPrecondition, apierr.ReasonVerdictInvalid},
		"bad confidence": {&agentplanev1.RecordVerdictRequest{Lease: ref, Node: "audit", Result: &agentplanev1.VerdictResult{Verdict: "pass", Confidence: proto.Float64(2)}},
			codes.InvalidArgument, apierr.ReasonVerdictInvalid},
		"stale lease": {&agentplanev1.RecordVerdictRequest{Lease: &agentplanev1.LeaseRef{TaskId: ref.GetTaskId(), LeaseId: ref.GetLeaseId(), Epoch: 99}, Node: "audit",
			Result: &agentplanev1.VerdictResult{Verdict: "pass"}}, codes.FailedPrecondition, apierr.ReasonLeaseLost},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := r.Record(ctx, tc.req)
			var e *apierr.Error
			if !errors.As(err, &e) || e.Code != tc.code || e.Reason != tc.reason {
				t.Fatalf("Record = %v, want %v/%s", err, tc.code, tc.reason)
			}
		})
	}
	if vs, _, _ := m.ListVerdicts(ctx, "default", ref.GetTaskId(), 0, ""); len(vs) != 2 {
		t.Errorf("refused verdicts were recorded: %d verdicts", len(vs))
	}
}

// A verdict names the verdict tool call that carried it, which the gate let run.
func TestVerdictCarriesItsCallID(t *testing.T) {
	m, ref := startReview(t)
	decide := func(callID, tool string, outcome agentplanev1.GateOutcome) {
		t.Helper()
		d := &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_APPROVE, Source: agentplanev1.DecisionSource_DECISION_SOURCE_POLICY}
		if outcome == agentplanev1.GateOutcome_GATE_OUTCOME_REJECT {
			d = &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_REJECT, Source: agentplanev1.DecisionSource_DECISION_SOURCE_HITL_DISABLED}
		}
		err := m.UpdateLeased(ctx, ref, func(op *tasks.Op) error {
			in := hitl.DecidedCall(hitl.InterruptMeta{InterruptID: hitl.InterruptID(ref.GetTaskId(), callID), TaskID: ref.GetTaskId(), Tenant: "default", Now: t0},
				hitl.Call{CallID: callID, ToolName: tool, ArgumentsJSON: `{"verdict":"pass"}`, AgentName: "audit"},
				hitl.GateResult{Outcome: outcome, Decision: d})
			return op.Writer().PutInterrupt(&storagev1.InterruptRecord{Interrupt: in, CreateTime: timestamppb.New(t0), RaisedEpoch: op.Epoch()})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	decide("v-1", spec.VerdictToolName, agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW)
	decide("s-1", "search", agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW)
	decide("v-2", spec.VerdictToolName, agentplanev1.GateOutcome_GATE_OUTCOME_REJECT)
	r := NewRecorder(m)
	record := func(callID string) (*agentplanev1.RecordVerdictResponse, error) {
		return r.Record(ctx, &agentplanev1.RecordVerdictRequest{Lease: ref, Node: "audit", CallId: callID, Result: &agentplanev1.VerdictResult{Verdict: "pass"}})
	}
	for _, bad := range []string{"never-checked", "s-1", "v-2"} {
		_, err := record(bad)
		var e *apierr.Error
		if !errors.As(err, &e) || e.Reason != apierr.ReasonToolCallNotApproved {
			t.Errorf("call id %s: %v, want %s", bad, err, apierr.ReasonToolCallNotApproved)
		}
	}
	resp, err := record("v-1")
	if err != nil || resp.GetVerdict().GetCallId() != "v-1" {
		t.Fatalf("Record = %v, %v", resp, err)
	}
	vs, _, err := m.ListVerdicts(ctx, "default", ref.GetTaskId(), 0, "")
	if err != nil || len(vs) != 1 || vs[0].GetCallId() != "v-1" {
		t.Fatalf("ListVerdicts = %v, %v", vs, err)
	}
}
