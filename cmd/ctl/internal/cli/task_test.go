package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/servertest"
)

// runCtlIn is runCtl with standard input.
func runCtlIn(t *testing.T, addr, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(append([]string{"--addr", addr}, args...), strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func sampleTask() *agentplanev1.Task {
	return &agentplanev1.Task{
		TaskId: "t-1", State: agentplanev1.TaskState_TASK_STATE_WORKING, Input: client.UserText("summarize"), Attempt: 2,
		Labels:     map[string]string{"team": "billing", "env": "dev"},
		CreateTime: timestamppb.New(time.Now().Add(-90 * time.Second)), CreatedBy: "owner",
		Spec: &agentplanev1.Task_Agent{Agent: &agentplanev1.AgentSpec{Name: proto.String("helper")}},
	}
}

const agentDoc = "apiVersion: qar/v1\nkind: AgentSpec\ninstructions: Be brief.\nmodel: gpt-4.1\n"

func TestTaskStartSendsTheDocument(t *testing.T) {
	f := &fakeCP{task: sampleTask()}
	addr := startFakeCP(t, f)
	agent := writeFile(t, "agent.yaml", agentDoc)
	policy := writeFile(t, "policy.yaml", "allowlist:\n  tools: [send_email]\n  tags:\n    send_email: {tags: [outbound]}\n")

	code, out, errOut := runCtlIn(t, addr, "from stdin\n", "task", "start", "--agent", agent, "--input", "-",
		"--request-id", "r-1", "--label", "team=billing", "--label", "env=dev", "--policy", policy, "--interrupt-timeout", "5m")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	req := requests[*agentplanev1.StartTaskRequest](f)[0]
	if string(req.GetDocument()) != agentDoc || req.GetFormat() != agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML {
		t.Errorf("document %q format %v", req.GetDocument(), req.GetFormat())
	}
	if client.MessageText(req.GetInput()) != "from stdin\n" || req.GetRequestId() != "r-1" || req.GetLabels()["team"] != "billing" || req.GetLabels()["env"] != "dev" {
		t.Errorf("request %v", req)
	}
	if al := req.GetInterruptPolicy().GetAllowlist(); len(al.GetTools()) != 1 || al.GetTags()["send_email"].GetTags()[0] != "outbound" {
		t.Errorf("policy %v", req.GetInterruptPolicy())
	}
	if req.GetInterruptTimeout().AsDuration() != 5*time.Minute {
		t.Errorf("interrupt timeout %v", req.GetInterruptTimeout())
	}
	for _, want := range []string{"t-1", "working", "AgentSpec helper", "env=dev,team=billing"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	code, _, errOut = runCtl(t, addr, "task", "start", "--agent-id", "billing-bot", "--input", "hi", "--request-id", "again")
	if code != 0 || !strings.Contains(errOut, `request id "again" was used before`) {
		t.Fatalf("idempotent retry: exit %d stderr %q", code, errOut)
	}
	if req := requests[*agentplanev1.StartTaskRequest](f)[1]; req.GetAgentId() != "billing-bot" || req.GetDocument() != nil {
		t.Errorf("agent id request %v", req)
	}
}

func TestTaskStartUsageErrors(t *testing.T) {
	agent := writeFile(t, "agent.json", `{"apiVersion": "qar/v1", "kind": "AgentSpec"}`)
	graph := writeFile(t, "graph.yaml", "apiVersion: qar/v1\nkind: GraphSpec\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no spec", []string{"--input", "x"}, "say what runs: --agent FILE, --graph FILE or --agent-id ID"},
		{"two specs", []string{"--agent", agent, "--agent-id", "a"}, "alternatives; give one"},
		{"graph given as agent", []string{"--agent", graph}, "the document is a GraphSpec, not a AgentSpec; use --graph"},
		{"agent given as graph", []string{"--graph", agent}, "use --agent"},
		{"missing file", []string{"--agent", filepath.Join(t.TempDir(), "nope.yaml")}, "no such file"},
		{"bad label", []string{"--agent-id", "a", "--label", "novalue"}, `--label "novalue": want key=value`},
		{"bad policy", []string{"--agent-id", "a", "--policy", writeFile(t, "p.yaml", "allowlist: {tols: [x]}\n")}, "tols"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeCP{task: sampleTask()}
			addr := startFakeCP(t, f)
			code, _, errOut := runCtl(t, addr, append([]string{"task", "start"}, tc.args...)...)
			if code != exitUsage || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, errOut, tc.want)
			}
			if n := len(requests[*agentplanev1.StartTaskRequest](f)); n != 0 {
				t.Fatalf("a usage error reached the server (%d calls)", n)
			}
		})
	}
}

func TestServerErrorsArePrintedWithTheirReason(t *testing.T) {
	f := &fakeCP{err: grpcErrOf(apierr.NotFound(apierr.ReasonTaskNotFound, "task t-9 not found"))}
	addr := startFakeCP(t, f)
	for _, args := range [][]string{
		{"task", "get", "t-9"}, {"task", "cancel", "t-9"}, {"task", "continue", "t-9", "--message", "hi"}, {"task", "list"},
		{"task", "verdicts", "t-9"}, {"task", "obligations", "t-9"}, {"hitl", "show", "i-9"}, {"hitl", "approve", "i-9"},
		{"admin", "stats"}, {"admin", "purge"},
	} {
		code, out, errOut := runCtl(t, addr, args...)
		if code != exitFailed || errOut != "ctl: NotFound (TASK_NOT_FOUND): task t-9 not found\n" || out != "" {
			t.Errorf("%v: exit %d out %q err %q", args, code, out, errOut)
		}
	}
}

func TestTaskGetCancelContinue(t *testing.T) {
	task := sampleTask()
	task.State = agentplanev1.TaskState_TASK_STATE_FAILED
	task.Failure = &agentplanev1.TaskFailure{Reason: "runtime.error", Message: "model unreachable"}
	task.PendingInterruptIds = []string{"i-1"}
	f := &fakeCP{task: task}
	addr := startFakeCP(t, f)

	code, out, _ := runCtl(t, addr, "task", "get", "t-1")
	for _, want := range []string{"failed", "runtime.error: model unreachable", "pending interrupts  i-1", "attempt             2"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("get: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
	code, out, _ = runCtl(t, addr, "task", "get", "t-1", "-o", "json")
	var doc struct{ Task struct{ TaskID string } }
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || doc.Task.TaskID != "t-1" {
		t.Errorf("get -o json: %d %q", code, out)
	}

	if code, _, errOut := runCtl(t, addr, "task", "cancel", "t-1", "--reason", "wrong input"); code != 0 {
		t.Fatalf("cancel: %d %s", code, errOut)
	}
	if r := requests[*agentplanev1.CancelTaskRequest](f)[0]; r.GetTaskId() != "t-1" || r.GetReason() != "wrong input" {
		t.Errorf("cancel request %v", r)
	}
	if code, _, errOut := runCtl(t, addr, "task", "continue", "t-1", "--message", "and then?"); code != 0 {
		t.Fatalf("continue: %d %s", code, errOut)
	}
	if r := requests[*agentplanev1.ContinueTaskRequest](f)[0]; client.MessageText(r.GetMessage()) != "and then?" ||
		r.GetMessage().GetRole() != agentplanev1.MessageRole_MESSAGE_ROLE_USER || len(r.GetMessage().GetParts()) != 1 {
		t.Errorf("continue request %v", r)
	}
	if code, _, errOut := runCtl(t, addr, "task", "continue", "t-1", "--tool-output", `call_1={"n":12345678901234567}`, "--tool-output", `call_2="12:00"`); code != 0 {
		t.Fatalf("continue with tool outputs: %d %s", code, errOut)
	}
	outs := requests[*agentplanev1.ContinueTaskRequest](f)[1].GetToolOutputs().GetOutputs()
	if len(outs) != 2 || outs[0].GetCallId() != "call_1" || outs[0].GetResult().GetStructValue().GetFields()["n"] == nil ||
		outs[1].GetCallId() != "call_2" || outs[1].GetResult().GetStringValue() != "12:00" {
		t.Errorf("tool outputs %v", outs)
	}
	for _, bad := range [][]string{
		{"task", "continue", "t-1"},
		{"task", "continue", "t-1", "--message", "hi", "--tool-output", "c=1"},
		{"task", "continue", "t-1", "--tool-output", "no-equals"},
		{"task", "continue", "t-1", "--tool-output", "c={not json"},
	} {
		if code, _, _ := runCtl(t, addr, bad...); code != exitUsage {
			t.Errorf("%q: exit %d, want a usage error", bad, code)
		}
	}
	if code, _, _ := runCtl(t, addr, "task", "get"); code != exitUsage {
		t.Errorf("get without id: exit %d", code)
	}
}

func TestTaskList(t *testing.T) {
	other := sampleTask()
	other.TaskId, other.State, other.Labels = "t-2", agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED, nil
	f := &fakeCP{taskPages: []*agentplanev1.ListTasksResponse{{Tasks: []*agentplanev1.Task{sampleTask(), other}, NextPageToken: "1"}}}
	addr := startFakeCP(t, f)

	code, out, errOut := runCtl(t, addr, "task", "list", "--state", "working,INPUT-REQUIRED", "--state", "task_state_failed", "--label", "team=billing", "--limit", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !regexp.MustCompile(`^TASK\s+STATE\s+CREATED\s+AGE\s+ATTEMPT\s+LABELS$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^t-1\s+working\s+\S+ \S+\s+1m3\ds\s+2\s+env=dev,team=billing$`).MatchString(lines[1]) ||
		!regexp.MustCompile(`^t-2\s+input_required\s.*\s-$`).MatchString(lines[2]) {
		t.Errorf("table:\n%s", out)
	}
	if errOut != "more: --page-token 1\n" {
		t.Errorf("page hint %q", errOut)
	}
	req := requests[*agentplanev1.ListTasksRequest](f)[0]
	wantStates := []agentplanev1.TaskState{agentplanev1.TaskState_TASK_STATE_WORKING, agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED, agentplanev1.TaskState_TASK_STATE_FAILED}
	if len(req.GetStates()) != 3 || req.GetStates()[0] != wantStates[0] || req.GetStates()[1] != wantStates[1] || req.GetStates()[2] != wantStates[2] ||
		!slices.Contains(req.GetLabelSelector(), "team=billing") || req.GetPageSize() != 2 {
		t.Errorf("request %v", req)
	}

	code, _, errOut = runCtl(t, addr, "task", "list", "--state", "sleeping")
	if code != exitUsage || !strings.Contains(errOut, "want one of canceled, completed, failed, input_required, submitted, working") {
		t.Errorf("bad state: %d %q", code, errOut)
	}
}

func TestTaskVerdictsAndObligationsReadEveryPage(t *testing.T) {
	v := func(id string) *agentplanev1.Verdict {
		return &agentplanev1.Verdict{VerdictId: id, Node: "reviewer", Result: &agentplanev1.VerdictResult{Verdict: "needs_revision", Confidence: proto.Float64(0.7), Rationale: proto.String("cite sources")},
			Raised: []*agentplanev1.Obligation{{ObligationId: "ob-1"}}, DroppedObligationIds: []string{"ob-9"}}
	}
	f := &fakeCP{
		verdicts: []*agentplanev1.ListVerdictsResponse{{Verdicts: []*agentplanev1.Verdict{v("v1")}, NextPageToken: "1"}, {Verdicts: []*agentplanev1.Verdict{v("v2")}}},
		obligations: []*agentplanev1.ListObligationsResponse{{Obligations: []*agentplanev1.Obligation{
			{ObligationId: "ob-1", Text: "cite sources", State: agentplanev1.ObligationState_OBLIGATION_STATE_OPEN, RaisedBy: "reviewer", RaisedInVerdictId: "v1"},
		}}},
	}
	addr := startFakeCP(t, f)
	code, out, _ := runCtl(t, addr, "task", "verdicts", "t-1")
	if code != 0 || !strings.Contains(out, "v1") || !strings.Contains(out, "v2") || !strings.Contains(out, "0.70") || !strings.Contains(out, "ob-9") {
		t.Errorf("verdicts: %d\n%s", code, out)
	}
	code, out, _ = runCtl(t, addr, "task", "obligations", "t-1", "--state", "open")
	if code != 0 || !regexp.MustCompile(`ob-1\s+open\s+reviewer\s+v1\s+-\s+cite sources`).MatchString(out) {
		t.Errorf("obligations: %d\n%s", code, out)
	}
	if r := requests[*agentplanev1.ListObligationsRequest](f)[0]; len(r.GetStates()) != 1 || r.GetStates()[0] != agentplanev1.ObligationState_OBLIGATION_STATE_OPEN {
		t.Errorf("obligations request %v", r)
	}
}

func watchEvents() []*agentplanev1.TaskEvent {
	at := timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	return []*agentplanev1.TaskEvent{
		{Sequence: 1, Time: at, Payload: &agentplanev1.TaskEvent_Submitted{Submitted: &agentplanev1.TaskSubmitted{Kind: "AgentSpec", Input: client.UserText("hi"), CreatedBy: "owner"}}},
		{Sequence: 2, Time: at, Payload: &agentplanev1.TaskEvent_StateChanged{StateChanged: &agentplanev1.StateChanged{FromState: agentplanev1.TaskState_TASK_STATE_SUBMITTED, ToState: agentplanev1.TaskState_TASK_STATE_WORKING}}},
		{Sequence: 3, Time: at, Payload: &agentplanev1.TaskEvent_Message{Message: &agentplanev1.Message{Role: agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, Parts: client.UserText("Hello\nthere").GetParts(), Node: "helper"}}},
		{Sequence: 4, Time: at, Payload: &agentplanev1.TaskEvent_ToolGated{ToolGated: &agentplanev1.ToolGated{CallId: "c1", ToolName: "pay", Outcome: agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT, InterruptId: "i-1", Tags: []string{"money"}, Reason: "policy.allowlist"}}},
		{Sequence: 5, Time: at, Payload: &agentplanev1.TaskEvent_InterruptResolved{InterruptResolved: &agentplanev1.InterruptResolved{InterruptId: "i-1", Decision: &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_REJECT, DecidedBy: "system", Source: agentplanev1.DecisionSource_DECISION_SOURCE_DEADLINE, Reason: proto.String("timed out")}}}},
		{Sequence: 6, Time: at, Payload: &agentplanev1.TaskEvent_StateChanged{StateChanged: &agentplanev1.StateChanged{FromState: agentplanev1.TaskState_TASK_STATE_WORKING, ToState: agentplanev1.TaskState_TASK_STATE_COMPLETED}}},
	}
}

func TestTaskWatchReconnectsWithoutGapOrRepeat(t *testing.T) {
	// The first stream drops after event 2, the second after event 4.
	f := &fakeCP{events: watchEvents(), drops: []int64{2, 4}}
	addr := startFakeCP(t, f)
	code, out, errOut := runCtl(t, addr, "task", "watch", "t-1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var seqs []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		seqs = append(seqs, strings.Fields(line)[0])
	}
	if strings.Join(seqs, ",") != "1,2,3,4,5,6" {
		t.Fatalf("sequences %v:\n%s", seqs, out)
	}
	for _, want := range []string{
		`submitted          AgentSpec by owner: "hi"`,
		"state              submitted -> working",
		"message            assistant helper: Hello there",
		"gate               pay [c1]: interrupt i-1 tags money (policy.allowlist)",
		"decision           i-1: reject by system (deadline): timed out",
		"state              working -> completed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var after []int64
	for _, r := range requests[*agentplanev1.WatchTaskRequest](f) {
		after = append(after, r.GetAfterSequence())
	}
	if len(after) != 3 || after[0] != 0 || after[1] != 2 || after[2] != 4 {
		t.Errorf("watch requests resumed after %v, want [0 2 4]", after)
	}
	if !strings.Contains(errOut, "reconnecting after sequence 2") || !strings.Contains(errOut, "reconnecting after sequence 4") {
		t.Errorf("stderr %q", errOut)
	}
}

func TestTaskWatchJSONLinesFromASequence(t *testing.T) {
	f := &fakeCP{events: watchEvents()}
	addr := startFakeCP(t, f)
	code, out, errOut := runCtl(t, addr, "task", "watch", "t-1", "--after", "3", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("want events 4..6, one per line:\n%s", out)
	}
	for i, line := range lines {
		var ev struct{ Sequence string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Sequence != []string{"4", "5", "6"}[i] {
			t.Errorf("line %d %q: %v", i, line, err)
		}
	}
}

func TestTaskWatchEndsWhenTheTaskAlreadyEnded(t *testing.T) {
	// Watching past the end: the stream ends with nothing; ctl asks and stops.
	task := sampleTask()
	task.State = agentplanev1.TaskState_TASK_STATE_COMPLETED
	f := &fakeCP{events: watchEvents(), watchEOF: true, task: task}
	addr := startFakeCP(t, f)
	code, out, errOut := runCtl(t, addr, "task", "watch", "t-1", "--after", "6")
	if code != 0 || out != "" || errOut != "" {
		t.Fatalf("exit %d out %q err %q", code, out, errOut)
	}
}

func TestTaskWatchGivesUp(t *testing.T) {
	f := &fakeCP{events: watchEvents()[:2], drops: []int64{2, 2, 2, 2}}
	addr := startFakeCP(t, f)
	code, _, errOut := runCtl(t, addr, "task", "watch", "t-1", "--reconnects", "2")
	if code != exitFailed || !strings.Contains(errOut, "giving up after 2 reconnects") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// TestTaskCommandsAgainstTheServer checks what the real server answers today: the
// rendering of its errors and the usage errors that never reach it. Whatever code the
// server returns, ctl must print it as CODE (reason): message and exit 1.
func TestTaskCommandsAgainstTheServer(t *testing.T) {
	in := servertest.Start(t, nil)
	code, _, errOut := runCtl(t, in.GRPCAddr, "task", "get", "t-does-not-exist")
	if code != exitFailed || !regexp.MustCompile(`^ctl: [A-Za-z]+ \([A-Z_]+\): \S.*\n$`).MatchString(errOut) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, args := range [][]string{
		{"task", "list", "--state", "bogus"},
		{"task", "start", "--input", "no spec"},
		{"hitl", "reject", "i-1"},
		{"hitl", "edit", "i-1", "--args", "{not json"},
		{"runtime", "run", "--script", filepath.Join(t.TempDir(), "missing.yaml")},
	} {
		if code, _, errOut := runCtl(t, in.GRPCAddr, args...); code != exitUsage {
			t.Errorf("%v: exit %d (%s), want 2", args, code, errOut)
		}
	}
}

func TestTaskViewFlag(t *testing.T) {
	basic := sampleTask()
	basic.Spec, basic.SpecKind = nil, "GraphSpec"
	basic.EffectiveMcpServers = []*agentplanev1.McpServerInfo{{Name: "ops", Url: "https://mcp.example.com/sse", HeaderNames: []string{"Authorization"}}}
	f := &fakeCP{task: basic, taskPages: []*agentplanev1.ListTasksResponse{{Tasks: []*agentplanev1.Task{basic}}}}
	addr := startFakeCP(t, f)

	code, out, errOut := runCtl(t, addr, "task", "get", "t-1")
	if code != 0 || !regexp.MustCompile(`(?m)^spec\s+GraphSpec$`).MatchString(out) ||
		!strings.Contains(out, "mcp ops https://mcp.example.com/sse (headers: Authorization)") {
		t.Errorf("get of a basic task: exit %d %s\n%s", code, errOut, out)
	}
	for _, args := range [][]string{
		{"task", "get", "t-1", "--view", "basic"},
		{"task", "list", "--view", "FULL"},
		{"task", "start", "--agent-id", "a", "--view", "task_view_full"},
	} {
		if code, _, errOut := runCtl(t, addr, args...); code != 0 {
			t.Fatalf("%v: exit %d %s", args, code, errOut)
		}
	}
	gets := requests[*agentplanev1.GetTaskRequest](f)
	lists := requests[*agentplanev1.ListTasksRequest](f)
	starts := requests[*agentplanev1.StartTaskRequest](f)
	if gets[0].GetView() != agentplanev1.TaskView_TASK_VIEW_UNSPECIFIED || gets[1].GetView() != agentplanev1.TaskView_TASK_VIEW_BASIC ||
		lists[0].GetView() != agentplanev1.TaskView_TASK_VIEW_FULL || starts[0].GetView() != agentplanev1.TaskView_TASK_VIEW_FULL {
		t.Errorf("views sent: get %v %v, list %v, start %v", gets[0].GetView(), gets[1].GetView(), lists[0].GetView(), starts[0].GetView())
	}
	for _, args := range [][]string{{"task", "get", "t-1", "--view", "huge"}, {"task", "list", "--view", "huge"}, {"task", "start", "--agent-id", "a", "--view", "huge"}} {
		if code, _, errOut := runCtl(t, addr, args...); code != exitUsage || !strings.Contains(errOut, `--view "huge": want one of basic, full`) {
			t.Errorf("%v: exit %d %q", args, code, errOut)
		}
	}
}

// refusalEvents: a rejected call reported with its refusal, then an edited call.
func refusalEvents() []*agentplanev1.TaskEvent {
	at := timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	reject := &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_REJECT, DecidedBy: "ann", CallId: "c1",
		Source: agentplanev1.DecisionSource_DECISION_SOURCE_HUMAN, Reason: proto.String("wrong customer")}
	edit := &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_EDIT, DecidedBy: "ann", CallId: "c2",
		Source: agentplanev1.DecisionSource_DECISION_SOURCE_HUMAN, ArgumentsJson: `{"amount": 15, "to": "b"}`}
	evs := []*agentplanev1.TaskEvent{
		{Payload: &agentplanev1.TaskEvent_InterruptResolved{InterruptResolved: &agentplanev1.InterruptResolved{InterruptId: "i-1", Decision: reject}}},
		{Payload: &agentplanev1.TaskEvent_ToolCall{ToolCall: &agentplanev1.ToolCall{CallId: "c1", ToolName: "pay", ArgumentsJson: `{"amount": 30}`}}},
		{Payload: &agentplanev1.TaskEvent_ToolResult{ToolResult: &agentplanev1.ToolResult{CallId: "c1", ToolName: "pay", Result: structpb.NewStringValue("rejected: wrong customer"), IsError: true}}},
		{Payload: &agentplanev1.TaskEvent_InterruptResolved{InterruptResolved: &agentplanev1.InterruptResolved{InterruptId: "i-2", Decision: edit}}},
		{Payload: &agentplanev1.TaskEvent_ToolCall{ToolCall: &agentplanev1.ToolCall{CallId: "c2", ToolName: "pay", ArgumentsJson: `{"amount": 15, "to": "b"}`}}},
		{Payload: &agentplanev1.TaskEvent_StateChanged{StateChanged: &agentplanev1.StateChanged{FromState: agentplanev1.TaskState_TASK_STATE_WORKING, ToState: agentplanev1.TaskState_TASK_STATE_COMPLETED}}},
	}
	for i, ev := range evs {
		ev.Sequence, ev.Time = int64(i+1), at
	}
	return evs
}

func TestTaskWatchSaysWhatRunsAndWhatWasRefused(t *testing.T) {
	f := &fakeCP{events: refusalEvents()}
	addr := startFakeCP(t, f)
	code, out, errOut := runCtl(t, addr, "task", "watch", "t-1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"decision           i-1: reject by ann: wrong customer",
		`refused            pay [c1] did not run: rejected by ann: wrong customer; args {"amount":30}`,
		`refusal            pay [c1]: the model is told "rejected: wrong customer"`,
		`decision           i-2: edit by ann; runs with {"amount":15,"to":"b"}`,
		`tool call          pay [c2] {"amount":15,"to":"b"}`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "tool call          pay [c1]") || strings.Contains(out, "tool result") {
		t.Errorf("the refused call reads as run:\n%s", out)
	}

	// Watching from after the decision: the rejection is learnt from the task's resolved approvals.
	f = &fakeCP{events: refusalEvents(), inbox: &agentplanev1.ListInterruptsResponse{Interrupts: []*agentplanev1.Interrupt{{
		InterruptId: "i-1", State: agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED, Decision: refusalEvents()[0].GetInterruptResolved().GetDecision()}}}}
	addr = startFakeCP(t, f)
	if code, out, errOut = runCtl(t, addr, "task", "watch", "t-1", "--after", "1"); code != 0 || !strings.Contains(out, "refused            pay [c1] did not run: rejected by ann") {
		t.Errorf("--after 1: exit %d %s\n%s", code, errOut, out)
	}
	if r := requests[*agentplanev1.ListInterruptsRequest](f); len(r) != 1 || r[0].GetTaskId() != "t-1" || len(r[0].GetStates()) != 1 ||
		r[0].GetStates()[0] != agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED {
		t.Errorf("seed requests %v", r)
	}
}
