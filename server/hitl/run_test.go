package hitl

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/agentplane/agentplane/gates"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

func TestInterruptID(t *testing.T) {
	a := InterruptID("T1", "c1")
	if a != InterruptID("T1", "c1") {
		t.Error("the id of a call is not stable")
	}
	// The separator keeps ("T1", "c1") apart from ("T1c", "1") and the like.
	for _, other := range [][2]string{{"T1", "c2"}, {"T2", "c1"}, {"T1c", "1"}, {"T", "1c1"}} {
		if InterruptID(other[0], other[1]) == a {
			t.Errorf("InterruptID%q collides with (T1, c1)", other)
		}
	}
	if len(a) != len(InterruptID("a-much-longer-task-id", "and-call-id")) {
		t.Error("ids differ in length")
	}
}

// decidedAtOnce runs the gate on a call and returns the record it stores for an
// answer given at once.
func decidedAtOnce(t *testing.T, task TaskGating, c Call) *agentplanev1.Interrupt {
	t.Helper()
	r, err := NewGate(nil, gates.AlwaysGated).Check(context.Background(), task, c, t0)
	if err != nil || r.Outcome == agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT {
		t.Fatalf("gate: %v %v", r.Outcome, err)
	}
	return DecidedCall(InterruptMeta{InterruptID: InterruptID("T1", c.CallID), TaskID: "T1", Now: t0, Timeout: time.Minute}, c, r)
}

func TestDecidedCall(t *testing.T) {
	args := `{"path": "/a"}`
	plain := agentSpec(&agentplanev1.AgentSpec{})
	allowed := decidedAtOnce(t, TaskGating{Spec: plain, Policy: allowlist([]string{"fs.write"}, nil)},
		Call{CallID: "c1", ToolName: "fs.read", ArgumentsJSON: args, AgentName: "a"})
	digest := ArgsDigest(args)
	d := allowed.GetDecision()
	if allowed.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED || allowed.GetDeadline() != nil ||
		allowed.GetArgsDigest() != digest || allowed.GetApproval().GetArgumentsJson() != "" || allowed.GetInterruptId() != InterruptID("T1", "c1") ||
		d.GetArgumentsJson() != "" || d.GetArgsDigest() != digest || d.GetSource() != agentplanev1.DecisionSource_DECISION_SOURCE_POLICY {
		t.Errorf("record of an allowed call = %v", allowed)
	}
	if !DecidedAtCheck(allowed) || OutcomeOf(allowed) != agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW {
		t.Errorf("DecidedAtCheck = %v, OutcomeOf = %v", DecidedAtCheck(allowed), OutcomeOf(allowed))
	}
	rejected := decidedAtOnce(t, TaskGating{Spec: plain}, Call{CallID: "c2", ToolName: "a2a__bank__pay", ArgumentsJSON: args, AgentName: "a"})
	if !DecidedAtCheck(rejected) || OutcomeOf(rejected) != agentplanev1.GateOutcome_GATE_OUTCOME_REJECT {
		t.Errorf("rejected: DecidedAtCheck = %v, OutcomeOf = %v", DecidedAtCheck(rejected), OutcomeOf(rejected))
	}
	pending := pendingInterrupt(t, args)
	if DecidedAtCheck(pending) || OutcomeOf(pending) != agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT {
		t.Error("a raised interrupt reads as decided at once")
	}
	human, _ := DecideResolve(pending, approveReq(nil), ResolveParams{Principal: "p", Now: t0})
	if DecidedAtCheck(Resolved(pending, human)) || OutcomeOf(Resolved(pending, human)) != agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT {
		t.Error("a resolved interrupt reads as decided at once")
	}
}

func TestCheckRun(t *testing.T) {
	args := `{"path": "/a", "n": 12345678901234567}`
	reencoded := `{"n":12345678901234567,"path":"/a"}`
	rounded := `{"path": "/a", "n": 1.2345678901234568e+16}`
	edited := `{"path": "/safe"}`
	pending := pendingInterrupt(t, args)
	decide := func(req *agentplanev1.ResolveInterruptRequest) *agentplanev1.Interrupt {
		d, err := DecideResolve(pending, req, ResolveParams{Principal: "p", Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		return Resolved(pending, d)
	}
	approved, rejected, edit := decide(approveReq(nil)), decide(rejectReq("no")), decide(editReq(edited))
	deadline := Resolved(pending, DeadlineDecision(pending, true, t0))
	allowed := decidedAtOnce(t, TaskGating{Spec: agentSpec(&agentplanev1.AgentSpec{})}, Call{CallID: "c1", ToolName: "fs.write", ArgumentsJSON: args, AgentName: "a"})
	// Without a policy a plain agent has no reviewer: an always-gated call is rejected.
	disabled := decidedAtOnce(t, TaskGating{Spec: agentSpec(&agentplanev1.AgentSpec{})},
		Call{CallID: "c1", ToolName: "a2a__bank__pay", ArgumentsJSON: args, AgentName: "a"})
	pause := NewAutoPauseInterrupt(InterruptMeta{InterruptID: "P1", TaskID: "T1", Now: t0}, "a")
	call := func(tool string, a string) *agentplanev1.ToolCall {
		return &agentplanev1.ToolCall{CallId: "c1", ToolName: tool, ArgumentsJson: a}
	}
	tests := []struct {
		name string
		in   *agentplanev1.Interrupt
		call *agentplanev1.ToolCall
		code codes.Code // OK: runs
	}{
		{"approved, same args", approved, call("fs.write", args), codes.OK},
		// The decision binds the text: the same value written otherwise, or rounded
		// through a double, is not what was approved.
		{"approved, same args encoded otherwise", approved, call("fs.write", reencoded), codes.FailedPrecondition},
		{"approved, the number rounded", approved, call("fs.write", rounded), codes.FailedPrecondition},
		{"approved, other args", approved, call("fs.write", edited), codes.FailedPrecondition},
		{"approved, other tool", approved, call("fs.delete", args), codes.FailedPrecondition},
		{"edited, edited args", edit, call("fs.write", edited), codes.OK},
		{"edited, original args", edit, call("fs.write", args), codes.FailedPrecondition},
		// A rejected call is reported, with the arguments ruled on, for the transcript.
		{"rejected, ruled args", rejected, call("fs.write", args), codes.OK},
		{"rejected, other args", rejected, call("fs.write", edited), codes.FailedPrecondition},
		{"rejected, other tool", rejected, call("fs.delete", args), codes.FailedPrecondition},
		{"pending", pending, call("fs.write", args), codes.FailedPrecondition},
		{"approved by the deadline default", deadline, call("fs.write", args), codes.OK},
		{"allowed by policy", allowed, call("fs.write", args), codes.OK},
		{"allowed by policy, other args", allowed, call("fs.write", edited), codes.FailedPrecondition},
		{"allowed by policy, no args", allowed, call("fs.write", ""), codes.FailedPrecondition},
		{"rejected at once (hitl disabled), ruled args", disabled, call("a2a__bank__pay", args), codes.OK},
		{"rejected at once (hitl disabled), other args", disabled, call("a2a__bank__pay", edited), codes.FailedPrecondition},
		{"a chat pause", pause, call("__auto_pause__", ""), codes.FailedPrecondition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckRun(tt.in, tt.call)
			if tt.code == codes.OK {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			e := asAPIErr(t, err)
			if e.Code != tt.code {
				t.Fatalf("err = %v, want %s", err, tt.code)
			}
			if tt.code == codes.FailedPrecondition && (e.Reason != apierr.ReasonToolCallNotApproved || e.Metadata["call_id"] != "c1") {
				t.Errorf("err = %v (metadata %v), want reason %s naming the call", err, e.Metadata, apierr.ReasonToolCallNotApproved)
			}
		})
	}
}

func TestCheckRunMalformedArgs(t *testing.T) {
	// Malformed model JSON is carried, gated and bound like any text.
	bad := `{"path": "/a"`
	pending := pendingInterrupt(t, bad)
	if pending.GetApproval().GetArgumentsJson() != bad || pending.GetArgsDigest() != ArgsDigest(bad) {
		t.Fatalf("interrupt carries %q (digest %s), want the text as given", pending.GetApproval().GetArgumentsJson(), pending.GetArgsDigest())
	}
	d, err := DecideResolve(pending, approveReq(nil), ResolveParams{Principal: "p", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckRun(Resolved(pending, d), &agentplanev1.ToolCall{CallId: "c1", ToolName: "fs.write", ArgumentsJson: bad}); err != nil {
		t.Errorf("the approved malformed text is refused: %v", err)
	}
}

func TestCheckResult(t *testing.T) {
	pending := pendingInterrupt(t, `{}`)
	decide := func(req *agentplanev1.ResolveInterruptRequest) *agentplanev1.Interrupt {
		d, err := DecideResolve(pending, req, ResolveParams{Principal: "p", Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		return Resolved(pending, d)
	}
	approved, rejected := decide(approveReq(nil)), decide(rejectReq("no"))
	for _, tt := range []struct {
		name string
		in   *agentplanev1.Interrupt
		res  *agentplanev1.ToolResult
		ok   bool
	}{
		{"approved", approved, &agentplanev1.ToolResult{CallId: "c1", ToolName: "fs.write"}, true},
		{"approved, failed", approved, &agentplanev1.ToolResult{CallId: "c1", IsError: true}, true},
		{"approved, other tool", approved, &agentplanev1.ToolResult{CallId: "c1", ToolName: "fs.read"}, false},
		{"rejected, as an error", rejected, &agentplanev1.ToolResult{CallId: "c1", ToolName: "fs.write", IsError: true}, true},
		{"rejected, as a success", rejected, &agentplanev1.ToolResult{CallId: "c1", ToolName: "fs.write"}, false},
	} {
		err := CheckResult(tt.in, tt.res)
		if (err == nil) != tt.ok {
			t.Errorf("%s: CheckResult = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && asAPIErr(t, err).Reason != apierr.ReasonToolResultUnexpected {
			t.Errorf("%s: reason %v", tt.name, err)
		}
	}
}
