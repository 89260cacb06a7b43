package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

// The tests in this file drive /mcp with the official Go SDK's client against a real
// control plane, the test itself playing the runtime through the gRPC API.

// mcpAgentFiles are the static agents the MCP tests serve.
var mcpAgentFiles = map[string]string{
	"echo": "apiVersion: qar/v1\nkind: AgentSpec\nname: Echo\ninstructions: Answer.\nmodel: test-model\n",
	"chat": "apiVersion: qar/v1\nkind: AgentSpec\nname: Chat\ninstructions: Talk.\nmodel: test-model\nauto_pause_on_turn_end: true\n",
	"typed": "apiVersion: qar/v1\nkind: AgentSpec\ninstructions: Count.\nmodel: test-model\n" +
		"deps_schema: {name: deps, schema: {type: object, properties: {n: {type: integer}}, required: [n], additionalProperties: false}}\n" +
		"output_schema: {json_schema: {name: out, schema: {type: object, properties: {answer: {type: string}}, required: [answer], additionalProperties: false}}}\n",
	// Not a valid MCP tool name: not served as a tool.
	"bad id!": "apiVersion: qar/v1\nkind: AgentSpec\ninstructions: Hide.\nmodel: test-model\n",
}

// withMCPAgents writes mcpAgentFiles and names them in spec.static_agents.
func withMCPAgents(t testing.TB, c *config.Config) {
	t.Helper()
	dir := t.TempDir()
	c.Spec.StaticAgents = map[string]string{}
	for id, doc := range mcpAgentFiles {
		path := filepath.Join(dir, strings.ReplaceAll(id, " ", "_")+".yaml")
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		c.Spec.StaticAgents[id] = path
	}
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpConnect opens a session on in's /mcp as token (none in single-user mode).
func mcpConnect(t testing.TB, httpAddr, token string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "agentplane-test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + httpAddr + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token}}, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func mustMCP(t testing.TB, httpAddr, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := mcpConnect(t, httpAddr, token, opts)
	if err != nil {
		t.Fatalf("mcp connect: %v", err)
	}
	return cs
}

// testRuntime leases tasks as a runtime would and hands each to the test.
type testRuntime struct {
	t *testing.T
	c *client.Client
}

// lease waits for the next task.
func (r testRuntime) lease(ctx context.Context) (*agentplanev1.Lease, *agentplanev1.LeaseRef) {
	r.t.Helper()
	for ctx.Err() == nil {
		resp, err := r.c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "mcp-rt", MaxTasks: 1, Wait: durationpb.New(5 * time.Second)})
		if err != nil {
			r.t.Errorf("LeaseTasks: %v", err)
			return nil, nil
		}
		if len(resp.GetLeases()) == 1 {
			l := resp.GetLeases()[0]
			return l, &agentplanev1.LeaseRef{TaskId: l.GetTask().GetTaskId(), LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
		}
	}
	r.t.Errorf("no lease: %v", ctx.Err())
	return nil, nil
}

func (r testRuntime) say(ctx context.Context, ref *agentplanev1.LeaseRef, text string) {
	r.t.Helper()
	if _, err := r.c.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref, Events: []*agentplanev1.RuntimeEvent{{
		Payload: &agentplanev1.RuntimeEvent_Message{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, text)}}}}); err != nil {
		r.t.Errorf("ReportEvents: %v", err)
	}
}

func (r testRuntime) complete(ctx context.Context, ref *agentplanev1.LeaseRef, text string, structured map[string]any) {
	r.t.Helper()
	out := &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, text)}
	if structured != nil {
		v, err := structpb.NewValue(structured)
		if err != nil {
			r.t.Fatal(err)
		}
		out.Structured = v
	}
	if _, err := r.c.Runtime.CompleteTask(ctx, &agentplanev1.CompleteTaskRequest{Lease: ref, Output: out}); err != nil {
		r.t.Errorf("CompleteTask: %v", err)
	}
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestMCPToolsAreTheStaticAgents: every static agent whose id is a valid tool name is
// a tool, with the message and (for deps_schema) data as its input and the agent's
// object output_schema as its output schema; nothing else is a tool.
func TestMCPToolsAreTheStaticAgents(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) { withMCPAgents(t, c) })
	cs := mustMCP(t, in.HTTPAddr, "", nil)
	if got := cs.InitializeResult().ProtocolVersion; got != "2025-11-25" {
		t.Errorf("negotiated protocol %q, want 2025-11-25 (the Go SDK asks for 2026-07-28, which is not served)", got)
	}
	list, err := cs.ListTools(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	byName := map[string]*mcp.Tool{}
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		byName[tool.Name] = tool
	}
	if want := []string{"chat", "echo", "typed"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	schema := func(v any) map[string]any {
		b, _ := json.Marshal(v)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return m
	}
	echo := schema(byName["echo"].InputSchema)
	if _, ok := echo["properties"].(map[string]any)["data"]; ok || echo["additionalProperties"] != false {
		t.Errorf("echo input schema %v: want input only, closed", echo)
	}
	typed := schema(byName["typed"].InputSchema)
	data, _ := typed["properties"].(map[string]any)["data"].(map[string]any)
	if data["type"] != "object" || data["required"] == nil {
		t.Errorf("typed input schema %v: want data from deps_schema", typed)
	}
	if out := schema(byName["typed"].OutputSchema); out["type"] != "object" || byName["echo"].OutputSchema != nil {
		t.Errorf("output schemas: typed %v, echo %v", out, byName["echo"].OutputSchema)
	}
}

// TestMCPCallRunsATask: a call starts a task on the agent, reports the task's messages
// as progress, and returns the output as text and structured content; the same
// agentplane/request_id attaches to the same task (from another session too) instead
// of starting another.
func TestMCPCallRunsATask(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) { withMCPAgents(t, c) })
	ctx := testCtx(t)
	var wg sync.WaitGroup
	ctx, stop := context.WithCancel(ctx)
	defer func() { // a failed test stops the runtime goroutines first
		if t.Failed() {
			stop()
		}
		wg.Wait()
		stop()
	}()
	var mu sync.Mutex
	var progress []string
	cs := mustMCP(t, in.HTTPAddr, "", &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		progress = append(progress, r.Params.Message)
		mu.Unlock()
	}})
	rt := testRuntime{t, in.Client}
	wg.Go(func() {
		l, ref := rt.lease(ctx)
		if l == nil {
			return
		}
		if got := client.MessageText(l.GetTask().GetInput()); got != "count to 3" || l.GetTask().GetAgentId() != "typed" {
			t.Errorf("task input %q agent %q", got, l.GetTask().GetAgentId())
		}
		var data *structpb.Struct
		for _, p := range l.GetTask().GetInput().GetParts() {
			if d := p.GetData(); d != nil {
				data = d.GetData()
			}
		}
		if data.GetFields()["n"].GetNumberValue() != 3 {
			t.Errorf("data part %v", data)
		}
		rt.say(ctx, ref, "one, two")
		rt.complete(ctx, ref, "three", map[string]any{"answer": "3"})
	})
	params := &mcp.CallToolParams{Name: "typed", Arguments: map[string]any{"input": "count to 3", "data": map[string]any{"n": 3}},
		Meta: mcp.Meta{"agentplane/request_id": "count-1"}}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || resultText(res) != "three" {
		t.Fatalf("result %+v", res)
	}
	if sc, _ := json.Marshal(res.StructuredContent); string(sc) != `{"answer":"3"}` {
		t.Errorf("structured content %s", sc)
	}
	taskID, _ := res.Meta["agentplane/task_id"].(string)
	if taskID == "" || res.Meta["agentplane/state"] != "completed" {
		t.Fatalf("meta %v", res.Meta)
	}
	mu.Lock()
	if !slices.Contains(progress, "one, two") {
		t.Errorf("progress %q: want the task's message", progress)
	}
	mu.Unlock()

	// The same request id, from another session: the same task, answered from its log.
	again, err := mustMCP(t, in.HTTPAddr, "", nil).CallTool(ctx, params)
	if err != nil || again.Meta["agentplane/task_id"] != taskID || resultText(again) != "three" {
		t.Fatalf("retry: %+v %v", again, err)
	}
	list, err := in.Client.Tasks.ListTasks(ctx, &agentplanev1.ListTasksRequest{})
	if err != nil || len(list.GetTasks()) != 1 {
		t.Fatalf("tasks %v %v: want the one", list, err)
	}
	// The same request id with other arguments is refused, and starts nothing.
	params.Arguments = map[string]any{"input": "count to 4", "data": map[string]any{"n": 4}}
	other, err := cs.CallTool(ctx, params)
	if err != nil || !other.IsError || !strings.Contains(resultText(other), "request_id") {
		t.Fatalf("reused request id: %+v %v", other, err)
	}
}

// TestMCPHostileArguments: arguments off the schema, oversized or not JSON never
// become a task; the model reads why.
func TestMCPHostileArguments(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) {
		withMCPAgents(t, c)
		c.Limits.MaxInputBytes = 1024
	})
	ctx := testCtx(t)
	cs := mustMCP(t, in.HTTPAddr, "", nil)
	for name, args := range map[string]any{
		"missing input":  map[string]any{},
		"empty input":    map[string]any{"input": ""},
		"wrong type":     map[string]any{"input": 7},
		"unknown key":    map[string]any{"input": "x", "approve": "int-1"},
		"data off deps":  map[string]any{"input": "x", "data": map[string]any{"n": "three"}},
		"data on echo":   map[string]any{"input": "x", "data": map[string]any{}},
		"over the limit": map[string]any{"input": strings.Repeat("\u00e9", 4096)},
		"not an object":  []any{"input"},
	} {
		tool := "typed"
		if name == "data on echo" || name == "over the limit" {
			tool = "echo"
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Errorf("%s: protocol error %v, want a tool error", name, err)
			continue
		}
		if !res.IsError {
			t.Errorf("%s: %+v, want a tool error", name, res)
		}
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "no-such-agent", Arguments: map[string]any{"input": "x"}}); err == nil && !res.IsError {
		t.Errorf("unknown tool: %+v", res)
	}
	list, err := in.Client.Tasks.ListTasks(ctx, &agentplanev1.ListTasksRequest{})
	if err != nil || len(list.GetTasks()) != 0 {
		t.Fatalf("tasks %v %v: hostile calls started some", list.GetTasks(), err)
	}

	// A body over the HTTP limit is refused before the SDK decodes it.
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"},"pad":"` +
		strings.Repeat("a", int(in.Config.Limits.MaxRequestBytes())+1) + `"}}`
	req, _ := http.NewRequest(http.MethodPost, "http://"+in.HTTPAddr+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge && resp.StatusCode != http.StatusBadRequest {
		t.Errorf("oversized body: %d", resp.StatusCode)
	}
}

// TestMCPCancelCancelsTheTask: notifications/cancelled (the Go SDK sends it when the
// call's context ends) cancels the task; closing the session does not.
func TestMCPCancelCancelsTheTask(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) { withMCPAgents(t, c) })
	ctx := testCtx(t)
	rt := testRuntime{t, in.Client}
	started := make(chan string, 2)
	go func() {
		for range 2 {
			l, ref := rt.lease(ctx)
			if l == nil {
				return
			}
			rt.say(ctx, ref, "working")
			started <- ref.GetTaskId()
		}
	}()
	progressed := make(chan struct{}, 4)
	opts := &mcp.ClientOptions{ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
		progressed <- struct{}{}
	}}
	waitState := func(id string, want agentplanev1.TaskState) {
		t.Helper()
		w, err := in.Client.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: id})
		if err != nil {
			t.Fatal(err)
		}
		for {
			resp, err := w.Recv()
			if err != nil {
				t.Fatalf("task %s never reached %v: %v", id, want, err)
			}
			if resp.GetEvent().GetStateChanged().GetToState() == want {
				return
			}
		}
	}

	cs := mustMCP(t, in.HTTPAddr, "", opts)
	callCtx, cancelCall := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"input": "long"}}
		p.SetProgressToken("c1")
		_, err := cs.CallTool(callCtx, p)
		errc <- err
	}()
	id := <-started
	<-progressed
	cancelCall()
	if err := <-errc; err == nil {
		t.Fatal("the canceled call returned a result")
	}
	waitState(id, agentplanev1.TaskState_TASK_STATE_CANCELED)

	// A session that closes mid-call leaves its task running.
	cs2 := mustMCP(t, in.HTTPAddr, "", opts)
	go func() {
		p := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"input": "durable"}}
		p.SetProgressToken("c2")
		_, err := cs2.CallTool(ctx, p)
		errc <- err
	}()
	id2 := <-started
	<-progressed
	// DELETE, as a client closing its session sends it.
	del, _ := http.NewRequest(http.MethodDelete, "http://"+in.HTTPAddr+"/mcp", nil)
	del.Header.Set("Mcp-Session-Id", cs2.ID())
	del.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(del)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	if err := <-errc; err == nil {
		t.Fatal("the call of a closed session returned a result")
	}
	// Cancel-free: the task is still WORKING after the session has gone (the close
	// has returned, so the server has seen it).
	got, err := in.Client.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: id2})
	if err != nil || got.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_WORKING {
		t.Fatalf("task after the session closed: %v %v, want WORKING", got.GetTask().GetState(), err)
	}
}

// TestMCPChatTurnUsesElicitation: a chat turn's end asks the client's user for the
// next message (elicitation) and continues the task with it; a client without
// elicitation gets the agent's message and a result that says the task waits.
func TestMCPChatTurnUsesElicitation(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) { withMCPAgents(t, c) })
	ctx := testCtx(t)
	var wg sync.WaitGroup
	ctx, stop := context.WithCancel(ctx)
	defer func() { // a failed test stops the runtime goroutines first
		if t.Failed() {
			stop()
		}
		wg.Wait()
		stop()
	}()
	rt := testRuntime{t, in.Client}
	var asked atomic.Int32
	cs := mustMCP(t, in.HTTPAddr, "", &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		if r.Params.Message != "what colour?" {
			t.Errorf("elicitation message %q", r.Params.Message)
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"message": "blue"}}, nil
	}})
	wg.Go(func() {
		_, ref := rt.lease(ctx)
		if ref == nil {
			return
		}
		if _, err := in.Client.Runtime.PauseTask(ctx, &agentplanev1.PauseTaskRequest{Lease: ref,
			Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "what colour?")}); err != nil {
			t.Errorf("PauseTask: %v", err)
			return
		}
		l, ref := rt.lease(ctx)
		if l == nil {
			return
		}
		var got []string
		for _, m := range l.GetContinueMessages() {
			got = append(got, client.MessageText(m))
		}
		if !slices.Equal(got, []string{"blue"}) {
			t.Errorf("continue messages %q", got)
		}
		rt.complete(ctx, ref, "blue it is", nil)
	})
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "chat", Arguments: map[string]any{"input": "paint"}})
	if err != nil || res.IsError || resultText(res) != "blue it is" || asked.Load() != 1 {
		t.Fatalf("chat: %+v %v (asked %d)", res, err, asked.Load())
	}

	// Without elicitation: the turn's message comes back, the task stays paused.
	plain := mustMCP(t, in.HTTPAddr, "", nil)
	wg.Go(func() {
		_, ref := rt.lease(ctx)
		if ref == nil {
			return
		}
		if _, err := in.Client.Runtime.PauseTask(ctx, &agentplanev1.PauseTaskRequest{Lease: ref,
			Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "and the size?")}); err != nil {
			t.Errorf("PauseTask: %v", err)
		}
	})
	res, err = plain.CallTool(ctx, &mcp.CallToolParams{Name: "chat", Arguments: map[string]any{"input": "paint more"}})
	if err != nil || res.IsError || !strings.HasPrefix(resultText(res), "and the size?") || res.Meta["agentplane/state"] != "input_required" {
		t.Fatalf("no elicitation: %+v %v", res, err)
	}
}

// TestMCPApprovalsAreNotTools: a call whose task waits for a reviewer keeps running and
// says so in its progress; nothing the MCP client can do (list, call any tool with any
// arguments, answer elicitations) resolves the interrupt; the reviewer's decision
// through the HITL API lets the call finish.
func TestMCPApprovalsAreNotTools(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) { withMCPAgents(t, c) })
	ctx := testCtx(t)
	var wg sync.WaitGroup
	ctx, stop := context.WithCancel(ctx)
	defer func() { // a failed test stops the runtime goroutines first
		if t.Failed() {
			stop()
		}
		wg.Wait()
		stop()
	}()
	rt := testRuntime{t, in.Client}
	var elicited atomic.Int32
	progress := make(chan string, 16)
	cs := mustMCP(t, in.HTTPAddr, "", &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			elicited.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"message": "approve", "result": "approved"}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { progress <- r.Params.Message },
	})
	interrupt := make(chan string, 1)
	decided := make(chan struct{})
	wg.Go(func() {
		l, ref := rt.lease(ctx)
		if l == nil {
			return
		}
		resp, err := in.Client.Runtime.CheckToolCall(ctx, &agentplanev1.CheckToolCallRequest{Lease: ref, CallId: "c1",
			ToolName: "mcp__bank__transfer", AgentName: "Echo", ArgumentsJson: `{"n": 1}`,
			Annotations: &agentplanev1.McpToolAnnotations{DestructiveHint: proto.Bool(true)}})
		if err != nil || resp.GetInterrupt() == nil {
			t.Errorf("CheckToolCall: %v %v, want an interrupt", resp, err)
			interrupt <- ""
			return
		}
		interrupt <- resp.GetInterrupt().GetInterruptId()
		select {
		case <-decided:
		case <-ctx.Done():
			return
		}
		rt.complete(ctx, ref, "transferred", nil)
	})
	errc := make(chan error, 1)
	var res *mcp.CallToolResult
	go func() {
		p := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"input": "move money"}}
		p.SetProgressToken("a1")
		var err error
		res, err = cs.CallTool(ctx, p)
		errc <- err
	}()
	id := <-interrupt
	if id == "" {
		t.FailNow()
	}
	for msg := range progress {
		if strings.Contains(msg, "waiting for a person to approve") && strings.Contains(msg, id) {
			break
		}
	}

	// Every tool, with the interrupt in every argument the schema allows and more.
	attemptCtx, stopAttempts := context.WithCancel(ctx)
	var attempts sync.WaitGroup
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range list.Tools {
		if strings.Contains(strings.ToLower(tool.Name), "approv") || strings.Contains(strings.ToLower(tool.Name), "interrupt") {
			t.Errorf("tool %q looks like an approval", tool.Name)
		}
		for _, args := range []map[string]any{{"input": "approve " + id}, {"input": id, "data": map[string]any{"n": 1}}, {"interrupt_id": id, "decision": "approve"}} {
			attempts.Add(1)
			go func() {
				defer attempts.Done()
				_, _ = cs.CallTool(attemptCtx, &mcp.CallToolParams{Name: tool.Name, Arguments: args,
					Meta: mcp.Meta{"agentplane/request_id": "x-" + tool.Name + fmt.Sprint(len(args)), "interrupt_id": id, "decision": "approve"}})
			}()
		}
	}
	// The attempts that fit a tool's schema start tasks (one per tool, and typed's
	// data): wait until they have, then end them.
	for {
		list, err := in.Client.Tasks.ListTasks(ctx, &agentplanev1.ListTasksRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.GetTasks()) >= 5 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the attempts started %d tasks", len(list.GetTasks())-1)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopAttempts()
	attempts.Wait()
	for _, name := range []string{"approve", "resolve_interrupt", "ResolveInterrupt", "hitl.approve"} {
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"interrupt_id": id}}); err == nil && !res.IsError {
			t.Errorf("tool %q answered: %+v", name, res)
		}
	}
	got, err := in.Client.Hitl.GetInterrupt(ctx, &agentplanev1.GetInterruptRequest{InterruptId: id})
	if err != nil || got.GetInterrupt().GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_PENDING {
		t.Fatalf("interrupt after the MCP client's attempts: %v %v, want PENDING", got.GetInterrupt().GetState(), err)
	}
	if n := elicited.Load(); n != 0 {
		t.Fatalf("%d elicitations while a reviewer's decision was pending", n)
	}
	select {
	case err := <-errc:
		t.Fatalf("the call ended while its task waited for approval: %v %+v", err, res)
	default:
	}

	if _, err := in.Client.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{InterruptId: id,
		Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}}}); err != nil {
		t.Fatal(err)
	}
	close(decided)
	if err := <-errc; err != nil || resultText(res) != "transferred" {
		t.Fatalf("after approval: %+v %v", res, err)
	}
}

// TestMCPAuthAndTenants: in a multi-tenant deployment /mcp needs a user's credential;
// a session is its principal's; a call's task is its tenant's, invisible to another
// tenant, whose own request ids are its own.
func TestMCPAuthAndTenants(t *testing.T) {
	mt := startMultiTenant(t, []string{"acme", "globex"}, func(c *config.Config) { withMCPAgents(t, c) })
	ctx := testCtx(t)
	var wg sync.WaitGroup
	ctx, stop := context.WithCancel(ctx)
	defer func() { // a failed test stops the runtime goroutines first
		if t.Failed() {
			stop()
		}
		wg.Wait()
		stop()
	}()
	addr := mt.in.HTTPAddr
	for name, token := range map[string]string{"no token": "", "bad token": "not-a-token",
		"approver": mt.by["acme"]["approver"].token, "runtime": mt.by["acme"]["runtime"].token} {
		if _, err := mcpConnect(t, addr, token, nil); err == nil {
			t.Errorf("%s: connected", name)
		}
	}
	// Refused before the SDK: plain HTTP statuses.
	for token, want := range map[string]int{"": http.StatusUnauthorized, mt.by["acme"]["approver"].token: http.StatusForbidden} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("token %.6s...: %d, want %d", token, resp.StatusCode, want)
		}
	}

	acme, globex := mt.by["acme"]["user"], mt.by["globex"]["user"]
	rt := testRuntime{t, mt.by["acme"]["runtime"].c}
	wg.Go(func() {
		_, ref := rt.lease(ctx)
		if ref != nil {
			rt.complete(ctx, ref, "acme's answer", nil)
		}
	})
	cs := mustMCP(t, addr, acme.token, nil)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"input": "hi"}, Meta: mcp.Meta{"agentplane/request_id": "shared-id"}})
	if err != nil || res.IsError {
		t.Fatalf("acme call: %+v %v", res, err)
	}
	taskID := res.Meta["agentplane/task_id"].(string)
	got, err := acme.c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: taskID})
	if err != nil || got.GetTask().GetTenant() != "acme" || got.GetTask().GetCreatedBy() != acme.name {
		t.Fatalf("acme's task: %v %v", got.GetTask(), err)
	}
	if _, err := globex.c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: taskID}); err == nil {
		t.Fatal("globex reads acme's task")
	}

	// globex's same request id is another task, in globex; it waits for globex's runtime.
	gs := mustMCP(t, addr, globex.token, nil)
	grt := testRuntime{t, mt.by["globex"]["runtime"].c}
	wg.Go(func() {
		_, ref := grt.lease(ctx)
		if ref != nil {
			grt.complete(ctx, ref, "globex's answer", nil)
		}
	})
	gres, err := gs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"input": "hi"}, Meta: mcp.Meta{"agentplane/request_id": "shared-id"}})
	if err != nil || resultText(gres) != "globex's answer" || gres.Meta["agentplane/task_id"] == taskID {
		t.Fatalf("globex call: %+v %v", gres, err)
	}

	// acme's session, presented with globex's token, is refused.
	sid := cs.ID()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Authorization", "Bearer "+globex.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || bytes.Contains(body, []byte("echo")) {
		t.Fatalf("foreign session: %d %s", resp.StatusCode, body)
	}
}

// TestMCPLimits: the sessions open at once and the calls running in one session are
// bounded.
func TestMCPLimits(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) {
		withMCPAgents(t, c)
		c.MCP.MaxSessions = 2
		c.MCP.MaxCallsPerSession = 1
	})
	ctx := testCtx(t)
	cs := mustMCP(t, in.HTTPAddr, "", nil)
	second := mustMCP(t, in.HTTPAddr, "", nil)
	if _, err := mcpConnect(t, in.HTTPAddr, "", nil); err == nil {
		t.Fatal("a third session opened with mcp.max_sessions 2")
	}
	if err := second.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	mustMCP(t, in.HTTPAddr, "", nil) // a closed session frees its place

	rt := testRuntime{t, in.Client}
	leased := make(chan *agentplanev1.LeaseRef, 1)
	go func() {
		if _, ref := rt.lease(ctx); ref != nil {
			leased <- ref
		}
	}()
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"input": "first"}})
		errc <- err
	}()
	ref := <-leased
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"input": "second"}})
	if err == nil || !strings.Contains(err.Error(), "max_calls_per_session") {
		t.Fatalf("second call in a session with mcp.max_calls_per_session 1: %v", err)
	}
	rt.complete(ctx, ref, "done", nil)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestMCPCanBeTurnedOff: mcp.disabled serves no /mcp.
func TestMCPCanBeTurnedOff(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) {
		withMCPAgents(t, c)
		c.MCP.Disabled = true
	})
	if _, err := mcpConnect(t, in.HTTPAddr, "", nil); err == nil {
		t.Fatal("connected to a disabled /mcp")
	}
}

// TestMCPShutdownDoesNotWait: a control plane with MCP sessions open (a call in
// progress, the client's event stream) shuts down without waiting out its drain
// timeout, and the call's task is left as it was.
func TestMCPShutdownDoesNotWait(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	cfg := servertest.Config(t)
	withMCPAgents(t, &cfg)
	in := servertest.StartLogged(t, cfg, slog.New(slog.NewTextHandler(logs, nil)))
	ctx := testCtx(t)
	rt := testRuntime{t, in.Client}
	leased := make(chan string, 1)
	go func() {
		if _, ref := rt.lease(ctx); ref != nil {
			leased <- ref.GetTaskId()
		}
	}()
	cs := mustMCP(t, in.HTTPAddr, "", nil)
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"input": "long"}})
		errc <- err
	}()
	<-leased
	in.Stop(t)
	<-errc
	if strings.Contains(logs.String(), "http shutdown") || strings.Contains(logs.String(), "drain timed out") {
		t.Fatalf("shutdown waited on MCP:\n%s", logs.String())
	}
}

// TestMCPOverMutualTLS: a client certificate alone authenticates an MCP session over
// HTTPS, and the call's task is created by the certificate's principal (the in-process
// calls are handed the verified certificate, one ticket each).
func TestMCPOverMutualTLS(t *testing.T) {
	pki := newTestPKI(t, t.TempDir(), "acme-bot")
	rtToken, rtHash, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	in := servertest.Start(t, func(c *config.Config) {
		withMCPAgents(t, c)
		c.Auth.RequirePrincipal = true
		c.Auth.Tokens = []config.Token{{Name: "acme-runtime", SHA256: rtHash, Tenant: "acme", Roles: []string{"runtime"}}}
		c.Auth.ClientCerts = []config.ClientCert{{CommonName: "acme-bot", Tenant: "acme", Roles: []string{"user"}}}
		c.TLS = config.TLS{CertFile: pki.certFile, KeyFile: pki.keyFile, ClientCAFile: pki.caFile}
	})
	ctx := testCtx(t)
	tlsCfg := &tls.Config{RootCAs: pki.pool, Certificates: []tls.Certificate{pki.client}, MinVersion: tls.VersionTLS12}
	rc, err := client.Dial(ctx, in.GRPCAddr, client.WithTLS(&tls.Config{RootCAs: pki.pool, MinVersion: tls.VersionTLS12}), client.WithToken(rtToken))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	rt := testRuntime{t, rc}
	var wg sync.WaitGroup
	ctx, stop := context.WithCancel(ctx)
	defer func() { // a failed test stops the runtime goroutines first
		if t.Failed() {
			stop()
		}
		wg.Wait()
		stop()
	}()
	wg.Go(func() {
		l, ref := rt.lease(ctx)
		if l == nil {
			return
		}
		if l.GetTask().GetCreatedBy() != "acme-bot" {
			t.Errorf("task created by %q, want acme-bot", l.GetTask().GetCreatedBy())
		}
		rt.complete(ctx, ref, "over mTLS", nil)
	})
	mc := mcp.NewClient(&mcp.Implementation{Name: "agentplane-test", Version: "1"}, nil)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	defer hc.CloseIdleConnections()
	cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "https://" + in.HTTPAddr + "/mcp", HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"input": "hi"}})
	if err != nil || res.IsError || resultText(res) != "over mTLS" {
		t.Fatalf("call over mTLS: %+v %v", res, err)
	}

	// Without the certificate (and no token): refused.
	plain := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool, MinVersion: tls.VersionTLS12}}}
	defer plain.CloseIdleConnections()
	if _, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "https://" + in.HTTPAddr + "/mcp", HTTPClient: plain, MaxRetries: -1}, nil); err == nil {
		t.Fatal("connected without a credential")
	}
}

// TestMCPClientToolsUseElicitation: a task waiting for the output of a client function
// tool asks the client's user for it (elicitation) and continues with the answer,
// parsed as JSON when it is JSON.
func TestMCPClientToolsUseElicitation(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) { withMCPAgents(t, c) })
	ctx := testCtx(t)
	rt := testRuntime{t, in.Client}
	var wg sync.WaitGroup
	ctx, stop := context.WithCancel(ctx)
	defer func() { // a failed test stops the runtime goroutines first
		if t.Failed() {
			stop()
		}
		wg.Wait()
		stop()
	}()
	var asked atomic.Int32
	cs := mustMCP(t, in.HTTPAddr, "", &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		if !strings.Contains(r.Params.Message, "get_weather") || !strings.Contains(r.Params.Message, "Oslo") {
			t.Errorf("elicitation message %q", r.Params.Message)
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"result": `{"celsius": 4}`}}, nil
	}})
	wg.Go(func() {
		_, ref := rt.lease(ctx)
		if ref == nil {
			return
		}
		call := &agentplanev1.ToolCall{CallId: "f1", ToolName: "get_weather", ArgumentsJson: `{"city":"Oslo"}`}
		if _, err := in.Client.Runtime.CheckToolCall(ctx, &agentplanev1.CheckToolCallRequest{Lease: ref, CallId: "f1", ToolName: "get_weather",
			AgentName: "Echo", ArgumentsJson: call.GetArgumentsJson()}); err != nil {
			t.Errorf("CheckToolCall: %v", err)
			return
		}
		if _, err := in.Client.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref, Events: []*agentplanev1.RuntimeEvent{
			{Payload: &agentplanev1.RuntimeEvent_ToolCall{ToolCall: call}}}}); err != nil {
			t.Errorf("ReportEvents: %v", err)
			return
		}
		if _, err := in.Client.Runtime.PauseTask(ctx, &agentplanev1.PauseTaskRequest{Lease: ref, ToolOutputCalls: []*agentplanev1.ToolCall{call},
			Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "let me check")}); err != nil {
			t.Errorf("PauseTask: %v", err)
			return
		}
		l, ref := rt.lease(ctx)
		if l == nil {
			return
		}
		results := l.GetContinueToolResults()
		if len(results) != 1 || results[0].GetCallId() != "f1" || results[0].GetResult().GetStructValue().GetFields()["celsius"].GetNumberValue() != 4 {
			t.Errorf("continue tool results %v", results)
		}
		rt.complete(ctx, ref, "4 degrees", nil)
	})
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"input": "weather?"}})
	if err != nil || res.IsError || resultText(res) != "4 degrees" || asked.Load() != 1 {
		t.Fatalf("client tool: %+v %v (asked %d)", res, err, asked.Load())
	}
}

// TestMCPSessionsPerPrincipal: in a multi-tenant deployment one principal's sessions
// are bounded, and another principal still gets one.
func TestMCPSessionsPerPrincipal(t *testing.T) {
	mt := startMultiTenant(t, []string{"acme", "globex"}, func(c *config.Config) {
		withMCPAgents(t, c)
		c.MCP.MaxSessionsPerPrincipal = 2
	})
	acme := mt.by["acme"]["user"].token
	mustMCP(t, mt.in.HTTPAddr, acme, nil)
	second := mustMCP(t, mt.in.HTTPAddr, acme, nil)
	if _, err := mcpConnect(t, mt.in.HTTPAddr, acme, nil); err == nil {
		t.Fatal("a third session for one principal with mcp.max_sessions_per_principal 2")
	}
	mustMCP(t, mt.in.HTTPAddr, mt.by["globex"]["user"].token, nil)
	if err := second.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	mustMCP(t, mt.in.HTTPAddr, acme, nil) // a closed session frees its place
}

// TestMCPIdleSessionsAreClosed: a session with no request for
// mcp.session_idle_timeout is closed; a session whose call is in progress is not.
func TestMCPIdleSessionsAreClosed(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) { withMCPAgents(t, c) })
	ctx := testCtx(t)
	rt := testRuntime{t, in.Client}
	var wg sync.WaitGroup
	ctx, stop := context.WithCancel(ctx)
	defer func() { // a failed test stops the runtime goroutine first
		if t.Failed() {
			stop()
		}
		wg.Wait()
		stop()
	}()
	leased := make(chan *agentplanev1.LeaseRef, 1)
	wg.Go(func() {
		if _, ref := rt.lease(ctx); ref != nil {
			leased <- ref
		}
	})
	idle := mustMCP(t, in.HTTPAddr, "", nil)
	busy := mustMCP(t, in.HTTPAddr, "", nil)
	errc := make(chan error, 1)
	var res *mcp.CallToolResult
	go func() {
		var err error
		res, err = busy.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"input": "busy"}})
		errc <- err
	}()
	ref := <-leased
	server.ReapMCPSessions(in.Server, time.Now().Add(time.Hour)) // as if an hour had passed
	if _, err := idle.ListTools(ctx, nil); err == nil {
		t.Fatal("the idle session still answers")
	}
	rt.complete(ctx, ref, "still here", nil)
	if err := <-errc; err != nil || resultText(res) != "still here" {
		t.Fatalf("the busy session's call: %+v %v", res, err)
	}
}

// TestMCPHostileHTTP: what a hostile page or client can send to /mcp is refused before
// any tool runs, and the server goes on serving.
func TestMCPHostileHTTP(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) { withMCPAgents(t, c) })
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	accept := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}
	for _, c := range []guardReq{
		{name: "a form from a page", method: http.MethodPost, path: "/mcp", header: []string{"Content-Type", "text/plain"}, body: initialize, want: http.StatusUnsupportedMediaType},
		{name: "another origin", method: http.MethodPost, path: "/mcp", header: append([]string{"Origin", "https://evil.example"}, accept...), body: initialize, want: http.StatusForbidden},
		{name: "a rebound host name", method: http.MethodPost, path: "/mcp", host: "evil.example", header: accept, body: initialize, want: http.StatusMisdirectedRequest},
		{name: "not JSON", method: http.MethodPost, path: "/mcp", header: accept, body: `{"jsonrpc":`, want: http.StatusBadRequest},
		{name: "an unknown session", method: http.MethodPost, path: "/mcp", header: append([]string{"Mcp-Session-Id", "ABCDEF"}, accept...), body: `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, want: http.StatusNotFound},
		{name: "a huge session id", method: http.MethodPost, path: "/mcp", header: append([]string{"Mcp-Session-Id", strings.Repeat("A", 64<<10)}, accept...), body: `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, want: http.StatusNotFound},
		{name: "a stream without a session", method: http.MethodGet, path: "/mcp", header: []string{"Accept", "text/event-stream"}, want: http.StatusBadRequest},
	} {
		resp, body := guardDo(t, in.HTTPAddr, c)
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d %q, want %d", c.name, resp.StatusCode, body, c.want)
		}
	}
	cs := mustMCP(t, in.HTTPAddr, "", nil)
	if _, err := cs.ListTools(testCtx(t), nil); err != nil {
		t.Fatalf("after the hostile requests: %v", err)
	}
}

// TestMCPCallSurvivesARestart: a call cut off by a control plane restart leaves its
// task; calling again with the same agentplane/request_id on the restarted control
// plane attaches to it (nothing new starts) and returns its result.
func TestMCPCallSurvivesARestart(t *testing.T) {
	cfg := servertest.Config(t)
	withMCPAgents(t, &cfg)
	cfg.Tasks.LeaseTTL = config.Duration(time.Second) // the first runtime's lease lapses soon
	first := servertest.StartConfig(t, cfg)
	ctx := testCtx(t)
	cs := mustMCP(t, first.HTTPAddr, "", nil)
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"input": "survive"}, Meta: mcp.Meta{"agentplane/request_id": "restart-1"}}
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, params)
		errc <- err
	}()
	rt := testRuntime{t, first.Client}
	l, _ := rt.lease(ctx)
	if l == nil {
		t.FailNow()
	}
	taskID := l.GetTask().GetTaskId()
	first.Stop(t)
	if err := <-errc; err == nil {
		t.Fatal("the call returned a result across the restart")
	}

	second := servertest.StartConfig(t, cfg)
	var wg sync.WaitGroup
	ctx, stop := context.WithCancel(ctx)
	defer func() { // a failed test stops the runtime goroutine first
		if t.Failed() {
			stop()
		}
		wg.Wait()
		stop()
	}()
	rt = testRuntime{t, second.Client}
	wg.Go(func() {
		// The first lease's runtime is gone: the task is leased again once it lapses.
		l, ref := rt.lease(ctx)
		if l == nil {
			return
		}
		if l.GetTask().GetTaskId() != taskID {
			t.Errorf("leased %s, want the first call's task %s", l.GetTask().GetTaskId(), taskID)
		}
		rt.complete(ctx, ref, "survived", nil)
	})
	res, err := mustMCP(t, second.HTTPAddr, "", nil).CallTool(ctx, params)
	if err != nil || resultText(res) != "survived" || res.Meta["agentplane/task_id"] != taskID {
		t.Fatalf("after the restart: %+v %v", res, err)
	}
	list, err := second.Client.Tasks.ListTasks(ctx, &agentplanev1.ListTasksRequest{})
	if err != nil || len(list.GetTasks()) != 1 {
		t.Fatalf("tasks %v %v: want the one", list.GetTasks(), err)
	}
}
