package cli

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

func sampleInterrupt() *agentplanev1.Interrupt {
	args := `{"to": "customer@example.com", "body": "` + strings.Repeat("long text ", 20) + `"}`
	return &agentplanev1.Interrupt{
		InterruptId: "i-1", TaskId: "t-1", Kind: agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL,
		State: agentplanev1.InterruptState_INTERRUPT_STATE_PENDING, ArgsDigest: "ab12", CallId: "c1",
		Request: &agentplanev1.Interrupt_Approval{Approval: &agentplanev1.ApprovalRequest{
			InterruptId: "i-1", ToolName: "send_email", ToolDescription: proto.String("Send an email"), ArgumentsJson: args,
			RequestTime: timestamppb.New(time.Now().Add(-5 * time.Minute)),
			Context:     &agentplanev1.ApprovalContext{AgentName: "support", TripIndex: 2, Tags: []string{"outbound", "pii"}, OriginalInput: proto.String("refund order 42")},
		}},
	}
}

func TestHitlList(t *testing.T) {
	pause := &agentplanev1.Interrupt{InterruptId: "i-2", TaskId: "t-2", Kind: agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE,
		State: agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED, Decision: &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_APPROVE},
		Request: &agentplanev1.Interrupt_TurnEnd{TurnEnd: &agentplanev1.TurnEndRequest{RequestTime: timestamppb.Now()}}}
	wait := &agentplanev1.Interrupt{InterruptId: "i-3", TaskId: "t-3", Kind: agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED,
		State: agentplanev1.InterruptState_INTERRUPT_STATE_PENDING, CallId: "w1",
		Request: &agentplanev1.Interrupt_ToolOutput{ToolOutput: &agentplanev1.ToolOutputRequest{ToolName: "get_weather", ArgumentsJson: `{"city": "Oslo"}`, RequestTime: timestamppb.Now()}}}
	f := &fakeCP{inbox: &agentplanev1.ListInterruptsResponse{Interrupts: []*agentplanev1.Interrupt{sampleInterrupt(), pause, wait}}}
	addr := startFakeCP(t, f)
	code, out, errOut := runCtl(t, addr, "hitl", "list", "--task", "t-1", "--tool", "send_email", "--tag", "pii", "--min-age", "2m", "--all", "--turn-ends", "--tool-outputs")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !regexp.MustCompile(`^INTERRUPT\s+TASK\s+TOOL\s+TAGS\s+AGE\s+ARGS\s+STATE$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^i-1\s+t-1\s+send_email\s+outbound,pii\s+5m\d+s\s+\{"to":"customer@example.com","body":"long text[^…]*…\s+pending$`).MatchString(lines[1]) ||
		!regexp.MustCompile(`^i-2\s+t-2\s+\(turn end\)\s+-\s+\S+\s+-\s+approved$`).MatchString(lines[2]) ||
		!regexp.MustCompile(`^i-3\s+t-3\s+get_weather \(client output\)\s+-\s+\S+\s+\{"city":"Oslo"\}\s+pending$`).MatchString(lines[3]) {
		t.Errorf("table:\n%s", out)
	}
	req := requests[*agentplanev1.ListInterruptsRequest](f)[0]
	if req.GetTaskId() != "t-1" || req.GetToolName() != "send_email" || req.GetTag() != "pii" || req.GetMinAge().AsDuration() != 2*time.Minute ||
		len(req.GetStates()) != 2 || len(req.GetKinds()) != 4 ||
		!slices.Contains(req.GetKinds(), agentplanev1.InterruptKind_INTERRUPT_KIND_MODEL_CALL_APPROVAL) {
		t.Errorf("request %v", req)
	}
}

func TestHitlShow(t *testing.T) {
	f := &fakeCP{interrupt: sampleInterrupt()}
	addr := startFakeCP(t, f)
	code, out, _ := runCtl(t, addr, "hitl", "show", "i-1")
	for _, want := range []string{"description     Send an email", "agent           support (trip 2)", "original input  refund order 42",
		"args digest     ab12", "args:\n  {\n    \"to\":", "\"to\": \"customer@example.com\""} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("show: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
}

func TestHitlResolutions(t *testing.T) {
	argsFile := writeFile(t, "args.json", `{"to": "ops@example.com"}`)
	for _, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, r *agentplanev1.ResolveInterruptRequest)
	}{
		{"approve", []string{"approve", "i-1"}, func(t *testing.T, r *agentplanev1.ResolveInterruptRequest) {
			if r.GetApprove() == nil || r.GetApprove().Reason != nil || r.GetArgsDigest() != "" {
				t.Errorf("%v", r)
			}
		}},
		{"approve with reason and digest", []string{"approve", "i-1", "--reason", "fine", "--digest", "ab12"}, func(t *testing.T, r *agentplanev1.ResolveInterruptRequest) {
			if r.GetApprove().GetReason() != "fine" || r.GetArgsDigest() != "ab12" {
				t.Errorf("%v", r)
			}
		}},
		{"reject", []string{"reject", "i-1", "--reason", "wrong customer"}, func(t *testing.T, r *agentplanev1.ResolveInterruptRequest) {
			if r.GetReject().GetReason() != "wrong customer" {
				t.Errorf("%v", r)
			}
		}},
		{"edit inline", []string{"edit", "i-1", "--args", `{"to": "b@example.com", "cc": [1, 2]}`, "--digest", "ab12"}, func(t *testing.T, r *agentplanev1.ResolveInterruptRequest) {
			// The text is sent as written: its digest is what the decision binds.
			if r.GetEdit().GetArgumentsJson() != `{"to": "b@example.com", "cc": [1, 2]}` || r.GetArgsDigest() != "ab12" {
				t.Errorf("%v", r)
			}
		}},
		{"edit from file", []string{"edit", "i-1", "--args", "@" + argsFile, "--reason", "internal address"}, func(t *testing.T, r *agentplanev1.ResolveInterruptRequest) {
			if !strings.Contains(r.GetEdit().GetArgumentsJson(), `"ops@example.com"`) || r.GetEdit().GetReason() != "internal address" {
				t.Errorf("%v", r)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resolved := sampleInterrupt()
			resolved.State = agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED
			resolved.Decision = &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_APPROVE, DecidedBy: "owner", Source: agentplanev1.DecisionSource_DECISION_SOURCE_HUMAN}
			f := &fakeCP{interrupt: resolved}
			addr := startFakeCP(t, f)
			code, out, errOut := runCtl(t, addr, append([]string{"hitl"}, tc.args...)...)
			if code != 0 || !strings.Contains(out, "approve by owner") {
				t.Fatalf("exit %d out %q err %q", code, out, errOut)
			}
			reqs := requests[*agentplanev1.ResolveInterruptRequest](f)
			if len(reqs) != 1 || reqs[0].GetInterruptId() != "i-1" {
				t.Fatalf("requests %v", reqs)
			}
			tc.check(t, reqs[0])
		})
	}
}

// TestHitlResolutionSaysWhatRuns: after a decision ctl prints the arguments the call
// runs with: the reviewer's after an edit, the model's after an approval, none after a
// rejection.
func TestHitlResolutionSaysWhatRuns(t *testing.T) {
	for _, tc := range []struct {
		cmd  []string
		d    *agentplanev1.Decision
		want string
	}{
		{[]string{"edit", "i-1", "--args", `{"to": "b@example.com"}`},
			&agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_EDIT, ArgumentsJson: `{"to": "b@example.com"}`},
			"runs with (edited):\n  {\n    \"to\": \"b@example.com\"\n  }\n"},
		{[]string{"approve", "i-1"},
			&agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_APPROVE, ArgumentsJson: `{"to": "a@example.com"}`},
			"runs with (as the model wrote them):\n  {\n    \"to\": \"a@example.com\"\n  }\n"},
		{[]string{"reject", "i-1", "--reason", "no"},
			&agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_REJECT, Reason: proto.String("no")},
			"does not run: rejected\n"},
	} {
		resolved := sampleInterrupt()
		resolved.State, resolved.Decision = agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED, tc.d
		tc.d.DecidedBy, tc.d.Source = "ann", agentplanev1.DecisionSource_DECISION_SOURCE_HUMAN
		addr := startFakeCP(t, &fakeCP{interrupt: resolved})
		code, out, errOut := runCtl(t, addr, append([]string{"hitl"}, tc.cmd...)...)
		if code != 0 || !strings.HasSuffix(out, tc.want) {
			t.Errorf("%v: exit %d %s, output does not end with %q:\n%s", tc.cmd, code, errOut, tc.want, out)
		}
		if code, out, _ := runCtl(t, addr, "hitl", "show", "i-1"); code != 0 || !strings.HasSuffix(out, tc.want) {
			t.Errorf("show after %v: output does not end with %q:\n%s", tc.cmd, tc.want, out)
		}
	}
}

func TestHitlResolutionUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"reject without reason", []string{"reject", "i-1"}, "reject needs --reason"},
		{"reject with blank reason", []string{"reject", "i-1", "--reason", "  "}, "reject needs --reason"},
		{"edit without args", []string{"edit", "i-1"}, `required flag(s) "args" not set`},
		{"edit with bad json", []string{"edit", "i-1", "--args", "{to: x}"}, "--args is not valid JSON"},
		{"edit with missing file", []string{"edit", "i-1", "--args", "@/no/such/file.json"}, "no such file"},
		{"approve without id", []string{"approve"}, "accepts 1 arg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeCP{interrupt: sampleInterrupt()}
			addr := startFakeCP(t, f)
			code, _, errOut := runCtl(t, addr, append([]string{"hitl"}, tc.args...)...)
			if code != exitUsage || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d stderr %q, want 2 and %q", code, errOut, tc.want)
			}
			if n := len(requests[*agentplanev1.ResolveInterruptRequest](f)); n != 0 {
				t.Fatalf("a usage error reached the server")
			}
		})
	}
}

func TestHitlRevokeLink(t *testing.T) {
	f := &fakeCP{}
	addr := startFakeCP(t, f)
	code, out, errOut := runCtl(t, addr, "hitl", "revoke-link", "mlz.0123.abcd")
	if code != 0 || !regexp.MustCompile(`LINK\s+mlz\.0123\.abcd\n\s*state\s+revoked\n\s*expires\s+2026-12-02T16:00:00Z`).MatchString(out) {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	if req := requests[*agentplanev1.RevokeApprovalLinkRequest](f); len(req) != 1 || req[0].GetLinkId() != "mlz.0123.abcd" {
		t.Fatalf("requests %v", req)
	}
}
