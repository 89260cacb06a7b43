package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/version"
)

// The MCP face (docs/mcp.md) serves every static agent of the deployment as an MCP
// tool at /mcp, over the streamable HTTP transport of the official Go SDK. It is a
// client of the API like the gateway: each tool call runs StartTask, WatchTask,
// ContinueTask and CancelTask on the in-process connection with the HTTP caller's own
// credentials, so authentication, the method table, tenant isolation and the
// per-principal limits apply exactly as over gRPC. What MCP adds is bounded here: the
// sessions open at once (mcp.max_sessions), the calls running in one session
// (mcp.max_calls_per_session) and the request body (the HTTP API's limit).
//
// Approvals are never served: no tool, elicitation or argument resolves an interrupt.
// A call whose task waits for a reviewer keeps running and says so in its progress
// notifications; the reviewer decides through the inbox (HitlService), as for any task.

// mcpPath is where the face is mounted.
const mcpPath = "/mcp"

// mcpProtocolVersions are the MCP revisions served: the session-based ones, whose
// notifications/cancelled, server-to-client elicitation and Mcp-Session-Id the face is
// built on. 2026-07-28 (sessionless, multi-round-trip elicitation) is not served yet; a
// client that asks for it is answered with 2025-11-25 (or falls back on its own).
var mcpProtocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}

// mcpToolName is what MCP allows as a tool name. A static agent id outside it is not
// served as a tool (logged at startup).
var mcpToolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// Meta keys the face reads and writes (docs/mcp.md).
const (
	// mcpMetaRequestID in a tools/call's _meta is the task's idempotency key
	// (StartTaskRequest.request_id): a call repeated with the same one, from any
	// session of the same tenant, attaches to the task the first one started.
	mcpMetaRequestID = "agentplane/request_id"
	// mcpMetaTaskID and mcpMetaState in a result's _meta name the task and its state.
	mcpMetaTaskID = "agentplane/task_id"
	mcpMetaState  = "agentplane/state"
)

// mcpFace is the MCP server face.
type mcpFace struct {
	s       *Server
	server  *mcp.Server
	handler *mcp.StreamableHTTPHandler
	// tools are the served agents, by tool name.
	tools map[string]*mcpTool

	mu sync.Mutex
	// opening counts sessions being created (an initialize in progress), which
	// server.Sessions() may not list yet.
	opening int
	// sessions are the open sessions by id.
	sessions map[string]*mcpSession

	m mcpMetrics
}

// mcpSession is what the face keeps of an open session.
type mcpSession struct {
	// owner is the principal that opened it; no other may use it.
	owner string
	// last is when its last request began or ended; posts counts its POSTs in
	// progress. A session with none for mcp.session_idle_timeout is closed.
	last  time.Time
	posts int
	// calls are its tool calls in progress, each with the function that detaches it
	// from its task (ends the call, not the task) when the session closes.
	calls map[*mcpCall]context.CancelCauseFunc
}

// errMCPSessionClosed ends the calls of a session that closes (DELETE or idle): the
// SDK waits for a session's calls to return before it closes it, and the calls follow
// durable tasks that may run for days. Their tasks go on.
var errMCPSessionClosed = errors.New("the MCP session closed")

// mcpTool is one served agent.
type mcpTool struct {
	agentID string
	tool    *mcp.Tool
	// input is the tool's input schema as the spec validator reads it.
	input *structpb.Struct
	// structured: the agent declares an object output_schema, which is the tool's
	// outputSchema, so structuredContent is the task's structured output itself.
	structured bool
}

type mcpMetrics struct {
	sessions prometheus.GaugeFunc
	refused  *prometheus.CounterVec
	calls    *prometheus.CounterVec
	inflight prometheus.Gauge
}

// MCP refusal reasons (the reason label of agentplane_mcp_refused_total).
const (
	mcpRefusedUnauthenticated   = "unauthenticated"
	mcpRefusedRole              = "role"
	mcpRefusedSession           = "session_owner"
	mcpRefusedSessions          = "max_sessions"
	mcpRefusedPrincipalSessions = "max_sessions_per_principal"
	mcpRefusedCalls             = "max_calls_per_session"
)

// newMCP builds the face over the static agent table.
func (s *Server) newMCP() (*mcpFace, error) {
	f := &mcpFace{s: s, tools: map[string]*mcpTool{}, sessions: map[string]*mcpSession{}}
	f.server = mcp.NewServer(&mcp.Implementation{Name: "agentplane", Title: "agentplane control plane", Version: version.String()},
		&mcp.ServerOptions{
			Instructions: "Each tool is an agent of this agentplane deployment. A call starts a durable task and returns its output; " +
				"progress notifications carry the task's messages. Tool calls the agent makes that need a person's approval wait " +
				"for a reviewer in the agentplane inbox: they cannot be approved from here.",
			Logger:                    s.log.With("component", "mcp"),
			Capabilities:              &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
			SupportedProtocolVersions: mcpProtocolVersions,
			PageSize:                  100,
		})
	ids := make([]string, 0, len(s.domain.static))
	for id := range s.domain.static {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if !mcpToolName.MatchString(id) {
			s.log.Warn("static agent not served over MCP: its id is not a valid MCP tool name (letters, digits, '_', '-', '.', at most 128)",
				"agent_id", id)
			continue
		}
		t, err := newMCPTool(id, s.domain.static[id])
		if err != nil {
			return nil, fmt.Errorf("mcp: static agent %q: %w", id, err)
		}
		f.tools[t.tool.Name] = t
		f.server.AddTool(t.tool, f.callTool(t))
	}
	f.server.AddReceivingMiddleware(f.limitCalls)

	f.m = mcpMetrics{
		sessions: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "agentplane", Name: "mcp_sessions",
			Help: "MCP sessions open on /mcp.",
		}, func() float64 { return float64(f.sessionCount()) }),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "agentplane", Name: "mcp_refused_total",
			Help: "MCP requests refused before any tool ran: no or a bad credential, a principal without the user role, a session of another principal, the session limits, the per-session call limit; by reason.",
		}, []string{"reason"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "agentplane", Name: "mcp_tool_calls_total",
			Help: "MCP tool calls ended, by outcome: completed, failed, canceled (the task), input_required (returned waiting for input the client could not give), error (the call could not start or follow its task), client_canceled (notifications/cancelled), session_closed (the session ended first; the task goes on).",
		}, []string{"outcome"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "agentplane", Name: "mcp_tool_calls_inflight",
			Help: "MCP tool calls in progress.",
		}),
	}
	s.metrics.registry.MustRegister(f.m.sessions, f.m.refused, f.m.calls, f.m.inflight)

	f.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.server }, &mcp.StreamableHTTPOptions{
		Logger: s.log.With("component", "mcp"),
		// No SessionTimeout: the SDK's would wait forever on a call whose client went
		// away (it closes a session once its calls return); reap closes idle sessions.
		// The HTTP API's body limit; a task's input is bounded again by StartTask.
		MaxRequestBodyBytes: s.maxHTTPBody(),
		// httpGuard already refuses every Host it does not serve (421) and writes from
		// other origins (403) on the whole listener, which is what MCP's DNS-rebinding
		// guidance asks for; the SDK's own check (a loopback listener answers only
		// loopback Host names) would refuse the names an operator lists in
		// http.allowed_hosts for a proxy in front.
		DisableLocalhostProtection: true,
	})
	return f, nil
}

// newMCPTool describes agent id as a tool: its arguments are the user's message and,
// when the agent declares deps_schema, the data it describes.
func newMCPTool(id string, a *agentplanev1.AgentSpec) (*mcpTool, error) {
	props := map[string]any{
		"input": map[string]any{"type": "string", "minLength": 1, "description": "The message to the agent: what to do."},
	}
	if deps := a.GetDepsSchema().GetSchema(); deps != nil {
		d := deps.AsMap()
		if _, ok := d["description"]; !ok {
			d["description"] = "Structured data for the agent (its deps_schema), sent with the message as a data part."
		}
		props["data"] = d
	}
	in := map[string]any{"type": "object", "properties": props, "required": []any{"input"}, "additionalProperties": false}
	input, err := structpb.NewStruct(in)
	if err != nil {
		return nil, err
	}
	title := a.GetName()
	desc := fmt.Sprintf("Runs the agentplane agent %q as a durable task and returns its answer.", id)
	if title != "" && title != id {
		desc = fmt.Sprintf("Runs the agentplane agent %q (%s) as a durable task and returns its answer.", id, title)
	}
	desc += " Calls it makes to gated tools wait for a person's approval in the agentplane inbox."
	t := &mcpTool{agentID: id, input: input, tool: &mcp.Tool{Name: id, Title: title, Description: desc, InputSchema: in}}
	if out := a.GetOutputSchema().GetJsonSchema().GetSchema(); out != nil && out.GetFields()["type"].GetStringValue() == "object" {
		t.tool.OutputSchema = out.AsMap()
		t.structured = true
	}
	return t, nil
}

// mcpCaller is who makes the requests of a session: the principal, and what the
// in-process API needs to authenticate it again (its authorization header values, its
// verified client certificate).
type mcpCaller struct {
	p             auth.Principal
	authorization []string
	tls           *tls.ConnectionState
}

// mcpCallerCtx is the context key of the caller. The SDK hands a session's handlers
// the context of the request that opened the session (its values, not its
// cancellation), so the caller set there is the session's.
type mcpCallerCtx struct{}

// ServeHTTP authenticates the request, binds a session to the principal that opened it
// (a request of another principal on it is refused), applies the session limit and
// hands the request to the SDK. Every request is authenticated again.
func (f *mcpFace) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := f.s
	p, err := s.guard.AuthenticateHTTP(r)
	if err != nil {
		f.refuse(w, r, http.StatusUnauthorized, mcpRefusedUnauthenticated, "MCP needs a bearer token (Authorization: Bearer ...) or a client certificate: "+grpcMessage(err))
		return
	}
	if !p.Has(auth.RoleUser) {
		f.refuse(w, r, http.StatusForbidden, mcpRefusedRole, "MCP tool calls start tasks, which needs the user role; principal "+quoteHost(p.Subject)+" lacks it")
		return
	}
	who := p.Via + "/" + p.Subject + "@" + p.Tenant
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
		f.mu.Lock()
		sess := f.sessions[sid]
		if sess != nil && sess.owner != who {
			f.mu.Unlock()
			f.refuse(w, r, http.StatusForbidden, mcpRefusedSession, "this MCP session belongs to another principal")
			return
		}
		if sess == nil {
			f.mu.Unlock()
			// Ended, or never ours: MCP clients start a new session on 404.
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		sess.last = time.Now()
		if r.Method == http.MethodPost {
			sess.posts++
		}
		f.mu.Unlock()
		if r.Method == http.MethodDelete {
			f.detach(sid)
		}
		sw := &statusCapture{ResponseWriter: w}
		f.handler.ServeHTTP(sw, r)
		f.mu.Lock()
		sess.last = time.Now()
		if r.Method == http.MethodPost {
			sess.posts--
		}
		if r.Method == http.MethodDelete && sw.code/100 == 2 {
			// Closed: the SDK drops it from its own list a little later.
			delete(f.sessions, sid)
		}
		f.mu.Unlock()
		return
	}
	if r.Method != http.MethodPost {
		f.handler.ServeHTTP(w, r) // the SDK answers: a session id is needed
		return
	}

	// A new session. Counting those being opened keeps concurrent initializes from
	// passing the limit together; the count errs on the side of refusing.
	f.mu.Lock()
	f.forgetClosedLocked()
	if f.opening+len(f.sessions) >= s.cfg.MCP.MaxSessions {
		f.mu.Unlock()
		w.Header().Set("Retry-After", "10")
		f.refuse(w, r, http.StatusServiceUnavailable, mcpRefusedSessions,
			"this control plane has "+strconv.Itoa(s.cfg.MCP.MaxSessions)+" MCP sessions open (mcp.max_sessions); close one or retry later")
		return
	}
	if s.cfg.Auth.RequirePrincipal {
		mine := 0
		for _, sess := range f.sessions {
			if sess.owner == who {
				mine++
			}
		}
		if mine >= s.cfg.MCP.MaxSessionsPerPrincipal {
			f.mu.Unlock()
			w.Header().Set("Retry-After", "10")
			f.refuse(w, r, http.StatusTooManyRequests, mcpRefusedPrincipalSessions,
				"principal "+quoteHost(p.Subject)+" has "+strconv.Itoa(mine)+" MCP sessions open (mcp.max_sessions_per_principal); close one (DELETE) or retry later")
			return
		}
	}
	f.opening++
	f.mu.Unlock()
	caller := &mcpCaller{p: p, authorization: r.Header.Values("Authorization"), tls: r.TLS}
	r = r.WithContext(context.WithValue(r.Context(), mcpCallerCtx{}, caller))
	// The session is recorded before its id reaches the client, so that no request
	// naming it comes before its owner is known.
	cw := &sessionCapture{ResponseWriter: w, opened: func(sid string) {
		f.mu.Lock()
		if f.sessions[sid] == nil {
			f.sessions[sid] = &mcpSession{owner: who, last: time.Now(), calls: map[*mcpCall]context.CancelCauseFunc{}}
		}
		f.mu.Unlock()
	}}
	f.handler.ServeHTTP(cw, r)
	f.mu.Lock()
	f.opening--
	f.mu.Unlock()
}

// forgetClosedLocked drops the sessions the SDK has closed. The caller holds f.mu.
func (f *mcpFace) forgetClosedLocked() {
	open := map[string]bool{}
	for ss := range f.server.Sessions() {
		open[ss.ID()] = true
	}
	for sid := range f.sessions {
		if !open[sid] {
			delete(f.sessions, sid)
		}
	}
}

// detach ends the calls of session sid (not their tasks).
func (f *mcpFace) detach(sid string) {
	f.mu.Lock()
	var cancels []context.CancelCauseFunc
	if sess := f.sessions[sid]; sess != nil {
		for _, cancel := range sess.calls {
			cancels = append(cancels, cancel)
		}
	}
	f.mu.Unlock()
	for _, cancel := range cancels {
		cancel(errMCPSessionClosed)
	}
}

// closeAll ends every session when the server shuts down: their calls return (their
// tasks go on) and their event streams end, so that the HTTP server's graceful
// shutdown does not wait on them.
func (f *mcpFace) closeAll() {
	f.mu.Lock()
	sids := make([]string, 0, len(f.sessions))
	for sid := range f.sessions {
		sids = append(sids, sid)
	}
	f.mu.Unlock()
	for _, sid := range sids {
		f.detach(sid)
	}
	for ss := range f.server.Sessions() {
		go func() { _ = ss.Close() }()
	}
}

// reap closes the sessions idle for mcp.session_idle_timeout (no request, none in
// progress) and forgets those the SDK has closed, until ctx ends.
func (f *mcpFace) reap(ctx context.Context) {
	timeout := f.s.cfg.MCP.SessionIdleTimeout.D()
	tick := time.NewTicker(min(timeout/4, time.Minute))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		f.reapOnce(time.Now().Add(-timeout))
	}
}

// reapOnce closes the sessions idle since idleSince.
func (f *mcpFace) reapOnce(idleSince time.Time) {
	open := map[string]*mcp.ServerSession{}
	for ss := range f.server.Sessions() {
		open[ss.ID()] = ss
	}
	var idle []string
	f.mu.Lock()
	for sid, sess := range f.sessions {
		switch {
		case open[sid] == nil:
			delete(f.sessions, sid)
		case sess.posts == 0 && sess.last.Before(idleSince):
			idle = append(idle, sid)
		}
	}
	f.mu.Unlock()
	f.mu.Lock()
	for _, sid := range idle {
		delete(f.sessions, sid)
	}
	f.mu.Unlock()
	for _, sid := range idle {
		f.s.log.Info("mcp session closed after mcp.session_idle_timeout without a request", "session", sid)
		f.detach(sid)
		go func() { _ = open[sid].Close() }()
	}
}

// sessionCapture hands opened the session id the SDK assigns, as the response's
// header is written.
type sessionCapture struct {
	http.ResponseWriter
	opened func(sid string)
	done   bool
}

func (c *sessionCapture) capture() {
	if !c.done {
		c.done = true
		if sid := c.Header().Get("Mcp-Session-Id"); sid != "" {
			c.opened(sid)
		}
	}
}

func (c *sessionCapture) WriteHeader(code int) {
	c.capture()
	c.ResponseWriter.WriteHeader(code)
}

func (c *sessionCapture) Write(b []byte) (int, error) {
	c.capture()
	return c.ResponseWriter.Write(b)
}

// statusCapture notes the status of a response.
type statusCapture struct {
	http.ResponseWriter
	code int
}

func (c *statusCapture) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *statusCapture) Write(b []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	return c.ResponseWriter.Write(b)
}

// Flush passes flushes on: the SDK streams server-sent events.
func (c *statusCapture) Flush() {
	if fl, ok := c.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (c *statusCapture) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// Flush passes flushes on: the SDK streams server-sent events.
func (c *sessionCapture) Flush() {
	c.capture()
	if fl, ok := c.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (c *sessionCapture) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (f *mcpFace) sessionCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sessions)
}

func (f *mcpFace) refuse(w http.ResponseWriter, r *http.Request, code int, reason, msg string) {
	f.m.refused.WithLabelValues(reason).Inc()
	f.s.log.Warn("mcp request refused", "reason", reason, "method", r.Method, "remote", r.RemoteAddr)
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agentplane"`)
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32000, "message": msg}})
	_, _ = w.Write(body)
}

// limitCalls is the receiving middleware that bounds the tools/call in progress per
// session (mcp.max_calls_per_session).
func (f *mcpFace) limitCalls(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		ss, _ := req.GetSession().(*mcp.ServerSession)
		id := ""
		if ss != nil {
			id = ss.ID()
		}
		max := f.s.cfg.MCP.MaxCallsPerSession
		f.mu.Lock()
		sess := f.sessions[id]
		if sess == nil { // ServeHTTP records every session before its id is known
			f.mu.Unlock()
			return nil, &jsonrpc.Error{Code: -32000, Message: "unknown session"}
		}
		if len(sess.calls) >= max {
			f.mu.Unlock()
			f.m.refused.WithLabelValues(mcpRefusedCalls).Inc()
			f.s.log.Warn("mcp tool call refused", "reason", mcpRefusedCalls, "session", id, "max", max)
			return nil, &jsonrpc.Error{Code: -32000, Message: fmt.Sprintf("this session has %d tool calls in progress (mcp.max_calls_per_session); wait for one to end", max)}
		}
		ctx, cancel := context.WithCancelCause(ctx)
		key := new(mcpCall)
		sess.calls[key] = cancel
		f.mu.Unlock()
		f.m.inflight.Inc()
		defer func() {
			f.m.inflight.Dec()
			f.mu.Lock()
			delete(sess.calls, key)
			f.mu.Unlock()
			cancel(nil)
		}()
		return next(ctx, method, req)
	}
}

// outgoing is ctx carrying c's credentials to the in-process API: the authorization
// header as the client sent it, and a fresh TLS handoff ticket for a verified client
// certificate (tickets are single-use: one per call).
func (f *mcpFace) outgoing(ctx context.Context, c *mcpCaller) context.Context {
	md := metadata.MD{}
	if len(c.authorization) > 0 {
		md["authorization"] = c.authorization
	}
	if t := f.s.tls2peer.ticket(c.tls); t != nil {
		md = metadata.Join(md, t)
	}
	return metadata.NewOutgoingContext(ctx, md)
}
