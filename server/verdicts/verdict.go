package verdicts

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/spec"
)

// Pass is the verdict that approves.
const Pass = "pass"

// Bounds on one verdict.
const (
	MaxRationaleBytes  = 16 << 10
	MaxResolutions     = 256
	MaxRaised          = 64
	MaxObligationBytes = 4 << 10
	MaxReasonBytes     = 4 << 10
	MaxScores          = 64
)

// Request is a verdict as an evaluator gives it (RecordVerdictRequest without the lease).
type Request struct {
	Node     string
	Result   *agentplanev1.VerdictResult
	Resolved []*agentplanev1.ObligationResolution
	Raised   []string
	EndsTurn bool
	// CallID is the verdict tool call that carried the verdict, if any.
	CallID string
}

// RequestFrom reads a Request out of a RecordVerdictRequest.
func RequestFrom(r *agentplanev1.RecordVerdictRequest) Request {
	return Request{Node: r.GetNode(), Result: r.GetResult(), Resolved: r.GetResolved(), Raised: r.GetRaised(), EndsTurn: r.GetEndsTurn(), CallID: r.GetCallId()}
}

// Check validates a verdict on its own: the verdict is pass, fail or needs_revision;
// confidence, when given, is in [0, 1] (rule D11-R12); a rationale is given unless the
// verdict is pass; each resolution names an id and says how, and a withdrawal says
// why; raised obligations are non-empty text; everything is bounded. Ids that are
// not open are not an error here: Apply drops them and names them back. A bad verdict
// is INVALID_ARGUMENT (reason VERDICT_INVALID) with every problem in a
// google.rpc.BadRequest.
func Check(r Request) error {
	var bad []*errdetails.BadRequest_FieldViolation
	add := func(field, format string, args ...any) {
		bad = append(bad, &errdetails.BadRequest_FieldViolation{Field: field, Description: fmt.Sprintf(format, args...)})
	}
	if r.Node == "" {
		add("node", "the evaluator node is required")
	}
	res := r.Result
	// The verdict itself is checked by the spec's rule catalogue, so that a verdict
	// tool call and a runtime's report are held to the same rules (D11-R12..R14).
	for _, v := range spec.CheckVerdict(res, "") {
		add("result"+strings.ReplaceAll(v.GetPath(), "/", "."), "%s: %s", v.GetRuleId(), v.GetMessage())
	}
	if rat := res.GetRationale(); len(rat) > MaxRationaleBytes {
		add("result.rationale", "%d bytes, at most %d allowed", len(rat), MaxRationaleBytes)
	}
	if len(res.GetScores()) > MaxScores {
		add("result.scores", "%d scores, at most %d allowed", len(res.GetScores()), MaxScores)
	}
	for k, v := range res.GetScores() {
		if k == "" {
			add("result.scores", "a score has an empty name")
		}
		if !finite(v) {
			add(fmt.Sprintf("result.scores[%q]", k), "a score must be JSON: no NaN or infinite numbers")
		}
	}
	if len(r.Resolved) > MaxResolutions {
		add("resolved", "%d resolutions, at most %d allowed", len(r.Resolved), MaxResolutions)
	}
	for i, res := range r.Resolved {
		f := "resolved[" + strconv.Itoa(i) + "]"
		if res.GetObligationId() == "" {
			add(f+".obligation_id", "the obligation id is required")
		}
		switch res.GetHow() {
		case agentplanev1.ResolutionHow_RESOLUTION_HOW_ADDRESSED:
		case agentplanev1.ResolutionHow_RESOLUTION_HOW_WITHDRAWN:
			if strings.TrimSpace(res.GetReason()) == "" {
				add(f+".reason", "a withdrawal needs a reason: a withdrawal without one is a silent drop")
			}
		default:
			add(f+".how", "say addressed or withdrawn")
		}
		if len(res.GetReason()) > MaxReasonBytes {
			add(f+".reason", "%d bytes, at most %d allowed", len(res.GetReason()), MaxReasonBytes)
		}
	}
	if len(r.Raised) > MaxRaised {
		add("raised", "%d obligations, at most %d allowed", len(r.Raised), MaxRaised)
	}
	for i, text := range r.Raised {
		f := "raised[" + strconv.Itoa(i) + "]"
		switch {
		case strings.TrimSpace(text) == "":
			add(f, "an obligation needs text")
		case len(text) > MaxObligationBytes:
			add(f, "%d bytes, at most %d allowed", len(text), MaxObligationBytes)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	msgs := make([]string, len(bad))
	for i, v := range bad {
		msgs[i] = v.GetField() + ": " + v.GetDescription()
	}
	return apierr.InvalidArgument(apierr.ReasonVerdictInvalid, "invalid verdict: %s", strings.Join(msgs, "; ")).
		WithDetails(&errdetails.BadRequest{FieldViolations: bad})
}

func finite(v *structpb.Value) bool {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		return !math.IsNaN(k.NumberValue) && !math.IsInf(k.NumberValue, 0)
	case *structpb.Value_ListValue:
		for _, e := range k.ListValue.GetValues() {
			if !finite(e) {
				return false
			}
		}
	case *structpb.Value_StructValue:
		for _, e := range k.StructValue.GetFields() {
			if !finite(e) {
				return false
			}
		}
	}
	return true
}

// CheckNode refuses a verdict from a node that is not an evaluator of the task's
// graph: only evaluator nodes are granted the verdict tool. A plain agent has none.
func CheckNode(spec *agentplanev1.ResolvedSpec, node string) error {
	n := hitl.LookupNode(spec, node)
	if n == nil {
		return apierr.FailedPrecondition(apierr.ReasonVerdictInvalid, "node %q is not a node of this task's graph; only evaluator nodes record verdicts", node)
	}
	if n.GetRole() != "evaluator" {
		return apierr.FailedPrecondition(apierr.ReasonVerdictInvalid, "node %q is a %s; only evaluator nodes are granted the verdict tool", node, n.GetRole())
	}
	return nil
}

// VerdictID is the id of a task's n-th verdict (from 1): "V1", "V2", ...
func VerdictID(n int64) string { return "V" + strconv.FormatInt(n, 10) }

// ObligationID is the id of a task's n-th obligation (from 1): "O1", "O2", ...
func ObligationID(n int64) string { return "O" + strconv.FormatInt(n, 10) }

// Outcome is a verdict applied to a ledger.
type Outcome struct {
	// Verdict is the verdict as recorded, without sequence (the store's).
	Verdict *agentplanev1.Verdict
	// Resolved are the ledger entries this verdict closed, in their new state.
	Resolved []*agentplanev1.Obligation
	// Raised are the new entries, with their ids.
	Raised []*agentplanev1.Obligation
	// Open is the ledger's open entries afterwards, in the order they were raised.
	Open []*agentplanev1.Obligation
	// Count is the number of obligations ever raised in the task afterwards.
	Count int64
}

// Apply applies a checked verdict to a task's ledger and returns what changed. open
// are the ledger's open obligations (in the order they were raised) and count the
// number of obligations raised so far; neither is modified.
//
// A resolution naming an id that is not open (unknown, already resolved, or named
// twice in this verdict) is dropped and listed in Verdict.dropped_obligation_ids; the rest of the
// verdict counts. Raised obligations get the next ids, O<count+1>, ... . Approved is
// verdict == pass.
func Apply(taskID string, verdictNo int64, r Request, open []*agentplanev1.Obligation, count int64, now time.Time) Outcome {
	vid := VerdictID(verdictNo)
	ts := timestamppb.New(now)
	v := &agentplanev1.Verdict{
		VerdictId:  vid,
		TaskId:     taskID,
		Node:       r.Node,
		Result:     r.Result,
		Approved:   r.Result.GetVerdict() == Pass,
		EndsTurn:   r.EndsTurn,
		CreateTime: ts,
		CallId:     r.CallID,
	}
	byID := make(map[string]int, len(open))
	for i, o := range open {
		byID[o.GetObligationId()] = i
	}
	closed := make([]bool, len(open))
	out := Outcome{Verdict: v, Count: count}
	for _, res := range r.Resolved {
		i, ok := byID[res.GetObligationId()]
		if !ok || closed[i] {
			v.DroppedObligationIds = append(v.DroppedObligationIds, res.GetObligationId())
			continue
		}
		closed[i] = true
		o := cloneObligation(open[i])
		o.State = agentplanev1.ObligationState_OBLIGATION_STATE_ADDRESSED
		if res.GetHow() == agentplanev1.ResolutionHow_RESOLUTION_HOW_WITHDRAWN {
			o.State = agentplanev1.ObligationState_OBLIGATION_STATE_WITHDRAWN
		}
		o.ResolvedInVerdictId = vid
		o.Reason = res.Reason
		v.Resolved = append(v.Resolved, res)
		out.Resolved = append(out.Resolved, o)
	}
	for i, o := range open {
		if !closed[i] {
			out.Open = append(out.Open, o)
		}
	}
	for _, text := range r.Raised {
		out.Count++
		o := &agentplanev1.Obligation{
			ObligationId:      ObligationID(out.Count),
			Text:              text,
			State:             agentplanev1.ObligationState_OBLIGATION_STATE_OPEN,
			RaisedBy:          r.Node,
			RaisedInVerdictId: vid,
			CreateTime:        ts,
		}
		v.Raised = append(v.Raised, o)
		out.Raised = append(out.Raised, o)
		out.Open = append(out.Open, o)
	}
	return out
}

func cloneObligation(o *agentplanev1.Obligation) *agentplanev1.Obligation {
	return proto.Clone(o).(*agentplanev1.Obligation)
}

// DroppedNote is the sentence that names dropped ids back to the evaluator together
// with the ids it may close, so that it can correct itself; "" when nothing was
// dropped.
func (o Outcome) DroppedNote() string {
	if len(o.Verdict.GetDroppedObligationIds()) == 0 {
		return ""
	}
	openIDs := make([]string, len(o.Open))
	for i, ob := range o.Open {
		openIDs[i] = ob.GetObligationId()
	}
	open := "there are no open obligations"
	if len(openIDs) > 0 {
		open = "the open obligations are " + strings.Join(openIDs, ", ")
	}
	return fmt.Sprintf("Resolutions for %s were dropped because those ids are not open; %s. The rest of the verdict was recorded.",
		strings.Join(quoteAll(o.Verdict.GetDroppedObligationIds()), ", "), open)
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// VerdictRecordedEvent is the event recording a verdict.
func VerdictRecordedEvent(v *agentplanev1.Verdict) *agentplanev1.VerdictRecorded {
	return &agentplanev1.VerdictRecorded{Verdict: v}
}
