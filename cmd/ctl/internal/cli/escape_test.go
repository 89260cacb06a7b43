package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
)

// nasty is caller-controlled text that tries to take the approver's terminal over:
// clear the screen and home the cursor (CSI), retitle the window (OSC, BEL), overwrite
// with carriage return and backspace, reorder with a bidi override and isolate, an
// 8-bit CSI (C1), DEL and a byte that is not UTF-8.
const nasty = "x\x1b[2J\x1b[H\x1b]0;pwned\x07APPROVED BY MANAGER, amount 1 EUR\r\b\b\x7f\u202eRUE 0001\u202c\u2066\u2069\u009b31m\u200f\n\tfake line"

// raw returns the first character in out that a terminal would obey, or "".
// It is written independently of printer.Text on purpose.
func raw(out string) string {
	for i, r := range out {
		switch {
		case r == '\n' || r == '\t':
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(out[i:]); n == 1 {
				return "invalid UTF-8"
			}
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f,
			r == 0x61c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x2028, r == 0x2029:
			return strings.ToUpper(string(rune('U'))) + "+" + strings.ToUpper(strconvHex(r))
		}
	}
	return ""
}

func strconvHex(r rune) string {
	const digits = "0123456789abcdef"
	s := ""
	for i := 0; i < 4; i++ {
		s = string(digits[r&0xf]) + s
		r >>= 4
	}
	return s
}

func nastyValue() *structpb.Value {
	v, _ := structpb.NewValue(map[string]any{"amount": nasty, nasty: []any{nasty}})
	return v
}

func nastyInterrupt() *agentplanev1.Interrupt {
	return &agentplanev1.Interrupt{
		InterruptId: "i-1" + nasty, TaskId: "t-1" + nasty, Kind: agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL,
		State: agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED, ArgsDigest: nasty, CallId: nasty,
		Request: &agentplanev1.Interrupt_Approval{Approval: &agentplanev1.ApprovalRequest{
			ToolName: "issue_refund" + nasty, ToolDescription: proto.String(nasty), ArgumentsJson: nasty, RequestTime: timestamppb.Now(),
			Context: &agentplanev1.ApprovalContext{AgentName: nasty, Tags: []string{nasty}, OriginalInput: proto.String(nasty), SessionId: proto.String(nasty)},
		}},
		Decision: &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_EDIT, DecidedBy: nasty, Reason: proto.String(nasty), ArgumentsJson: nasty},
	}
}

func nastyTask() *agentplanev1.Task {
	return &agentplanev1.Task{
		TaskId: "t-1" + nasty, State: agentplanev1.TaskState_TASK_STATE_FAILED, Spec: &agentplanev1.Task_AgentId{AgentId: nasty},
		Input: client.UserText(nasty), Labels: map[string]string{nasty: nasty}, RequestId: nasty, CreatedBy: nasty, RuntimeId: nasty,
		PendingInterruptIds: []string{nasty}, Failure: &agentplanev1.TaskFailure{Reason: nasty, Message: nasty},
		Output: &agentplanev1.TaskOutput{Message: client.UserText(nasty), Structured: nastyValue()},
	}
}

func nastyEvents() []*agentplanev1.TaskEvent {
	evs := []*agentplanev1.TaskEvent{
		{Payload: &agentplanev1.TaskEvent_Submitted{Submitted: &agentplanev1.TaskSubmitted{Input: client.UserText(nasty), CreatedBy: nasty, Kind: nasty}}},
		{Payload: &agentplanev1.TaskEvent_Message{Message: &agentplanev1.Message{Parts: client.UserText(nasty).GetParts(), Node: nasty, Model: nasty}}},
		{Payload: &agentplanev1.TaskEvent_ToolCall{ToolCall: &agentplanev1.ToolCall{ToolName: nasty, CallId: nasty, ArgumentsJson: nasty}}},
		{Payload: &agentplanev1.TaskEvent_ToolResult{ToolResult: &agentplanev1.ToolResult{ToolName: nasty, CallId: nasty, Result: nastyValue()}}},
		// A rejected call: its report and its refusal read as refused.
		{Payload: &agentplanev1.TaskEvent_InterruptResolved{InterruptResolved: &agentplanev1.InterruptResolved{InterruptId: nasty, Decision: &agentplanev1.Decision{
			Type: agentplanev1.DecisionType_DECISION_TYPE_REJECT, CallId: "refused" + nasty, DecidedBy: nasty, Reason: proto.String(nasty)}}}},
		{Payload: &agentplanev1.TaskEvent_ToolCall{ToolCall: &agentplanev1.ToolCall{ToolName: nasty, CallId: "refused" + nasty, ArgumentsJson: nasty}}},
		{Payload: &agentplanev1.TaskEvent_ToolResult{ToolResult: &agentplanev1.ToolResult{ToolName: nasty, CallId: "refused" + nasty, Result: nastyValue(), IsError: true}}},
		{Payload: &agentplanev1.TaskEvent_Note{Note: &agentplanev1.RuntimeNote{Text: nasty, Attributes: map[string]string{nasty: nasty}}}},
		{Payload: &agentplanev1.TaskEvent_Lease{Lease: &agentplanev1.LeaseChanged{RuntimeId: nasty}}},
		{Payload: &agentplanev1.TaskEvent_ToolGated{ToolGated: &agentplanev1.ToolGated{ToolName: nasty, CallId: nasty, InterruptId: nasty, Tags: []string{nasty}, Reason: nasty}}},
		{Payload: &agentplanev1.TaskEvent_InterruptRaised{InterruptRaised: &agentplanev1.InterruptRaised{Interrupt: nastyInterrupt()}}},
		{Payload: &agentplanev1.TaskEvent_InterruptResolved{InterruptResolved: &agentplanev1.InterruptResolved{InterruptId: nasty, Decision: nastyInterrupt().GetDecision()}}},
		{Payload: &agentplanev1.TaskEvent_CancelRequested{CancelRequested: &agentplanev1.CancelRequested{RequestedBy: nasty, Reason: nasty}}},
		{Payload: &agentplanev1.TaskEvent_VerdictRecorded{VerdictRecorded: &agentplanev1.VerdictRecorded{Verdict: &agentplanev1.Verdict{Node: nasty, Result: &agentplanev1.VerdictResult{Verdict: nasty}, DroppedObligationIds: []string{nasty}}}}},
		{Payload: &agentplanev1.TaskEvent_McpInjectionIgnored{McpInjectionIgnored: &agentplanev1.InjectionIgnored{Names: []string{nasty}, Reason: nasty}}},
		{Payload: &agentplanev1.TaskEvent_A2AInjectionIgnored{A2AInjectionIgnored: &agentplanev1.InjectionIgnored{Names: []string{nasty}, Reason: nasty}}},
		{Payload: &agentplanev1.TaskEvent_EntriesDropped{EntriesDropped: &agentplanev1.EntriesDropped{Protocol: nasty, Entries: []*agentplanev1.DroppedEntry{{Name: nasty, Reason: nasty}}}}},
		{Payload: &agentplanev1.TaskEvent_Output{Output: &agentplanev1.TaskOutput{Message: client.UserText(nasty)}}},
		{Payload: &agentplanev1.TaskEvent_StateChanged{StateChanged: &agentplanev1.StateChanged{ToState: agentplanev1.TaskState_TASK_STATE_FAILED, Reason: nasty}}},
	}
	for i, ev := range evs {
		ev.Sequence = int64(i + 1)
		ev.TaskId = "t-1"
	}
	return evs
}

// TestHumanOutputEscapesCallerText runs every command that prints caller-controlled
// text, in each output format, with that text full of terminal control sequences, and
// checks that nothing a terminal would obey reaches stdout or stderr.
func TestHumanOutputEscapesCallerText(t *testing.T) {
	f := &fakeCP{
		task:        nastyTask(),
		taskPages:   []*agentplanev1.ListTasksResponse{{Tasks: []*agentplanev1.Task{nastyTask()}, NextPageToken: nasty}},
		verdicts:    []*agentplanev1.ListVerdictsResponse{{Verdicts: []*agentplanev1.Verdict{{VerdictId: nasty, Node: nasty, Result: &agentplanev1.VerdictResult{Verdict: nasty, Rationale: proto.String(nasty)}, DroppedObligationIds: []string{nasty}}}}},
		obligations: []*agentplanev1.ListObligationsResponse{{Obligations: []*agentplanev1.Obligation{{ObligationId: nasty, RaisedBy: nasty, RaisedInVerdictId: nasty, ResolvedInVerdictId: nasty, Text: nasty, Reason: proto.String(nasty)}}}},
		interrupt:   nastyInterrupt(),
		inbox:       &agentplanev1.ListInterruptsResponse{Interrupts: []*agentplanev1.Interrupt{nastyInterrupt()}, NextPageToken: nasty},
		stats:       &agentplanev1.GetStatsResponse{ServerVersion: nasty, Store: nasty, StorePath: nasty, TasksByState: map[string]int64{nasty: 1}},
		purge:       &agentplanev1.PurgeTasksResponse{},
		events:      nastyEvents(),
		watchEOF:    true,
	}
	addr := startFakeCP(t, f)
	agent := writeFile(t, "agent.yaml", "apiVersion: qar/v1\nkind: AgentSpec\ninstructions: x\nmodel: m\n")
	for _, args := range [][]string{
		{"hitl", "list", "--all"},
		{"hitl", "show", "i-1"},
		{"hitl", "approve", "i-1"},
		{"task", "list"},
		{"task", "get", "t-1"},
		{"task", "start", "--agent", agent, "--input", "x", "--request-id", "again"},
		{"task", "watch", "t-1"},
		{"task", "verdicts", "t-1"},
		{"task", "obligations", "t-1"},
		{"admin", "stats"},
		{"admin", "purge", "--older-than", "1h"},
	} {
		for _, format := range []string{"table", "json", "yaml"} {
			code, out, errOut := runCtl(t, addr, append(args, "-o", format)...)
			if code != 0 {
				t.Errorf("%v -o %s: exit %d: %s", args, format, code, errOut)
			}
			if bad := raw(out + errOut); bad != "" {
				t.Errorf("%v -o %s prints %s raw:\n%s%s", args, format, bad, out, errOut)
			}
			if format == "table" && args[1] != "purge" && !strings.Contains(out, `\x1b[2J`) {
				t.Errorf("%v should show the escaped text, not drop it:\n%s", args, out)
			}
		}
	}

	// Errors: the server's message (a caller's text echoed back) and ErrorInfo.
	f.err = func() error { // a reason no server declares, as a hostile server could send
		st, _ := status.New(codes.FailedPrecondition, "no task "+nasty).WithDetails(&errdetails.ErrorInfo{Domain: reasons.Domain, Reason: "TASK_NOT_FOUND" + nasty})
		return st.Err()
	}()
	code, out, errOut := runCtl(t, addr, "task", "get", "t-1"+nasty)
	if code == 0 || raw(out+errOut) != "" || !strings.Contains(errOut, `\x1b[2J`) {
		t.Errorf("error: exit %d, raw %s:\n%s%s", code, raw(out+errOut), out, errOut)
	}
	f.err = status.Error(codes.Internal, nasty)
	if code, out, errOut := runCtl(t, addr, "hitl", "list"); code == 0 || raw(out+errOut) != "" {
		t.Errorf("plain status error: exit %d, raw %s:\n%s%s", code, raw(out+errOut), out, errOut)
	}
}

// TestSpecValidateEscapesNamesAndMessages validates a file whose name and content
// carry control sequences against a real server: the file name, the rule messages
// (which quote the document) and the summary must all reach the terminal escaped.
func TestSpecValidateEscapesNamesAndMessages(t *testing.T) {
	in := servertest.Start(t, nil)
	dir := t.TempDir()
	name := filepath.Join(dir, "agent\x1b[2J\u202e\r.yaml")
	doc := "apiVersion: qar/v1\nkind: AgentSpec\ninstructions: x\nmodel: m\n\"\\e[2J\\u202e\\a\": 1\n"
	if err := os.WriteFile(name, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	valid := filepath.Join(dir, "ok\x1b]0;t\x07.yaml")
	if err := os.WriteFile(valid, []byte("apiVersion: qar/v1\nkind: AgentSpec\ninstructions: x\nmodel: m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing\x1b[2J.yaml")
	for _, args := range [][]string{{"spec", "validate", name, valid}, {"spec", "validate", missing}} {
		code, out, errOut := runCtl(t, in.GRPCAddr, args...)
		if code == 0 {
			t.Errorf("%q: want a failure", args)
		}
		if bad := raw(out + errOut); bad != "" {
			t.Errorf("%q prints %s raw:\n%s%s", args, bad, out, errOut)
		}
		if !strings.Contains(out+errOut, `\x1b[2J`) {
			t.Errorf("%q should show the escaped name:\n%s%s", args, out, errOut)
		}
	}
}
