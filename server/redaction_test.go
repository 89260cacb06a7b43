package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
)

// responseRecorder keeps the encoded bytes of every response (and error status) a
// client received, per method.
type responseRecorder struct {
	mu  sync.Mutex
	got []recorded
}

type recorded struct {
	who, method string
	b           []byte
}

func (r *responseRecorder) add(who, method string, m any, err error) {
	var b []byte
	if pm, ok := m.(proto.Message); ok && err == nil {
		b, _ = proto.Marshal(pm)
	}
	if err != nil {
		b, _ = proto.Marshal(status.Convert(err).Proto())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, recorded{who: who, method: method, b: b})
}

// dial connects as a with every response recorded under a's name.
func (r *responseRecorder) dial(t *testing.T, addr string, a *actor) *client.Client {
	t.Helper()
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		r.add(a.name, method, reply, err)
		return err
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			r.add(a.name, method, nil, err)
			return nil, err
		}
		return &recordingStream{ClientStream: s, r: r, who: a.name, method: method}, nil
	}
	c, err := client.Dial(context.Background(), addr, client.WithToken(a.token),
		client.WithDialOptions(grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

type recordingStream struct {
	grpc.ClientStream
	r           *responseRecorder
	who, method string
}

func (s *recordingStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == io.EOF {
		return err
	}
	s.r.add(s.who, s.method, m, err)
	return err
}

// TestClientReadsNeverCarryOperatorSecrets: the header values of the deployment's
// baseline MCP servers and A2A peers (an operator's credentials) reach a runtime in
// its lease and no one else: not a tenant's user or approver through any TaskService
// or HitlService response (tasks, events, interrupts, errors), over gRPC or HTTP/JSON,
// and not a runtime through any response other than the lease.
func TestClientReadsNeverCarryOperatorSecrets(t *testing.T) {
	const mcpSecret, a2aSecret, urlSecret = "OPERATOR-SECRET-123", "OPERATOR-SECRET-456", "OPERATOR-SECRET-789"
	secrets := []string{mcpSecret, a2aSecret, urlSecret}
	mt := startMultiTenant(t, []string{"acme"}, func(c *config.Config) {
		c.Gates.McpServers = []config.Peer{{Name: "ops", URL: "https://mcp.example.com/sse?key=" + urlSecret + "#frag",
			Headers: map[string]string{"Authorization": "Bearer " + mcpSecret}}}
		c.Gates.A2aPeers = []config.Peer{{Name: "billing", URL: "https://a2a.example.com/agent",
			Headers: map[string]string{"X-Api-Key": a2aSecret}}}
	})
	rec := &responseRecorder{}
	user := rec.dial(t, mt.in.GRPCAddr, mt.by["acme"][auth.RoleUser])
	approver := rec.dial(t, mt.in.GRPCAddr, mt.by["acme"][auth.RoleApprover])
	runtime := rec.dial(t, mt.in.GRPCAddr, mt.by["acme"][auth.RoleRuntime])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// A task whose caller also brings servers of its own (ignored in multi-tenant mode,
	// which the log says).
	started, err := user.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		RequestId: "r1", Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}, Input: client.UserText("move 1"),
		InterruptPolicy: gatedPolicy(),
		McpServers:      &agentplanev1.McpServerList{Servers: []*agentplanev1.McpServer{{Name: "mine", Url: "https://mine.example.com"}}},
	})
	must("StartTask", err)
	id := started.GetTask().GetTaskId()
	// What a client is shown of the effective entries: names, URLs without their query,
	// header names.
	shown := started.GetTask()
	if got := shown.GetEffectiveMcpServers(); len(got) != 1 || got[0].GetName() != "ops" ||
		got[0].GetUrl() != "https://mcp.example.com/sse" || !slices.Equal(got[0].GetHeaderNames(), []string{"Authorization"}) {
		t.Errorf("effective_mcp_servers = %v", got)
	}
	if got := shown.GetEffectiveA2APeers(); len(got) != 1 || got[0].GetName() != "billing" ||
		got[0].GetUrl() != "https://a2a.example.com/agent" || !slices.Equal(got[0].GetHeaderNames(), []string{"X-Api-Key"}) {
		t.Errorf("effective_a2a_peers = %v", got)
	}
	_, err = user.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{ // the idempotent retry
		RequestId: "r1", Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}, Input: client.UserText("move 1"),
		InterruptPolicy: gatedPolicy(),
		McpServers:      &agentplanev1.McpServerList{Servers: []*agentplanev1.McpServer{{Name: "mine", Url: "https://mine.example.com"}}},
	})
	must("StartTask retry", err)

	reads := func() {
		for _, c := range []*client.Client{user, approver} {
			_, err := c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: id})
			must("GetTask", err)
			_, err = c.Tasks.ListTasks(ctx, &agentplanev1.ListTasksRequest{PageSize: 500})
			must("ListTasks", err)
			_, err = c.Hitl.ListInterrupts(ctx, &agentplanev1.ListInterruptsRequest{})
			must("ListInterrupts", err)
			wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
			w, err := c.Tasks.WatchTask(wctx, &agentplanev1.WatchTaskRequest{TaskId: id})
			must("WatchTask", err)
			for {
				if _, err := w.Recv(); err != nil {
					break
				}
			}
			wcancel()
		}
	}
	reads()

	// The runtime leases it: the lease carries the full entries.
	var lease *agentplanev1.Lease
	for lease == nil {
		resp, err := runtime.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt", MaxTasks: 1})
		must("LeaseTasks", err)
		if len(resp.GetLeases()) > 0 {
			lease = resp.GetLeases()[0]
		}
	}
	leased, _ := proto.Marshal(lease)
	for _, secret := range secrets {
		if !bytes.Contains(leased, []byte(secret)) {
			t.Errorf("the runtime's lease lacks the header value %q it needs to call the server", secret)
		}
	}
	if got := lease.GetMcpServers(); len(got) != 1 || got[0].GetHeaders()["Authorization"] != "Bearer "+mcpSecret {
		t.Errorf("lease mcp_servers = %v", got)
	}
	if got := lease.GetA2APeers(); len(got) != 1 || got[0].GetHeaders()["X-Api-Key"] != a2aSecret {
		t.Errorf("lease a2a_peers = %v", got)
	}
	ref := &agentplanev1.LeaseRef{TaskId: id, LeaseId: lease.GetLeaseId(), Epoch: lease.GetEpoch()}

	// A gated call raises an interrupt; the approver decides; the runtime runs and completes.
	args := `{"n":1}`
	check, err := runtime.Runtime.CheckToolCall(ctx, &agentplanev1.CheckToolCallRequest{
		Lease: ref, CallId: "c1", ToolName: gatedTool, AgentName: "teller", ArgumentsJson: args})
	must("CheckToolCall", err)
	reads()
	in := check.GetInterrupt()
	_, err = approver.Hitl.GetInterrupt(ctx, &agentplanev1.GetInterruptRequest{InterruptId: in.GetInterruptId()})
	must("GetInterrupt", err)
	_, err = approver.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{InterruptId: in.GetInterruptId(),
		Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}}})
	must("ResolveInterrupt", err)
	aw, err := runtime.Runtime.AwaitDecision(ctx, &agentplanev1.AwaitDecisionRequest{Lease: ref, InterruptId: in.GetInterruptId()})
	must("AwaitDecision", err)
	_, err = aw.Recv()
	must("AwaitDecision.Recv", err)
	_, err = runtime.Runtime.Heartbeat(ctx, &agentplanev1.HeartbeatRequest{Lease: ref})
	must("Heartbeat", err)
	_, err = runtime.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref, Events: []*agentplanev1.RuntimeEvent{
		{Payload: &agentplanev1.RuntimeEvent_ToolCall{ToolCall: &agentplanev1.ToolCall{CallId: "c1", ToolName: gatedTool, ArgumentsJson: args, Node: "teller"}}},
		{Payload: &agentplanev1.RuntimeEvent_ToolResult{ToolResult: &agentplanev1.ToolResult{CallId: "c1", ToolName: gatedTool}}},
	}})
	must("ReportEvents", err)
	_, err = runtime.Runtime.CompleteTask(ctx, &agentplanev1.CompleteTaskRequest{Lease: ref, Output: &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "done")}})
	must("CompleteTask", err)
	reads()
	// A second task, canceled, for CancelTask's response.
	second, err := user.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}, Input: client.UserText("move 2")})
	must("StartTask", err)
	_, err = user.Tasks.CancelTask(ctx, &agentplanev1.CancelTaskRequest{TaskId: second.GetTask().GetTaskId(), Reason: "no"})
	must("CancelTask", err)

	leaseMethod := agentplanev1.RuntimeService_LeaseTasks_FullMethodName
	calls := 0
	for _, r := range rec.got {
		if r.method == leaseMethod {
			continue
		}
		calls++
		for _, secret := range secrets {
			if bytes.Contains(r.b, []byte(secret)) {
				t.Errorf("%s's %s response carries the operator's header value %q", r.who, r.method, secret)
			}
		}
	}
	if calls < 20 {
		t.Fatalf("only %d responses recorded; the recorder is not wired", calls)
	}

	// The same reads over HTTP/JSON.
	base := "http://" + mt.in.HTTPAddr
	for _, a := range []*actor{mt.by["acme"][auth.RoleUser], mt.by["acme"][auth.RoleApprover]} {
		for _, path := range []string{"/v1/tasks", "/v1/tasks?view=TASK_VIEW_FULL", "/v1/tasks/" + id, "/v1/tasks/" + id + ":watch", "/v1/interrupts/" + in.GetInterruptId()} {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
			must("request", err)
			req.Header.Set("Authorization", "Bearer "+a.token)
			resp, err := http.DefaultClient.Do(req)
			must("GET "+path, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), id) {
				t.Errorf("GET %s as %v: %d %s", path, a, resp.StatusCode, b)
			}
			for _, secret := range secrets {
				if strings.Contains(string(b), secret) {
					t.Errorf("GET %s as %v carries the operator's header value %q", path, a, secret)
				}
			}
		}
	}
}
