package verdicts

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/spec"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func result(verdict string, confidence *float64, rationale *string) *agentplanev1.VerdictResult {
	return &agentplanev1.VerdictResult{Verdict: verdict, Confidence: confidence, Rationale: rationale}
}

func addressed(id string) *agentplanev1.ObligationResolution {
	return &agentplanev1.ObligationResolution{ObligationId: id, How: agentplanev1.ResolutionHow_RESOLUTION_HOW_ADDRESSED}
}

func withdrawn(id, reason string) *agentplanev1.ObligationResolution {
	return &agentplanev1.ObligationResolution{ObligationId: id, How: agentplanev1.ResolutionHow_RESOLUTION_HOW_WITHDRAWN, Reason: proto.String(reason)}
}

func TestCheck(t *testing.T) {
	ok := Request{Node: "judge", Result: result(Pass, proto.Float64(0.9), nil)}
	with := func(mut func(*Request)) Request {
		r := ok
		r.Result = proto.Clone(ok.Result).(*agentplanev1.VerdictResult)
		mut(&r)
		return r
	}
	nan := structpb.NewNumberValue(math.NaN())
	tests := []struct {
		name   string
		req    Request
		fields []string
	}{
		{"pass without rationale", ok, nil},
		{"confidence bounds are inclusive", with(func(r *Request) { r.Result.Confidence = proto.Float64(0) }), nil},
		{"confidence one", with(func(r *Request) { r.Result.Confidence = proto.Float64(1) }), nil},
		{"no confidence", with(func(r *Request) { r.Result.Confidence = nil }), nil},
		{"fail with rationale, resolutions and raised", with(func(r *Request) {
			r.Result = result("fail", nil, proto.String("tests fail"))
			r.Resolved = []*agentplanev1.ObligationResolution{addressed("O1"), withdrawn("O2", "no longer relevant")}
			r.Raised = []string{"fix the tests"}
		}), nil},
		{"scores kept when finite", with(func(r *Request) {
			r.Result.Scores = map[string]*structpb.Value{"faithfulness": structpb.NewNumberValue(0.8)}
		}), nil},
		{"no node", with(func(r *Request) { r.Node = "" }), []string{"node"}},
		{"no verdict", with(func(r *Request) { r.Result.Verdict = "" }), []string{"result.verdict"}},
		{"no result", with(func(r *Request) { r.Result = nil }), []string{"result.verdict"}},
		{"unknown verdict", with(func(r *Request) { r.Result.Verdict = "approved" }), []string{"result.verdict", "result.rationale"}},
		{"confidence above one", with(func(r *Request) { r.Result.Confidence = proto.Float64(1.01) }), []string{"result.confidence"}},
		{"confidence below zero", with(func(r *Request) { r.Result.Confidence = proto.Float64(-0.1) }), []string{"result.confidence"}},
		{"confidence NaN", with(func(r *Request) { r.Result.Confidence = proto.Float64(math.NaN()) }), []string{"result.confidence"}},
		{"fail without rationale", with(func(r *Request) { r.Result.Verdict = "fail" }), []string{"result.rationale"}},
		{"needs_revision with blank rationale", with(func(r *Request) { r.Result.Verdict, r.Result.Rationale = "needs_revision", proto.String("  ") }), []string{"result.rationale"}},
		{"NaN score", with(func(r *Request) {
			r.Result.Scores = map[string]*structpb.Value{"x": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{nan}})}
		}), []string{`result.scores["x"]`}},
		{"withdrawal without reason", with(func(r *Request) { r.Resolved = []*agentplanev1.ObligationResolution{withdrawn("O1", " ")} }), []string{"resolved[0].reason"}},
		{"resolution without id or how", with(func(r *Request) { r.Resolved = []*agentplanev1.ObligationResolution{{}} }), []string{"resolved[0].obligation_id", "resolved[0].how"}},
		{"blank raised", with(func(r *Request) { r.Raised = []string{"ok", ""} }), []string{"raised[1]"}},
		{"too many raised", with(func(r *Request) { r.Raised = slices.Repeat([]string{"x"}, MaxRaised+1) }), []string{"raised"}},
		{"every problem named", Request{Result: result("maybe", proto.Float64(2), nil)}, []string{"node", "result.verdict", "result.confidence", "result.rationale"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.req)
			if tt.fields == nil {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			var e *apierr.Error
			if !errors.As(err, &e) || e.Code != codes.InvalidArgument || e.Reason != apierr.ReasonVerdictInvalid {
				t.Fatalf("Check = %v, want InvalidArgument/%s", err, apierr.ReasonVerdictInvalid)
			}
			var fields []string
			for _, v := range e.Details[0].(*errdetails.BadRequest).GetFieldViolations() {
				fields = append(fields, v.GetField())
			}
			if !slices.Equal(fields, tt.fields) {
				t.Errorf("violations %q, want %q", fields, tt.fields)
			}
			if slices.Contains(tt.fields, "result.confidence") && !strings.Contains(err.Error(), spec.RuleVerdictConfidence) {
				t.Errorf("confidence error %q does not name %s", err, spec.RuleVerdictConfidence)
			}
		})
	}
}

func ids(obs []*agentplanev1.Obligation) []string {
	out := make([]string, len(obs))
	for i, o := range obs {
		out[i] = o.GetObligationId()
	}
	return out
}

// TestLedger walks a task's ledger through the ledger's cases (docs/vocabulary.md, Verdicts).
func TestLedger(t *testing.T) {
	var open []*agentplanev1.Obligation
	var count int64
	steps := []struct {
		name     string
		req      Request
		approved bool
		dropped  []string
		resolved []string // ids closed by this verdict
		raised   []string
		open     []string
		note     string // substring of DroppedNote
	}{
		{
			name:     "an auditor with nothing open invents an id: dropped, the decision still counts",
			req:      Request{Node: "audit", Result: result("fail", nil, proto.String("missing tests")), Resolved: []*agentplanev1.ObligationResolution{addressed("1")}, Raised: []string{"add tests", "update docs"}},
			dropped:  []string{"1"},
			raised:   []string{"O1", "O2"},
			open:     []string{"O1", "O2"},
			resolved: nil,
			note:     `"1" were dropped`,
		},
		{
			name:     "resolve one, withdraw one, raise one: ids continue",
			req:      Request{Node: "audit", Result: result("needs_revision", nil, proto.String("close")), Resolved: []*agentplanev1.ObligationResolution{addressed("O1")}, Raised: []string{"rename the flag"}},
			resolved: []string{"O1"},
			raised:   []string{"O3"},
			open:     []string{"O2", "O3"},
		},
		{
			name:     "an already resolved id and a duplicate are dropped, the rest applies",
			req:      Request{Node: "audit", Result: result(Pass, proto.Float64(1), nil), Resolved: []*agentplanev1.ObligationResolution{addressed("O1"), withdrawn("O2", "out of scope"), addressed("O2"), addressed("O3")}},
			approved: true,
			dropped:  []string{"O1", "O2"},
			resolved: []string{"O2", "O3"},
			open:     nil,
			note:     "there are no open obligations",
		},
	}
	for i, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if err := Check(st.req); err != nil {
				t.Fatal(err)
			}
			before := make([]*agentplanev1.Obligation, len(open))
			for j, o := range open {
				before[j] = proto.Clone(o).(*agentplanev1.Obligation)
			}
			out := Apply("T1", int64(i+1), st.req, open, count, t0)
			for j := range open {
				if !proto.Equal(open[j], before[j]) {
					t.Fatal("Apply modified the ledger it was given")
				}
			}
			v := out.Verdict
			if v.GetVerdictId() != VerdictID(int64(i+1)) || v.GetTaskId() != "T1" || v.GetNode() != "audit" || v.GetApproved() != st.approved ||
				!proto.Equal(v.GetResult(), st.req.Result) || !v.GetCreateTime().AsTime().Equal(t0) {
				t.Errorf("verdict %v", v)
			}
			if !slices.Equal(v.GetDroppedObligationIds(), st.dropped) {
				t.Errorf("dropped %q, want %q", v.GetDroppedObligationIds(), st.dropped)
			}
			if got := ids(out.Resolved); !slices.Equal(got, st.resolved) {
				t.Errorf("resolved %q, want %q", got, st.resolved)
			}
			if got := ids(out.Raised); !slices.Equal(got, st.raised) || !slices.Equal(ids(v.GetRaised()), st.raised) {
				t.Errorf("raised %q, want %q", got, st.raised)
			}
			if got := ids(out.Open); !slices.Equal(got, st.open) {
				t.Errorf("open %q, want %q", got, st.open)
			}
			if len(v.GetResolved()) != len(st.resolved) {
				t.Errorf("verdict lists %d applied resolutions, want %d", len(v.GetResolved()), len(st.resolved))
			}
			for _, o := range out.Resolved {
				if o.GetResolvedInVerdictId() != v.GetVerdictId() || o.GetState() == agentplanev1.ObligationState_OBLIGATION_STATE_OPEN {
					t.Errorf("resolved obligation %v", o)
				}
			}
			for _, o := range out.Raised {
				if o.GetRaisedInVerdictId() != v.GetVerdictId() || o.GetRaisedBy() != "audit" || o.GetState() != agentplanev1.ObligationState_OBLIGATION_STATE_OPEN || o.GetText() == "" {
					t.Errorf("raised obligation %v", o)
				}
			}
			if note := out.DroppedNote(); !strings.Contains(note, st.note) || (st.dropped == nil) != (note == "") {
				t.Errorf("DroppedNote = %q, want it to mention %q", note, st.note)
			}
			open, count = out.Open, out.Count
		})
	}
	if count != 3 {
		t.Errorf("%d obligations raised in all, want 3", count)
	}
}

func TestWithdrawalState(t *testing.T) {
	open := []*agentplanev1.Obligation{{ObligationId: "O1", State: agentplanev1.ObligationState_OBLIGATION_STATE_OPEN}}
	out := Apply("T", 1, Request{Node: "n", Result: result(Pass, nil, nil), Resolved: []*agentplanev1.ObligationResolution{withdrawn("O1", "dup")}}, open, 1, t0)
	if o := out.Resolved[0]; o.GetState() != agentplanev1.ObligationState_OBLIGATION_STATE_WITHDRAWN || o.GetReason() != "dup" {
		t.Errorf("withdrawn obligation %v", o)
	}
}

func TestCheckNode(t *testing.T) {
	node := func(role string) *agentplanev1.GraphAgent {
		return &agentplanev1.GraphAgent{Role: role, Spec: &agentplanev1.NodeSpec{Spec: &agentplanev1.NodeSpec_Agent{Agent: &agentplanev1.AgentSpec{}}}}
	}
	nested := &agentplanev1.GraphSpec{Agents: map[string]*agentplanev1.GraphAgent{"deep_judge": node("evaluator")}}
	spec := &agentplanev1.ResolvedSpec{Spec: &agentplanev1.ResolvedSpec_Graph{Graph: &agentplanev1.GraphSpec{Agents: map[string]*agentplanev1.GraphAgent{
		"sup": node("supervisor"), "judge": node("evaluator"),
		"sub": {Role: "collaborator", Spec: &agentplanev1.NodeSpec{Spec: &agentplanev1.NodeSpec_Graph{Graph: nested}}},
	}}}}
	plain := &agentplanev1.ResolvedSpec{Spec: &agentplanev1.ResolvedSpec_Agent{Agent: &agentplanev1.AgentSpec{}}}
	tests := []struct {
		name string
		spec *agentplanev1.ResolvedSpec
		node string
		ok   bool
	}{
		{"evaluator", spec, "judge", true},
		{"nested evaluator", spec, "deep_judge", true},
		{"supervisor", spec, "sup", false},
		{"unknown", spec, "ghost", false},
		{"plain agent", plain, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckNode(tt.spec, tt.node)
			if (err == nil) != tt.ok {
				t.Fatalf("CheckNode = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && apierr.ReasonOf(err) != apierr.ReasonVerdictInvalid {
				t.Errorf("reason %q", apierr.ReasonOf(err))
			}
		})
	}
}
