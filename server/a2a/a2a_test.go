package a2a_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client/worker"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

const helloScript = `
steps:
  - say: "Hello! You asked: {{input}}"
  - complete: {text: "It is 21°C and clear in Paris.", structured: {city: Paris, temp_c: 21}}
`

// The approval tour: a call waiting for a person, then a chat turn end.
const approvalScript = `
node: support
steps:
  - say: "Looking up order 42."
  - tool:
      name: send_email
      description: Send an email to the customer
      args: {to: customer@example.com}
      result: {sent: true}
  - pause: "The email is sent. Anything else?"
  - say: "You said: {{continue}}"
  - complete: "Done."
`

var gateSendEmail = map[string]any{"agentplane.interruptPolicy": map[string]any{"allowlist": map[string]any{"tools": []string{"send_email"}}}}

func getCard(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var card map[string]any
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &card)
	return resp.StatusCode, card
}

// TestA2ACardsAreTrue: a card per static agent, the default one at the well-known
// path; capabilities and security schemes say exactly what works.
func TestA2ACardsAreTrue(t *testing.T) {
	f := startFace(t, nil, nil)
	code, def := getCard(t, f.base+"/.well-known/agent-card.json")
	if code != 200 || def["name"] != "helpdesk" || def["description"] != "Answers customers." {
		t.Fatalf("default card: %d %v", code, def)
	}
	code, calc := getCard(t, f.base+"/a2a/calculator/.well-known/agent-card.json")
	if code != 200 || calc["name"] != "calculator" {
		t.Fatalf("calculator card: %d %v", code, calc)
	}
	ifaces := calc["supportedInterfaces"].([]any)
	want := []string{"JSONRPC 1.0 " + f.base + "/a2a/calculator", "HTTP+JSON 1.0 " + f.base + "/a2a/calculator/rest", "JSONRPC 0.3 " + f.base + "/a2a/calculator"}
	for i, w := range want {
		in := ifaces[i].(map[string]any)
		if got := in["protocolBinding"].(string) + " " + in["protocolVersion"].(string) + " " + in["url"].(string); got != w {
			t.Errorf("interface %d = %q, want %q", i, got, w)
		}
	}
	caps := calc["capabilities"].(map[string]any)
	if caps["streaming"] != true || caps["pushNotifications"] != true || caps["extendedAgentCard"] != false {
		t.Errorf("single-user capabilities: %v", caps)
	}
	if _, ok := calc["securitySchemes"]; ok {
		t.Errorf("single-user card names security schemes: %v", calc["securitySchemes"])
	}
	if calc["url"] != f.base+"/a2a/calculator" || calc["preferredTransport"] != "JSONRPC" || calc["protocolVersion"] != "0.3.0" {
		t.Errorf("0.3 fields: %v %v %v", calc["url"], calc["preferredTransport"], calc["protocolVersion"])
	}
	if code, _ := getCard(t, f.base+"/a2a/nobody/.well-known/agent-card.json"); code != 404 {
		t.Errorf("unknown agent's card: %d", code)
	}
	// What the card says is unsupported is refused the way the spec says.
	if r := f.rpc(t, "calculator", "", "GetExtendedAgentCard", nil); r.code() != -32004 {
		t.Errorf("extended card without authentication: %+v", r.Error)
	}
	if r := f.rpc(t, "calculator", "", "CreateTaskPushNotificationConfig", map[string]any{"taskId": "x", "url": "https://example.com/hook"}); r.code() != -32001 {
		t.Errorf("push config of a missing task: %+v", r.Error)
	}
	off := startFace(t, nil, func(c *config.Config) { c.A2A.DisablePush = true })
	if _, card := getCard(t, off.base+"/.well-known/agent-card.json"); card["capabilities"].(map[string]any)["pushNotifications"] != false {
		t.Errorf("push advertised while off")
	}
	if r := off.rpc(t, "calculator", "", "CreateTaskPushNotificationConfig", map[string]any{"taskId": "x", "url": "https://example.com/hook"}); r.code() != -32003 {
		t.Errorf("push config while off: %+v", r.Error)
	}

	mt := startFace(t, []string{"acme"}, nil)
	_, card := getCard(t, mt.base+"/.well-known/agent-card.json")
	schemes, _ := card["securitySchemes"].(map[string]any)
	bearer, _ := schemes["bearer"].(map[string]any)
	if bearer["httpAuthSecurityScheme"].(map[string]any)["scheme"] != "Bearer" || bearer["type"] != "http" {
		t.Errorf("multi-tenant bearer scheme: %v", schemes)
	}
	if _, ok := schemes["mtls"]; ok {
		t.Errorf("mtls advertised without client certificates: %v", schemes)
	}
	if card["capabilities"].(map[string]any)["extendedAgentCard"] != true {
		t.Errorf("multi-tenant card: extended card not advertised")
	}
	if r := mt.rpc(t, "calculator", "", "GetExtendedAgentCard", nil); r.Status != 401 {
		t.Errorf("extended card without a token: %d %+v", r.Status, r.Error)
	}
	r := mt.rpc(t, "calculator", mt.tokens["acme-user"], "GetExtendedAgentCard", nil)
	if r.Error != nil || !strings.Contains(string(r.Result), "urn:agentplane:a2a:client-tools:v1") || !strings.Contains(string(r.Result), `"add"`) {
		t.Errorf("extended card: %s %+v", r.Result, r.Error)
	}
}

// TestA2ASendMessageIsIdempotent: a retried SendMessage with the same messageId starts
// nothing new, the task is an agentplane task, and its output becomes artifacts.
func TestA2ASendMessageIsIdempotent(t *testing.T) {
	f := startFace(t, nil, nil)
	f.runtime(t, "helpdesk", "", scriptRunner(t, helloScript))
	send := map[string]any{"message": userMessage("m-1", "weather in Paris?")}
	first := mustTask(t, f.rpc(t, "helpdesk", "", "SendMessage", send), true)
	if first.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("blocking send returned %s", first.Status.State)
	}
	again := mustTask(t, f.rpc(t, "helpdesk", "", "SendMessage", send), true)
	if again.ID != first.ID || again.ContextID != first.ContextID {
		t.Fatalf("retry: task %s/%s, first %s/%s", again.ID, again.ContextID, first.ID, first.ContextID)
	}
	list := f.rpc(t, "helpdesk", "", "ListTasks", map[string]any{})
	var l struct {
		Tasks []a2aTask `json:"tasks"`
	}
	_ = json.Unmarshal(list.Result, &l)
	if len(l.Tasks) != 1 || l.Tasks[0].ID != first.ID || l.Tasks[0].Artifacts != nil {
		t.Fatalf("list: %s", list.Result)
	}
	// The same message id with other content is not a retry.
	other := f.rpc(t, "helpdesk", "", "SendMessage", map[string]any{"message": userMessage("m-1", "something else")})
	if other.code() != -32602 {
		t.Fatalf("reused messageId with other content: %+v", other.Error)
	}
	// The A2A task is the agentplane task.
	got, err := f.in.Client.Tasks.GetTask(context.Background(), &agentplanev1.GetTaskRequest{TaskId: first.ID})
	if err != nil || got.GetTask().GetAgentId() != "helpdesk" || got.GetTask().GetQueue() != "helpdesk" {
		t.Fatalf("agentplane task: %v %v", got, err)
	}
	var arts []string
	for _, a := range first.Artifacts {
		b, _ := json.Marshal(a.Parts)
		arts = append(arts, a.ArtifactID+"="+string(b))
	}
	if len(arts) != 2 || !strings.Contains(arts[0], "Paris") || !strings.Contains(arts[1], `"temp_c":21`) {
		t.Fatalf("artifacts: %v", arts)
	}
	hist := mustTask(t, f.rpc(t, "helpdesk", "", "GetTask", map[string]any{"id": first.ID, "historyLength": 10}), false)
	if len(hist.History) != 2 || hist.History[0]["role"] != "ROLE_USER" || hist.History[1]["role"] != "ROLE_AGENT" {
		t.Fatalf("history: %v", hist.History)
	}
	// A new message in the same context is a new task of that conversation.
	next := mustTask(t, f.rpc(t, "helpdesk", "", "SendMessage", map[string]any{"message": map[string]any{
		"messageId": "m-2", "role": "ROLE_USER", "contextId": first.ContextID, "parts": []any{map[string]any{"text": "and Rome?"}}}}), true)
	if next.ID == first.ID || next.ContextID != first.ContextID {
		t.Fatalf("same context: %s/%s", next.ID, next.ContextID)
	}
	byCtx := f.rpc(t, "helpdesk", "", "ListTasks", map[string]any{"contextId": first.ContextID})
	if n := strings.Count(string(byCtx.Result), `"id":`); n != 2 {
		t.Fatalf("tasks of the context: %s", byCtx.Result)
	}
	// An ended task cannot be canceled; an unknown one is not found.
	if r := f.rpc(t, "helpdesk", "", "CancelTask", map[string]any{"id": first.ID}); r.code() != -32002 {
		t.Fatalf("cancel of a completed task: %+v", r.Error)
	}
	if r := f.rpc(t, "helpdesk", "", "SubscribeToTask", map[string]any{"id": first.ID}); r.code() != -32004 {
		t.Fatalf("subscribe to a completed task: %+v", r.Error)
	}
	// A terminal task takes no more messages.
	late := f.rpc(t, "helpdesk", "", "SendMessage", map[string]any{"message": map[string]any{
		"messageId": "m-3", "role": "ROLE_USER", "taskId": first.ID, "parts": []any{map[string]any{"text": "more"}}}})
	if late.code() != -32004 {
		t.Fatalf("message to a completed task: %+v", late.Error)
	}
}

// TestA2AApprovalIsWorkingNotInputRequired: a call waiting for a person is working
// with a status message saying so; the chat turn end is input-required, and a message
// naming the task continues it.
func TestA2AApprovalIsWorkingNotInputRequired(t *testing.T) {
	f := startFace(t, nil, nil)
	f.runtime(t, "helpdesk", "", scriptRunner(t, approvalScript))
	first := mustTask(t, f.rpc(t, "helpdesk", "", "SendMessage", map[string]any{"message": userMessage("a-1", "email me"),
		"metadata": gateSendEmail, "configuration": map[string]any{"returnImmediately": true}}), true)
	waiting := f.waitTask(t, "helpdesk", "", first.ID, func(a a2aTask) bool { return strings.Contains(a.statusText(), "approve") })
	if waiting.Status.State != "TASK_STATE_WORKING" || !strings.Contains(waiting.statusText(), "send_email") {
		t.Fatalf("waiting for approval: %s %q", waiting.Status.State, waiting.statusText())
	}
	ap, _ := f.in.Client.Tasks.GetTask(context.Background(), &agentplanev1.GetTaskRequest{TaskId: first.ID})
	if ap.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED {
		t.Fatalf("agentplane state %s: the test does not test the mapping", ap.GetTask().GetState())
	}
	// A message to a task that waits for a person, not for the caller, is refused.
	if r := f.rpc(t, "helpdesk", "", "SendMessage", map[string]any{"message": map[string]any{"messageId": "a-x", "role": "ROLE_USER",
		"taskId": first.ID, "parts": []any{map[string]any{"text": "hurry"}}}}); r.code() != -32004 {
		t.Fatalf("message while waiting for approval: %+v", r.Error)
	}
	approve(t, f, "", first.ID)
	paused := f.waitTask(t, "helpdesk", "", first.ID, func(a a2aTask) bool { return a.Status.State == "TASK_STATE_INPUT_REQUIRED" })
	if !strings.Contains(paused.statusText(), "turn ended") {
		t.Fatalf("turn end status: %q", paused.statusText())
	}
	if r := f.rpc(t, "helpdesk", "", "SendMessage", map[string]any{"message": map[string]any{"messageId": "a-2", "role": "ROLE_USER",
		"taskId": first.ID, "contextId": "someone-elses", "parts": []any{map[string]any{"text": "thanks"}}}}); r.code() != -32602 {
		t.Fatalf("mismatched contextId: %+v", r.Error)
	}
	done := mustTask(t, f.rpc(t, "helpdesk", "", "SendMessage", map[string]any{"message": map[string]any{"messageId": "a-2", "role": "ROLE_USER",
		"taskId": first.ID, "parts": []any{map[string]any{"text": "thanks"}}}}), true)
	if done.ID != first.ID || done.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("continued: %s %s", done.ID, done.Status.State)
	}
	list := f.rpc(t, "helpdesk", "", "ListTasks", map[string]any{"status": "TASK_STATE_WORKING"})
	if strings.Contains(string(list.Result), first.ID) {
		t.Fatalf("completed task listed as working: %s", list.Result)
	}
}

// TestA2AClientToolsAreInputRequired: pending client function tools are
// input-required with the calls; a message of data parts answers them.
func TestA2AClientToolsAreInputRequired(t *testing.T) {
	f := startFace(t, nil, nil)
	f.runtime(t, "calc", "", worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) error {
		if res := tk.ContinueToolResults(); len(res) > 0 {
			b, _ := json.Marshal(res[0].GetResult().AsInterface())
			return tk.Complete(ctx, &agentplanev1.TaskOutput{Message: &agentplanev1.Message{Role: agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT,
				Parts: []*agentplanev1.Part{{Kind: &agentplanev1.Part_Text{Text: "sum=" + string(b)}}}}})
		}
		g, err := tk.ToolCall(ctx, worker.Call{ID: "call-1", Name: "add", Node: "calculator", ArgumentsJSON: `{"a":2,"b":3}`})
		if err != nil {
			return err
		}
		_, err = tk.WaitForToolOutputs(ctx, "calculator", g)
		return err
	}))
	got := mustTask(t, f.rpc(t, "calculator", "", "SendMessage", map[string]any{"message": userMessage("c-1", "2+3")}), true)
	if got.Status.State != "TASK_STATE_INPUT_REQUIRED" || !strings.Contains(string(mustJSON(got.Status.Message)), `"callId":"call-1"`) {
		t.Fatalf("pending tool: %s %s", got.Status.State, mustJSON(got.Status.Message))
	}
	done := mustTask(t, f.rpc(t, "calculator", "", "SendMessage", map[string]any{"message": map[string]any{"messageId": "c-2", "role": "ROLE_USER",
		"taskId": got.ID, "parts": []any{map[string]any{"data": map[string]any{"callId": "call-1", "result": 5}}}}}), true)
	if done.Status.State != "TASK_STATE_COMPLETED" || !strings.Contains(string(mustJSON(done.Artifacts)), "sum=5") {
		t.Fatalf("answered: %s %s", done.Status.State, mustJSON(done.Artifacts))
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestA2ATenants: the tenant comes from the credentials, and nothing of another
// tenant's task is visible: not through GetTask, ListTasks, CancelTask, a message
// naming it or SubscribeToTask, all of which answer as for a task that does not exist.
func TestA2ATenants(t *testing.T) {
	f := startFace(t, []string{"acme", "globex"}, nil)
	f.runtime(t, "helpdesk", f.tokens["acme-runtime"], scriptRunner(t, approvalScript))
	acme, globex := f.tokens["acme-user"], f.tokens["globex-user"]
	if r := f.rpc(t, "helpdesk", "", "SendMessage", map[string]any{"message": userMessage("t-0", "hi")}); r.Status != 401 || r.code() != -32000 {
		t.Fatalf("no credentials: %d %+v", r.Status, r.Error)
	}
	mine := mustTask(t, f.rpc(t, "helpdesk", acme, "SendMessage", map[string]any{"message": userMessage("t-1", "hi"),
		"configuration": map[string]any{"returnImmediately": true}}), true)
	absent := "task-does-not-exist"
	for _, probe := range []struct {
		method string
		params func(id string) any
	}{
		{"GetTask", func(id string) any { return map[string]any{"id": id} }},
		{"CancelTask", func(id string) any { return map[string]any{"id": id} }},
		{"SubscribeToTask", func(id string) any { return map[string]any{"id": id} }},
		{"ListTaskPushNotificationConfigs", func(id string) any { return map[string]any{"taskId": id} }},
		{"CreateTaskPushNotificationConfig", func(id string) any { return map[string]any{"taskId": id, "url": "https://example.com/hook"} }},
		{"SendMessage", func(id string) any {
			return map[string]any{"message": map[string]any{"messageId": "t-" + id, "role": "ROLE_USER", "taskId": id, "parts": []any{map[string]any{"text": "x"}}}}
		}},
	} {
		foreign := f.rpc(t, "helpdesk", globex, probe.method, probe.params(mine.ID))
		missing := f.rpc(t, "helpdesk", globex, probe.method, probe.params(absent))
		if foreign.code() != -32001 || missing.code() != -32001 || foreign.Error.Message != missing.Error.Message {
			t.Errorf("%s: foreign %+v, absent %+v", probe.method, foreign.Error, missing.Error)
		}
	}
	// Another agent's endpoint does not show it either.
	if r := f.rpc(t, "calculator", acme, "GetTask", map[string]any{"id": mine.ID}); r.code() != -32001 {
		t.Errorf("through another agent: %+v", r.Error)
	}
	if r := f.rpc(t, "helpdesk", globex, "ListTasks", map[string]any{}); strings.Contains(string(r.Result), mine.ID) || r.Error != nil {
		t.Errorf("globex lists: %s %+v", r.Result, r.Error)
	}
	if r := f.rpc(t, "helpdesk", acme, "ListTasks", map[string]any{}); !strings.Contains(string(r.Result), mine.ID) {
		t.Errorf("acme does not list its own task: %s", r.Result)
	}
	// The same messageId from another tenant is its own task.
	theirs := mustTask(t, f.rpc(t, "helpdesk", globex, "SendMessage", map[string]any{"message": userMessage("t-1", "hi"),
		"configuration": map[string]any{"returnImmediately": true}}), true)
	if theirs.ID == mine.ID {
		t.Fatalf("two tenants share a task")
	}
	// The approver of a tenant cannot start tasks (roles are the API's).
	if r := f.rpc(t, "helpdesk", f.tokens["acme-approver"], "SendMessage", map[string]any{"message": userMessage("t-9", "hi")}); r.Status != 403 {
		t.Errorf("approver starts a task: %d %+v", r.Status, r.Error)
	}
}

// TestA2ASubscribeResumesWithoutGaps: a stream dropped mid-task and resumed with
// Last-Event-ID misses no event of the log and repeats none.
func TestA2ASubscribeResumesWithoutGaps(t *testing.T) {
	f := startFace(t, nil, nil)
	f.runtime(t, "helpdesk", "", scriptRunner(t, approvalScript))
	first := mustTask(t, f.rpc(t, "helpdesk", "", "SendMessage", map[string]any{"message": userMessage("r-1", "email me"),
		"metadata": gateSendEmail, "configuration": map[string]any{"returnImmediately": true}}), true)

	// Stream 1: read until the approval wait, then drop it.
	ctx1, drop := context.WithCancel(context.Background())
	ev1, resp1 := f.openStream(t, ctx1, "/a2a/helpdesk", "", rpcBody("SubscribeToTask", map[string]any{"id": first.ID}), map[string]string{"A2A-Version": "1.0"})
	if resp1.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", resp1.Header.Get("Content-Type"))
	}
	var seen []string
	var lastID string
	for ev := range ev1 {
		res := streamResult(t, ev)
		if _, ok := res["task"]; ok && len(seen) == 0 {
			seen = append(seen, "task")
			lastID = ev.ID
			continue
		}
		if ev.ID != "" {
			lastID = ev.ID
		}
		seen = append(seen, ev.ID+":"+keys(res))
		if strings.Contains(string(res["statusUpdate"]), "approve") {
			break
		}
	}
	drop()
	if lastID == "" {
		t.Fatalf("no event id on stream 1: %v", seen)
	}
	approve(t, f, "", first.ID)
	f.waitTask(t, "helpdesk", "", first.ID, func(a a2aTask) bool { return a.Status.State == "TASK_STATE_INPUT_REQUIRED" })

	// Stream 2 resumes after the last event it saw.
	ev2, _ := f.openStream(t, context.Background(), "/a2a/helpdesk", "", rpcBody("SubscribeToTask", map[string]any{"id": first.ID}),
		map[string]string{"A2A-Version": "1.0", "Last-Event-ID": lastID})
	var resumed []string
	for ev := range ev2 {
		res := streamResult(t, ev)
		if _, ok := res["task"]; ok && len(resumed) == 0 {
			resumed = append(resumed, "task")
			continue
		}
		resumed = append(resumed, ev.ID+":"+keys(res))
	}
	// The reference: the whole log replayed in one stream.
	ev3, _ := f.openStream(t, context.Background(), "/a2a/helpdesk", "", rpcBody("SubscribeToTask", map[string]any{"id": first.ID}),
		map[string]string{"A2A-Version": "1.0", "Last-Event-ID": "1"})
	var all []string
	for ev := range ev3 {
		res := streamResult(t, ev)
		if _, ok := res["task"]; ok && len(all) == 0 {
			continue
		}
		all = append(all, ev.ID+":"+keys(res))
	}
	n, _ := strconv.Atoi(lastID)
	var want []string
	for _, e := range all {
		id, _, _ := strings.Cut(e, ":")
		if k, err := strconv.Atoi(id); err != nil || k > n {
			want = append(want, e)
		}
	}
	got := resumed[1:]
	if strings.Join(got, " ") != strings.Join(want, " ") || len(got) == 0 {
		t.Fatalf("resumed after %s:\n got %v\nwant %v\n(stream 1: %v; all: %v)", lastID, got, want, seen, all)
	}
	if !strings.HasSuffix(got[len(got)-1], "statusUpdate") {
		t.Fatalf("stream did not end on the input-required status: %v", got)
	}
}

func keys(m map[string]json.RawMessage) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return strings.Join(ks, ",")
}

// TestA2AStreamingDeltasAreArtifactChunks: a message the runtime streams arrives as
// chunks of one artifact, then the output as the output artifact, then the final
// status, in the order they happened; over the HTTP+JSON binding too.
func TestA2AStreamingDeltasAreArtifactChunks(t *testing.T) {
	f := startFace(t, nil, nil)
	release := make(chan struct{})
	f.runtime(t, "calc", "", worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) error {
		select { // until a watcher is there, since deltas reach live watchers only
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		for _, d := range []string{"The sum ", "is ", "5."} {
			if _, err := tk.PublishDeltas(ctx, &agentplanev1.MessageDelta{MessageId: "msg-a", TextDelta: d}); err != nil {
				return err
			}
		}
		return tk.Complete(ctx, &agentplanev1.TaskOutput{Message: &agentplanev1.Message{MessageId: "msg-a", Role: agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT,
			Parts: []*agentplanev1.Part{{Kind: &agentplanev1.Part_Text{Text: "The sum is 5."}}}}})
	}))
	body, _ := json.Marshal(map[string]any{"message": userMessage("s-1", "2+3")})
	ev, resp := f.openStream(t, context.Background(), "/a2a/calculator/rest/message:stream", "", body, map[string]string{"A2A-Version": "1.0"})
	if resp.StatusCode != 200 {
		t.Fatalf("REST stream: %d", resp.StatusCode)
	}
	var got []string
	for e := range ev {
		var res map[string]json.RawMessage
		if err := json.Unmarshal([]byte(e.Data), &res); err != nil {
			t.Fatal(err)
		}
		switch {
		case res["task"] != nil:
			got = append(got, "task")
			close(release)
		case res["artifactUpdate"] != nil:
			var u struct {
				Artifact struct {
					ArtifactID string `json:"artifactId"`
					Parts      []struct {
						Text string `json:"text"`
					} `json:"parts"`
				} `json:"artifact"`
				Append    bool `json:"append"`
				LastChunk bool `json:"lastChunk"`
			}
			_ = json.Unmarshal(res["artifactUpdate"], &u)
			got = append(got, u.Artifact.ArtifactID+"("+u.Artifact.Parts[0].Text+","+strconv.FormatBool(u.Append)+","+strconv.FormatBool(u.LastChunk)+")")
		case res["statusUpdate"] != nil:
			var u struct {
				Status struct {
					State string `json:"state"`
				} `json:"status"`
			}
			_ = json.Unmarshal(res["statusUpdate"], &u)
			got = append(got, u.Status.State)
		}
	}
	want := "task TASK_STATE_WORKING draft-msg-a(The sum ,false,false) draft-msg-a(is ,true,false) draft-msg-a(5.,true,false) output(The sum is 5.,false,true) TASK_STATE_COMPLETED"
	if strings.Join(got, " ") != want {
		t.Fatalf("stream:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}

// TestA2AHostileInput: what is not a well-formed A2A request is refused with the
// error the spec names, before anything runs, and a body over the limit is not read.
func TestA2AHostileInput(t *testing.T) {
	f := startFace(t, nil, func(c *config.Config) { c.Limits.MaxSpecBytes = 32 << 10 })
	for _, c := range []struct {
		name string
		body string
		hdr  map[string]string
		code int
		http int
	}{
		{"not JSON", `{"jsonrpc": "2.0", "id": 1, "method": `, nil, -32700, 200},
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}} {}`, nil, -32700, 200},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]`, nil, -32600, 200},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"GetTask","params":{}}`, nil, -32600, 200},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"GetTask","params":{}}`, nil, -32600, 200},
		{"no id", `{"jsonrpc":"2.0","method":"GetTask","params":{}}`, nil, -32600, 200},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"tasks/delete","params":{}}`, nil, -32601, 200},
		{"params array", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[1]}`, nil, -32602, 200},
		{"params wrong type", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":5}}`, nil, -32602, 200},
		{"no message", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}`, nil, -32602, 200},
		{"no messageId", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","parts":[{"text":"x"}]}}}`, nil, -32602, 200},
		{"no parts", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[]}}}`, nil, -32602, 200},
		{"two contents in a part", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x","url":"https://e"}]}}}`, nil, -32602, 200},
		{"agent role", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"x"}]}}}`, nil, -32602, 200},
		{"tenant path", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"tenant":"globex","message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}}`, nil, -32602, 200},
		{"push to the metadata address", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"taskPushNotificationConfig":{"url":"http://169.254.169.254/"}}}}`, nil, -32602, 200},
		{"push to loopback", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"taskPushNotificationConfig":{"url":"http://127.0.0.1:1/hook"}}}}`, nil, -32602, 200},
		{"push with a header injection", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"taskPushNotificationConfig":{"url":"https://example.com/","authentication":{"scheme":"Bearer","credentials":"a\r\nX-Evil: 1"}}}}}`, nil, -32602, 200},
		{"output modes", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"acceptedOutputModes":["image/png"]}}}`, nil, -32005, 200},
		{"long messageId", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"` + strings.Repeat("m", 200) + `","role":"ROLE_USER","parts":[{"text":"x"}]}}}`, nil, -32602, 200},
		{"unsupported version", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`, map[string]string{"A2A-Version": "2.0"}, -32009, 200},
		{"negative history", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":0}}`, nil, -32602, 200},
		{"huge body", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"` + strings.Repeat("x", 200<<10) + `"}]}}}`, nil, -32600, 413},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := f.post(t, "/a2a/helpdesk", "", []byte(c.body), c.hdr)
			if r.code() != c.code || r.Status != c.http {
				t.Fatalf("got HTTP %d code %d (%+v), want HTTP %d code %d", r.Status, r.code(), r.Error, c.http, c.code)
			}
		})
	}
	// Nothing above started a task.
	if l, _ := f.in.Client.Tasks.ListTasks(context.Background(), &agentplanev1.ListTasksRequest{}); len(l.GetTasks()) != 0 {
		t.Fatalf("hostile input started %d tasks", len(l.GetTasks()))
	}
	for _, c := range []struct {
		method, path, ctype string
		want                int
	}{
		{http.MethodGet, "/a2a/helpdesk", "", 405},
		{http.MethodPost, "/a2a/helpdesk/rest/message:send", "text/plain", 415},
		{http.MethodPost, "/a2a/helpdesk/rest/message:send", "application/a2a+json", 400},
		{http.MethodGet, "/a2a/helpdesk/rest/tasks/x", "", 404},
		{http.MethodDelete, "/a2a/helpdesk/rest/tasks/x", "", 404},
		{http.MethodPost, "/a2a/nobody", "application/json", 404},
	} {
		var body io.Reader
		if c.method == http.MethodPost {
			body = strings.NewReader(`{"message":{}}`)
		}
		req, _ := http.NewRequest(c.method, f.base+c.path, body)
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		req.Header.Set("A2A-Version", "1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s (%s): %d, want %d", c.method, c.path, c.ctype, resp.StatusCode, c.want)
		}
	}
}

// TestA2AStreamLimit: a2a.max_streams bounds the open streams; one over is refused
// (429, RESOURCE_EXHAUSTED) and the place comes back when a stream ends.
func TestA2AStreamLimit(t *testing.T) {
	f := startFace(t, nil, func(c *config.Config) { c.A2A.MaxStreams = 1 })
	f.runtime(t, "helpdesk", "", scriptRunner(t, approvalScript))
	tk := mustTask(t, f.rpc(t, "helpdesk", "", "SendMessage", map[string]any{"message": userMessage("l-1", "x"), "metadata": gateSendEmail,
		"configuration": map[string]any{"returnImmediately": true}}), true)
	ctx, cancel := context.WithCancel(context.Background())
	ev, _ := f.openStream(t, ctx, "/a2a/helpdesk", "", rpcBody("SubscribeToTask", map[string]any{"id": tk.ID}), nil)
	<-ev // the stream is open
	second := f.post(t, "/a2a/helpdesk", "", rpcBody("SubscribeToTask", map[string]any{"id": tk.ID}), nil)
	if second.Status != 429 || second.code() != -32000 {
		t.Fatalf("second stream: %d %+v", second.Status, second.Error)
	}
	cancel()
	for range ev {
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx2, cancel2 := context.WithCancel(context.Background())
		ev2, resp := f.openStream(t, ctx2, "/a2a/helpdesk", "", rpcBody("SubscribeToTask", map[string]any{"id": tk.ID}), nil)
		ok := resp.Header.Get("Content-Type") == "text/event-stream"
		cancel2()
		for range ev2 {
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the place never came back")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestA2AAgentInterruptPolicy: a2a.agents.<id>.interrupt_policy gates the agent's
// tools on tasks whose SendMessage sets no policy (an A2A caller that knows nothing of
// agentplane); the call waits for a person, and the caller's metadata still sets its
// own.
func TestA2AAgentInterruptPolicy(t *testing.T) {
	f := startFace(t, nil, func(c *config.Config) {
		a := c.A2A.Agents["helpdesk"]
		a.InterruptPolicy = map[string]any{"allowlist": map[string]any{"tools": []any{"send_email"}}}
		c.A2A.Agents["helpdesk"] = a
	})
	f.runtime(t, "helpdesk", "", scriptRunner(t, approvalScript))
	first := mustTask(t, f.rpc(t, "helpdesk", "", "SendMessage", map[string]any{"message": userMessage("p-1", "email me"),
		"configuration": map[string]any{"returnImmediately": true}}), true)
	waiting := f.waitTask(t, "helpdesk", "", first.ID, func(a a2aTask) bool { return strings.Contains(a.statusText(), "approve") })
	if waiting.Status.State != "TASK_STATE_WORKING" || !strings.Contains(waiting.statusText(), "send_email") {
		t.Fatalf("waiting for approval: %s %q", waiting.Status.State, waiting.statusText())
	}
	approve(t, f, "", first.ID)
	f.waitTask(t, "helpdesk", "", first.ID, func(a a2aTask) bool { return a.Status.State == "TASK_STATE_INPUT_REQUIRED" })

	// The caller's policy wins: a denylist of send_email lets it run ungated.
	own := mustTask(t, f.rpc(t, "helpdesk", "", "SendMessage", map[string]any{"message": userMessage("p-2", "email me"),
		"metadata": map[string]any{"agentplane.interruptPolicy": map[string]any{"denylist": map[string]any{"tools": []string{"send_email"}}}}}), true)
	if own.Status.State != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("with the caller's policy: %s %q, want the turn end without an approval", own.Status.State, own.statusText())
	}
}

// TestA2AAgentInterruptPolicyInvalid: a policy that does not compile stops the boot.
func TestA2AAgentInterruptPolicyInvalid(t *testing.T) {
	for name, pol := range map[string]map[string]any{
		"unknown field": {"allowlist": map[string]any{"tool": []any{"x"}}},
		"empty":         {},
		"bad predicate": {"predicate": map[string]any{"expression": "tool_name ==="}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := servertest.Config(t)
			dir := t.TempDir()
			spec := filepath.Join(dir, "h.yaml")
			if err := os.WriteFile(spec, []byte(helpdeskSpec), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg.Spec.StaticAgents = map[string]string{"helpdesk": spec}
			cfg.A2A.Agents = map[string]config.A2AAgent{"helpdesk": {InterruptPolicy: pol}}
			err := cfg.Validate()
			if err == nil {
				_, err = server.New(cfg)
			}
			if err == nil || !strings.Contains(err.Error(), "a2a.agents.helpdesk.interrupt_policy") {
				t.Fatalf("boot with %v: %v, want an error naming a2a.agents.helpdesk.interrupt_policy", pol, err)
			}
		})
	}
}
