package hitl

// Tests that pin behaviour a mutation run found unguarded. Each names, in its
// comment, the plausible bug (the mutant) it fails on.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

// Edited arguments must be a JSON object also for a tool the spec declares without a
// parameter schema: there no validator runs, and the object check is the only one.
//
// Mutant: checkEdit without its object check (a schema's validator catches it
// otherwise, so TestDecideResolve's case with a schema does not).
func TestEditOfAToolWithoutASchemaMustBeAnObject(t *testing.T) {
	in := pendingInterrupt(t, `{"path":"/a"}`)
	p := ResolveParams{Principal: "alice", Now: t0.Add(time.Second), Reason: ReasonPolicy{Trusted: true}}
	for name, args := range map[string]string{
		"string": `"/b"`,
		"list":   `["/b"]`,
		"number": `3`,
		"null":   `null`,
	} {
		t.Run(name, func(t *testing.T) {
			d, err := DecideResolve(in, editReq(args), p)
			if err == nil {
				t.Fatalf("an edit to a %s was accepted: %v", name, d)
			}
			if e := asAPIErr(t, err); e.Code != codes.InvalidArgument || e.Reason != apierr.ReasonEditInvalid {
				t.Fatalf("error %v, want INVALID_ARGUMENT %s", err, apierr.ReasonEditInvalid)
			}
		})
	}
}

// A list policy's limits hold exactly: at the limit it compiles, one past it does not.
//
// Mutants: the comparisons of MaxPolicyTools and MaxTagBytes moved across their
// boundary.
func TestListPolicyLimitsAreExact(t *testing.T) {
	tools := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("tool.%04d", i)
		}
		return out
	}
	tag := func(n int) map[string][]string { return map[string][]string{"tool.0000": {strings.Repeat("t", n)}} }
	for _, tc := range []struct {
		name string
		p    *agentplanev1.InterruptPolicy
		ok   bool
	}{
		{"MaxPolicyTools tools", allowlist(tools(MaxPolicyTools), nil), true},
		{"one tool more", allowlist(tools(MaxPolicyTools+1), nil), false},
		{"a tag of MaxTagBytes", allowlist(tools(1), tag(MaxTagBytes)), true},
		{"a tag one byte longer", allowlist(tools(1), tag(MaxTagBytes+1)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CompilePolicy(tc.p)
			if (err == nil) != tc.ok {
				t.Fatalf("CompilePolicy = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// An interrupt that waits for a client tool's output is settled by the output alone
// (ContinueTask with tool_outputs): no approve, reject or edit may resolve it, and
// the refusal names the RPC that does. ContinueTask's decision still may.
//
// Mutant: CheckResolvable without its TOOL_OUTPUT_REQUIRED refusal, which let
// ResolveInterrupt settle the wait with a decision and no output.
func TestToolOutputWaitIsNotResolvedByADecision(t *testing.T) {
	call := &agentplanev1.ToolCall{CallId: "c1", ToolName: "browser.click", ArgumentsJson: `{"path":"/a"}`}
	in := NewToolOutputInterrupt(InterruptMeta{InterruptID: "I1", TaskID: "T1", Now: t0}, "a", call)
	p := ResolveParams{Principal: "alice", Now: t0.Add(time.Second), Reason: ReasonPolicy{Trusted: true}}
	refused := func(t *testing.T, err error) {
		t.Helper()
		e := asAPIErr(t, err)
		if e.Code != codes.FailedPrecondition || e.Reason != apierr.ReasonTaskState ||
			e.Metadata[apierr.MetaResolveWith] != apierr.ResolveWithContinueTask || e.Metadata[apierr.MetaInterruptID] != "I1" {
			t.Fatalf("error %v (metadata %v), want FAILED_PRECONDITION %s resolved with ContinueTask", err, e.Metadata, apierr.ReasonTaskState)
		}
	}
	refused(t, CheckResolvable(in, ""))
	refused(t, CheckResolvable(in, in.GetArgsDigest()))
	for name, req := range map[string]*agentplanev1.ResolveInterruptRequest{
		"approve": approveReq(nil),
		"reject":  rejectReq("no"),
		"edit":    editReq(`{"path":"/b"}`),
	} {
		t.Run(name, func(t *testing.T) {
			d, err := DecideResolve(in, req, p)
			if err == nil {
				t.Fatalf("%s resolved a wait for a tool's output: %v", name, d)
			}
			refused(t, err)
		})
	}
	if d, err := DecideContinue(in, "owner", t0); err != nil || d.GetSource() != agentplanev1.DecisionSource_DECISION_SOURCE_CONTINUE {
		t.Fatalf("DecideContinue = %v, %v", d, err)
	}
}

// A reason of exactly MaxReasonBytes is taken, one byte more is not.
//
// Mutant: CheckResolveRequest's bound compared with >= (the table's case only tries
// one byte past it).
func TestReasonOfExactlyMaxReasonBytes(t *testing.T) {
	in := pendingInterrupt(t, `{"path":"/a"}`)
	p := ResolveParams{Principal: "alice", Now: t0, Reason: ReasonPolicy{Trusted: true}}
	reason := strings.Repeat("x", MaxReasonBytes)
	for name, req := range map[string]*agentplanev1.ResolveInterruptRequest{
		"approve": approveReq(&reason), "reject": rejectReq(reason),
	} {
		if d, err := DecideResolve(in, req, p); err != nil || d.GetReason() != reason {
			t.Errorf("%s with a reason of MaxReasonBytes: %v", name, err)
		}
	}
}

// A second ruling on an interrupt is told who ruled first, and how: the reviewer who
// lost the race sees that it was settled and by whom.
//
// Mutants: checkPending's message about the decision dropped, or given only without one.
func TestSecondRulingIsToldWhoRuledFirst(t *testing.T) {
	in := pendingInterrupt(t, `{"path":"/a"}`)
	for typ, word := range map[agentplanev1.DecisionType]string{
		agentplanev1.DecisionType_DECISION_TYPE_APPROVE:     "approved by bob",
		agentplanev1.DecisionType_DECISION_TYPE_REJECT:      "rejected by bob",
		agentplanev1.DecisionType_DECISION_TYPE_EDIT:        "edited by bob",
		agentplanev1.DecisionType_DECISION_TYPE_UNSPECIFIED: "decided by bob",
	} {
		err := CheckResolvable(Resolved(in, &agentplanev1.Decision{Type: typ, DecidedBy: "bob"}), "")
		if e := asAPIErr(t, err); e.Reason != apierr.ReasonAlreadyResolved || !strings.Contains(e.Message, word) {
			t.Errorf("%v: %v; want %s named", typ, err, word)
		}
	}
	settled := proto.Clone(in).(*agentplanev1.Interrupt)
	settled.State = agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED
	if e := asAPIErr(t, CheckResolvable(settled, "")); e.Reason != apierr.ReasonAlreadyResolved || e.Message != "interrupt I1 is already resolved" {
		t.Errorf("settled without a decision: %v", e)
	}
}
