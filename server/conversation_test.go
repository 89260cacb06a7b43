package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
)

func sha(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// TestArgumentsTravelAsText: a call's arguments are the model's JSON text, end to end
// (gRPC, HTTP/JSON, the store): 12345678901234567 keeps every digit, malformed text is
// carried, gated and digested as given, an edit is new text checked against the
// tool's schema, and the transcript has each call with the text it ran with.
func TestArgumentsTravelAsText(t *testing.T) {
	in := servertest.Start(t, nil)
	c := in.Client
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	started, err := c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())},
		Input:  client.UserText("move 12345678901234567"), InterruptPolicy: gatedPolicy(),
	})
	if err != nil {
		t.Fatal(err)
	}
	id := started.GetTask().GetTaskId()
	if started.GetTask().GetInput().GetMessageId() == "" || client.MessageText(started.GetTask().GetInput()) != "move 12345678901234567" {
		t.Fatalf("input %v", started.GetTask().GetInput())
	}
	leases, err := c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt", Wait: nil})
	if err != nil || len(leases.GetLeases()) != 1 {
		t.Fatalf("lease: %v %v", leases, err)
	}
	l := leases.GetLeases()[0]
	ref := &agentplanev1.LeaseRef{TaskId: id, LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
	check := func(callID, tool, args string) *agentplanev1.CheckToolCallResponse {
		t.Helper()
		resp, err := c.Runtime.CheckToolCall(ctx, &agentplanev1.CheckToolCallRequest{Lease: ref, CallId: callID, ToolName: tool, AgentName: "teller", ArgumentsJson: args})
		if err != nil {
			t.Fatalf("CheckToolCall %s: %v", callID, err)
		}
		return resp
	}
	const big = `{"n": 12345678901234567}`
	allowed := check("c1", freeTool, big)
	if allowed.GetOutcome() != agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW || allowed.GetDecision().GetArgumentsJson() != big ||
		allowed.GetDecision().GetArgsDigest() != sha(big) || allowed.GetDecision().GetCallId() != "c1" {
		t.Fatalf("allowed = %v", allowed)
	}
	gated := check("c2", gatedTool, big).GetInterrupt()
	const malformed = `{"n": 1`
	broken := check("c3", gatedTool, malformed).GetInterrupt()
	if gated.GetArgsDigest() != sha(big) || broken.GetArgsDigest() != sha(malformed) || broken.GetApproval().GetArgumentsJson() != malformed {
		t.Fatalf("interrupts: %v / %v", gated, broken)
	}

	// Over HTTP/JSON the text is a JSON string: no number is reparsed.
	resp, err := http.Get("http://" + in.HTTPAddr + "/v1/interrupts/" + gated.GetInterruptId())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var got agentplanev1.GetInterruptResponse
	if err := protojson.Unmarshal(body, &got); err != nil || got.GetInterrupt().GetApproval().GetArgumentsJson() != big {
		t.Fatalf("GET interrupt: %v %s", err, body)
	}

	resolve := func(id string, d *agentplanev1.ResolveInterruptRequest) (*agentplanev1.ResolveInterruptResponse, error) {
		d.InterruptId = id
		return c.Hitl.ResolveInterrupt(ctx, d)
	}
	edit := func(text string) *agentplanev1.ResolveInterruptRequest {
		return &agentplanev1.ResolveInterruptRequest{Decision: &agentplanev1.ResolveInterruptRequest_Edit{Edit: &agentplanev1.EditDecision{ArgumentsJson: text}}}
	}
	for _, bad := range []string{`{"n": "x"}`, `{"n": 1`, `[1]`} {
		if _, err := resolve(broken.GetInterruptId(), edit(bad)); status.Code(err) != codes.InvalidArgument {
			t.Errorf("edit to %s: %v, want INVALID_ARGUMENT", bad, err)
		}
	}
	const fixed = `{"n": 12345678901234568}`
	edited, err := resolve(broken.GetInterruptId(), edit(fixed))
	if err != nil || edited.GetInterrupt().GetDecision().GetArgumentsJson() != fixed || edited.GetInterrupt().GetDecision().GetArgsDigest() != sha(fixed) ||
		edited.GetInterrupt().GetDecision().GetRuledArgsDigest() != sha(malformed) || edited.GetInterrupt().GetDecision().GetCallId() != "c3" {
		t.Fatalf("edit = %v, %v", edited, err)
	}
	approved, err := resolve(gated.GetInterruptId(), &agentplanev1.ResolveInterruptRequest{
		Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}}})
	if err != nil || approved.GetInterrupt().GetDecision().GetArgumentsJson() != big {
		t.Fatalf("approve = %v, %v", approved, err)
	}

	report := func(evs ...*agentplanev1.RuntimeEvent) error {
		_, err := c.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref, Events: evs})
		return err
	}
	call := func(callID, tool, args string) *agentplanev1.RuntimeEvent {
		return &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_ToolCall{ToolCall: &agentplanev1.ToolCall{CallId: callID, ToolName: tool, ArgumentsJson: args}}}
	}
	result := func(callID string) *agentplanev1.RuntimeEvent {
		return &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_ToolResult{ToolResult: &agentplanev1.ToolResult{CallId: callID}}}
	}
	// The same number rounded through a double is other text: not what was approved.
	if err := report(call("c2", gatedTool, `{"n": 1.2345678901234568e+16}`)); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("rounded args: %v", err)
	}
	if err := report(call("c1", freeTool, big), result("c1"), call("c2", gatedTool, big), result("c2")); err != nil {
		t.Fatal(err)
	}
	if err := report(call("c3", gatedTool, fixed), result("c3")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Runtime.CompleteTask(ctx, &agentplanev1.CompleteTaskRequest{Lease: ref,
		Output: &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "moved")}}); err != nil {
		t.Fatal(err)
	}

	// The log, as a watcher reads it.
	w, err := c.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: id})
	if err != nil {
		t.Fatal(err)
	}
	gatedArgs, ranArgs := map[string]string{}, map[string]string{}
	for {
		r, err := w.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if g := r.GetEvent().GetToolGated(); g != nil {
			gatedArgs[g.GetCallId()] = g.GetArgumentsJson()
		}
		if tc := r.GetEvent().GetToolCall(); tc != nil {
			ranArgs[tc.GetCallId()] = tc.GetArgumentsJson()
		}
	}
	want := map[string]string{"c1": big, "c2": big, "c3": malformed}
	for k, v := range want {
		if gatedArgs[k] != v {
			t.Errorf("ToolGated %s carries %q, want %q", k, gatedArgs[k], v)
		}
	}
	want["c3"] = fixed
	for k, v := range want {
		if ranArgs[k] != v {
			t.Errorf("ToolCall %s carries %q, want %q", k, ranArgs[k], v)
		}
	}
}
