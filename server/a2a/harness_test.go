package a2a_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	"github.com/agentplane/agentplane/client/worker/script"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

// The static agents every test deployment serves.
const (
	helpdeskSpec = `apiVersion: qar/v1
kind: AgentSpec
name: helpdesk
instructions: Answer the customer.
model: gpt-4o
auto_pause_on_turn_end: true
`
	calcSpec = `apiVersion: qar/v1
kind: AgentSpec
name: calculator
instructions: Compute, using the client's tools.
model: gpt-4o
tools:
  - type: function
    function:
      name: add
      description: Add two numbers
      parameters: {type: object, properties: {a: {type: number}, b: {type: number}}, required: [a, b], additionalProperties: false}
`
)

type face struct {
	in     *servertest.Instance
	base   string
	tokens map[string]string // principal name -> bearer token
}

// startFace starts a control plane serving helpdesk (the default agent, on queue
// "helpdesk") and calculator (queue "calc"). tenants, when given, make it
// multi-tenant with a user, approver and runtime token per tenant.
func startFace(t *testing.T, tenants []string, mutate func(*config.Config)) *face {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"helpdesk.yaml": helpdeskSpec, "calc.yaml": calcSpec} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f := &face{tokens: map[string]string{}}
	var tokens []config.Token
	for _, tenant := range tenants {
		for _, role := range []auth.Role{auth.RoleUser, auth.RoleApprover, auth.RoleRuntime} {
			tok, hash, err := auth.NewToken()
			if err != nil {
				t.Fatal(err)
			}
			name := tenant + "-" + string(role)
			tokens = append(tokens, config.Token{Name: name, SHA256: hash, Tenant: tenant, Roles: []string{string(role)}})
			f.tokens[name] = tok
		}
	}
	f.in = servertest.Start(t, func(c *config.Config) {
		c.Spec.StaticAgents = map[string]string{"helpdesk": filepath.Join(dir, "helpdesk.yaml"), "calculator": filepath.Join(dir, "calc.yaml")}
		c.A2A.DefaultAgent = "helpdesk"
		c.A2A.Agents = map[string]config.A2AAgent{"helpdesk": {Description: "Answers customers.", Queue: "helpdesk"}, "calculator": {Queue: "calc"}}
		if len(tenants) > 0 {
			c.Auth.RequirePrincipal = true
			c.Auth.Tokens = tokens
		}
		if mutate != nil {
			mutate(c)
		}
	})
	f.base = "http://" + f.in.HTTPAddr
	return f
}

// runtime runs h for tasks of queue until the test ends.
func (f *face) runtime(t *testing.T, queue, token string, h worker.Handler) {
	t.Helper()
	var opts []client.Option
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	c, err := client.Dial(context.Background(), f.in.GRPCAddr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(c.Runtime, h, worker.Options{RuntimeID: "rt-" + queue + "-" + strconv.Itoa(int(runtimes.Add(1))), Queues: []string{queue},
		PollWait: time.Second, Capacity: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; _ = c.Close() })
}

var runtimes atomic.Int32

func scriptRunner(t *testing.T, text string) worker.Handler {
	t.Helper()
	s, err := script.Parse("test.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return &script.Runner{Script: s}
}

type rpcResp struct {
	Status int
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int              `json:"code"`
		Message string           `json:"message"`
		Data    []map[string]any `json:"data"`
	} `json:"error"`
}

func (r rpcResp) code() int {
	if r.Error == nil {
		return 0
	}
	return r.Error.Code
}

// rpc posts one JSON-RPC request to an agent's endpoint.
func (f *face) rpc(t *testing.T, agent, token, method string, params any) rpcResp {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	return f.post(t, "/a2a/"+agent, token, body, map[string]string{"A2A-Version": "1.0"})
}

func (f *face) post(t *testing.T, path, token string, body []byte, hdr map[string]string) rpcResp {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := rpcResp{Status: resp.StatusCode}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("POST %s: HTTP %d, not JSON: %q", path, resp.StatusCode, b)
	}
	return out
}

// a2aTask is the part of an A2A 1.0 task the tests read.
type a2aTask struct {
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	Status    struct {
		State   string `json:"state"`
		Message *struct {
			Parts []map[string]any `json:"parts"`
		} `json:"message"`
	} `json:"status"`
	Artifacts []struct {
		ArtifactID string           `json:"artifactId"`
		Parts      []map[string]any `json:"parts"`
	} `json:"artifacts"`
	History []map[string]any `json:"history"`
}

func (a a2aTask) statusText() string {
	if a.Status.Message == nil {
		return ""
	}
	var sb strings.Builder
	for _, p := range a.Status.Message.Parts {
		if s, ok := p["text"].(string); ok {
			sb.WriteString(s)
		}
	}
	return sb.String()
}

func mustTask(t *testing.T, r rpcResp, wrapped bool) a2aTask {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("error %d: %s", r.Error.Code, r.Error.Message)
	}
	var out a2aTask
	raw := r.Result
	if wrapped {
		var w struct {
			Task json.RawMessage `json:"task"`
		}
		if err := json.Unmarshal(raw, &w); err != nil || w.Task == nil {
			t.Fatalf("result is not {task}: %s", raw)
		}
		raw = w.Task
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func userMessage(id, text string) map[string]any {
	return map[string]any{"messageId": id, "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}
}

// waitTask polls GetTask until cond holds (bounded).
func (f *face) waitTask(t *testing.T, agent, token, id string, cond func(a2aTask) bool) a2aTask {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last a2aTask
	for time.Now().Before(deadline) {
		last = mustTask(t, f.rpc(t, agent, token, "GetTask", map[string]any{"id": id}), false)
		if cond(last) {
			return last
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("task %s never reached the condition; last %+v", id, last)
	return last
}

// sseEvent is one server-sent event.
type sseEvent struct {
	ID    string
	Event string
	Data  string
}

// openStream POSTs a streaming request and returns its events as they come.
func (f *face) openStream(t *testing.T, ctx context.Context, path, token string, body []byte, hdr map[string]string) (<-chan sseEvent, *http.Response) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan sseEvent, 256)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Data != "" {
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.Event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.Data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return ch, resp
}

func rpcBody(method string, params any) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	return b
}

// streamResult unwraps a JSON-RPC SSE event into its StreamResponse.
func streamResult(t *testing.T, ev sseEvent) map[string]json.RawMessage {
	t.Helper()
	var env struct {
		Result map[string]json.RawMessage `json:"result"`
		Error  json.RawMessage            `json:"error"`
	}
	if err := json.Unmarshal([]byte(ev.Data), &env); err != nil {
		t.Fatalf("event data %q: %v", ev.Data, err)
	}
	if env.Error != nil {
		t.Fatalf("stream error: %s", env.Error)
	}
	return env.Result
}

func approve(t *testing.T, f *face, token, taskID string) {
	t.Helper()
	var opts []client.Option
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	c, err := client.Dial(context.Background(), f.in.GRPCAddr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		resp, err := c.Hitl.ListInterrupts(ctx, &agentplanev1.ListInterruptsRequest{TaskId: taskID})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetInterrupts()) > 0 {
			in := resp.GetInterrupts()[0]
			if _, err := c.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{InterruptId: in.GetInterruptId(),
				Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}}, RequestId: client.NewRequestID()}); err != nil {
				t.Fatal(err)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no interrupt to approve on %s", taskID)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

var _ = fmt.Sprint
