package a2a

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

// Agent is one agent the face serves: a static agent of the deployment.
type Agent struct {
	// ID is the static agent id (spec.static_agents).
	ID string
	// Name and Description go into the card; Name defaults to the spec's name, then
	// the id.
	Name, Description string
	// Queue is the run queue its tasks start on ("" = default).
	Queue string
	// ClientTools are the spec's function tools: the caller runs them (the extended
	// card lists them).
	ClientTools []*agentplanev1.FunctionTool
	// InterruptPolicy is the policy its tasks start with when the SendMessage's
	// metadata sets none (a2a.agents.<id>.interrupt_policy); nil for none.
	InterruptPolicy *agentplanev1.InterruptPolicy
}

// Options configure the face.
type Options struct {
	// Conn reaches the API in process (the gateway's connection): every A2A call is
	// one or more calls of the public API as the caller, so authentication, roles,
	// tenants and per-principal limits are the API's.
	Conn grpc.ClientConnInterface
	// Annotate adds metadata for a request (the HTTPS caller's TLS handoff ticket).
	Annotate func(context.Context, *http.Request) metadata.MD
	// Agents served, and the one WellKnownCard describes ("" = none).
	Agents       []Agent
	DefaultAgent string
	// PublicURL is the base URL the cards name (scheme://host[:port][/prefix]); empty
	// takes the request's scheme and Host.
	PublicURL string
	// MultiTenant: callers authenticate (bearer tokens; MTLS when client certificates
	// are configured). It also turns the extended card on (it needs authentication).
	MultiTenant, Bearer, MTLS bool
	// MaxBodyBytes bounds a request body.
	MaxBodyBytes int64
	// MaxStreams bounds the SSE streams open at once (the API bounds each principal's
	// watches as well).
	MaxStreams int
	// BlockingTimeout bounds how long a blocking SendMessage waits.
	BlockingTimeout time.Duration
	// Push keeps tasks' push configs; nil turns push notifications off.
	Push PushStore
	// Version is the server's version, the cards' version.
	Version    string
	Log        *slog.Logger
	Registerer prometheus.Registerer
	// Stopping ends open streams when it is done (the server shutting down).
	Stopping context.Context
}

// Handler serves the A2A face.
type Handler struct {
	o       Options
	agents  map[string]*Agent
	tasks   agentplanev1.TaskServiceClient
	hitl    agentplanev1.HitlServiceClient
	caps    agentplanev1.CapabilityServiceClient
	streams chan struct{}
	m       *metrics
}

// WellKnownCard is where the default agent's card is served (and, under
// /a2a/AGENT_ID, every agent's).
const WellKnownCard = "/.well-known/agent-card.json"

// ProtocolVersions are the A2A versions served (the A2A-Version values accepted, see
// version), newest first.
var ProtocolVersions = []string{"1.0", "0.3"}

// Paths.
const (
	wellKnownCard = WellKnownCard
	prefix        = "/a2a/"
	restSegment   = "/rest"
)

// New returns the face's handler; mount it at /a2a/ and /.well-known/agent-card.json.
func New(o Options) (*Handler, error) {
	if o.Conn == nil {
		return nil, errors.New("a2a: no connection")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.MaxStreams < 1 {
		o.MaxStreams = 1
	}
	if o.BlockingTimeout <= 0 {
		o.BlockingTimeout = 30 * time.Second
	}
	h := &Handler{o: o, agents: map[string]*Agent{}, tasks: agentplanev1.NewTaskServiceClient(o.Conn),
		hitl: agentplanev1.NewHitlServiceClient(o.Conn), caps: agentplanev1.NewCapabilityServiceClient(o.Conn),
		streams: make(chan struct{}, o.MaxStreams)}
	for i := range o.Agents {
		a := &o.Agents[i]
		h.agents[a.ID] = a
	}
	if o.DefaultAgent != "" && h.agents[o.DefaultAgent] == nil {
		return nil, errors.New("a2a: default agent " + strconv.Quote(o.DefaultAgent) + " is not served")
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	h.m = m
	return h, nil
}

// PushNotifications reports whether push notifications are served (Options.Push).
func (h *Handler) PushNotifications() bool { return h.o.Push != nil }

// DefaultAgent is the agent WellKnownCard describes, "" for none.
func (h *Handler) DefaultAgent() string { return h.o.DefaultAgent }

// ServeHTTP routes: the default card, /a2a/{agent}/.well-known/agent-card.json,
// /a2a/{agent} (JSON-RPC) and /a2a/{agent}/rest/... (HTTP+JSON).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if path == wellKnownCard {
		ag := h.agents[h.o.DefaultAgent]
		if ag == nil {
			h.plainError(w, http.StatusNotFound, "this deployment names no default A2A agent (a2a.default_agent); cards are at /a2a/AGENT_ID"+wellKnownCard)
			return
		}
		h.serveCard(w, r, ag)
		return
	}
	rest, ok := strings.CutPrefix(path, prefix)
	if !ok {
		h.plainError(w, http.StatusNotFound, "not found")
		return
	}
	id, sub, _ := strings.Cut(rest, "/")
	if sub != "" {
		sub = "/" + sub
	}
	ag := h.agents[id]
	if ag == nil {
		h.m.requests.WithLabelValues("none", "unknown_agent", "not_found").Inc()
		h.plainError(w, http.StatusNotFound, "no A2A agent "+strconv.Quote(truncate(id, 64))+" is served here")
		return
	}
	switch {
	case sub == wellKnownCard:
		h.serveCard(w, r, ag)
	case sub == "" || sub == "/":
		h.serveJSONRPC(w, r, ag)
	case sub == restSegment || strings.HasPrefix(sub, restSegment+"/"):
		h.serveREST(w, r, ag, strings.TrimPrefix(sub, restSegment))
	default:
		h.plainError(w, http.StatusNotFound, "not found")
	}
}

func (h *Handler) plainError(w http.ResponseWriter, code int, msg string) {
	e := &rpcError{http: code, status: "NOT_FOUND", msg: msg}
	writeJSON(w, code, map[string]any{"error": restError(e)})
}

func truncate(s string, n int) string {
	if len(s) > n {
		s = s[:n] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":{"code":500,"status":"INTERNAL","message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// callCtx carries the caller's credentials to the in-process API: the Authorization
// header, the TLS handoff ticket of an mTLS caller, and the W3C trace context. Nothing
// else from the request reaches the API's metadata.
func (h *Handler) callCtx(r *http.Request) context.Context {
	md := metadata.MD{}
	if v := r.Header.Values("Authorization"); len(v) > 0 {
		md.Set("authorization", v...)
	}
	for _, k := range []string{"traceparent", "tracestate"} {
		if v := r.Header.Get(k); v != "" {
			md.Set(k, v)
		}
	}
	if h.o.Annotate != nil {
		md = metadata.Join(md, h.o.Annotate(r.Context(), r))
	}
	return metadata.NewOutgoingContext(r.Context(), md)
}

// baseURL is where this agent's interfaces are.
func (h *Handler) baseURL(r *http.Request) string {
	if h.o.PublicURL != "" {
		return strings.TrimRight(h.o.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// hashID derives a bounded, deterministic id from caller-chosen parts.
func hashID(kind string, parts ...string) string {
	sum := sha256.New()
	sum.Write([]byte(kind))
	for _, p := range parts {
		sum.Write([]byte{0})
		sum.Write([]byte(p))
	}
	return hex.EncodeToString(sum.Sum(nil))[:32]
}

// agentOf is the agent an agentplane task belongs to, for the A2A face.
func agentOf(t *agentplanev1.Task) string {
	if a := t.GetLabels()[labelAgent]; a != "" {
		return a
	}
	return t.GetAgentId()
}

// Bounds on caller-chosen A2A ids.
const (
	maxIDLen   = 128
	maxHistory = 200 // messages a task's history returns at most
)

func validID(field, s string) *rpcError {
	if len(s) > maxIDLen {
		return invalidParams(field + " is longer than 128 bytes")
	}
	for _, c := range s {
		if c < 0x21 || c == 0x7f {
			return invalidParams(field + " may not contain spaces or control characters")
		}
	}
	return nil
}

// getTask reads a task of this agent; any other is TaskNotFound.
func (h *Handler) getTask(ctx context.Context, ag *Agent, id string) (*agentplanev1.Task, *rpcError) {
	if id == "" {
		return nil, invalidParams("id is required")
	}
	if e := validID("id", id); e != nil {
		return nil, taskNotFound()
	}
	resp, err := h.tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: id, View: agentplanev1.TaskView_TASK_VIEW_BASIC})
	if err != nil {
		return nil, fromAPI(err)
	}
	if agentOf(resp.GetTask()) != ag.ID {
		return nil, taskNotFound()
	}
	return resp.GetTask(), nil
}

// pendingOf reads what a paused task waits for. Failing to read it shows the task as
// working with a generic message (never as input-required on a guess).
func (h *Handler) pendingOf(ctx context.Context, t *agentplanev1.Task) pending {
	if t.GetState() != agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED {
		return pending{}
	}
	resp, err := h.hitl.ListInterrupts(ctx, &agentplanev1.ListInterruptsRequest{TaskId: t.GetTaskId(), PageSize: 100,
		Kinds: []agentplanev1.InterruptKind{agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL,
			agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE, agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED,
			agentplanev1.InterruptKind_INTERRUPT_KIND_MODEL_CALL_APPROVAL}})
	if err != nil {
		h.o.Log.Warn("a2a: reading a paused task's interrupts failed", "task_id", t.GetTaskId(), "err", err)
		return pending{}
	}
	return classify(resp.GetInterrupts())
}

// history reads the task's messages from its log, the last n (n < 0: the input
// message alone, which the task holds).
func (h *Handler) history(ctx context.Context, t *agentplanev1.Task, n int) ([]message, *rpcError) {
	id, cx := t.GetTaskId(), contextOf(t)
	if n == 0 {
		return nil, nil
	}
	if n < 0 {
		if in := t.GetInput(); in != nil {
			return []message{*outboundMessage(in, id, cx)}, nil
		}
		return nil, nil
	}
	n = min(n, maxHistory)
	// Read a window at the end of the log, widened until it holds n messages or is
	// the whole log, so that a long task costs what its last messages cost.
	last := t.GetLastSequence()
	for window := int64(8 * n); ; window *= 4 {
		after := max(0, last-window)
		ring, err := h.readMessages(ctx, t, after, last, n)
		if err != nil {
			return nil, err
		}
		if len(ring) >= n || after == 0 {
			return ring, nil
		}
	}
}

// readMessages reads the messages of events (after, until] of the log, keeping the
// last n.
func (h *Handler) readMessages(ctx context.Context, t *agentplanev1.Task, after, until int64, n int) ([]message, *rpcError) {
	id, cx := t.GetTaskId(), contextOf(t)
	var ring []message
	token := ""
	for {
		resp, err := h.tasks.ListTaskEvents(ctx, &agentplanev1.ListTaskEventsRequest{TaskId: id, PageSize: 500, PageToken: token, AfterSequence: after})
		if err != nil {
			return nil, fromAPI(err)
		}
		for _, ev := range resp.GetEvents() {
			if ev.GetSequence() > until {
				return ring, nil
			}
			var m *agentplanev1.Message
			switch p := ev.GetPayload().(type) {
			case *agentplanev1.TaskEvent_Submitted:
				m = p.Submitted.GetInput()
			case *agentplanev1.TaskEvent_Message:
				m = p.Message
			}
			if m == nil || m.GetRole() == agentplanev1.MessageRole_MESSAGE_ROLE_SYSTEM || len(m.GetParts()) == 0 {
				continue
			}
			ring = append(ring, *outboundMessage(m, id, cx))
			if len(ring) > n {
				ring = ring[1:]
			}
		}
		token = resp.GetNextPageToken()
		if token == "" {
			return ring, nil
		}
	}
}

// view is an A2A task with what the request asked for.
func (h *Handler) view(ctx context.Context, t *agentplanev1.Task, historyLength *int32, artifacts bool) (task, *rpcError) {
	n := -1
	if historyLength != nil {
		n = int(*historyLength)
		if n < 0 {
			return task{}, invalidParams("historyLength may not be negative")
		}
	}
	hist, err := h.history(ctx, t, n)
	if err != nil {
		return task{}, err
	}
	return toTask(t, h.pendingOf(ctx, t), hist, artifacts), nil
}

// submit starts a task for a message, or continues the task it names. A retry of the
// same message (same messageId) starts nothing new: the message id is the idempotency
// key of StartTask (per tenant and agent) and of ContinueTask (per task).
func (h *Handler) submit(ctx context.Context, ag *Agent, req *sendRequest) (*agentplanev1.Task, *rpcError) {
	if req.Tenant != "" {
		return nil, invalidParams("tenant: this server takes the tenant from your credentials; leave tenant empty")
	}
	m := req.Message
	if m == nil {
		return nil, invalidParams("message is required")
	}
	if m.MessageID == "" {
		return nil, invalidParams("message.messageId is required")
	}
	if e := validID("message.messageId", m.MessageID); e != nil {
		return nil, e
	}
	if m.Role != roleUser && m.Role != "" {
		return nil, invalidParams("message.role must be ROLE_USER")
	}
	if len(m.Parts) == 0 {
		return nil, invalidParams("message.parts: at least one part is required")
	}
	if c := req.Configuration; c != nil && c.PushConfig != nil {
		if h.o.Push == nil {
			return nil, pushNotSupported()
		}
		if e := h.checkPush(c.PushConfig); e != nil {
			return nil, e
		}
	}
	if c := req.Configuration; c != nil && len(c.AcceptedOutputModes) > 0 && !acceptsOutput(c.AcceptedOutputModes) {
		return nil, newErr(codeContentType, "this agent answers in text/plain and application/json; acceptedOutputModes names neither")
	}
	for i, p := range m.Parts {
		if p.MediaType != "" && p.Text == nil && p.Data == nil && len(p.MediaType) > 255 {
			return nil, invalidParams("message.parts[" + strconv.Itoa(i) + "].mediaType is too long")
		}
	}
	if m.ContextID != "" {
		if e := validID("message.contextId", m.ContextID); e != nil {
			return nil, e
		}
	}
	if m.TaskID != "" {
		return h.continueTask(ctx, ag, m)
	}
	input, err := inboundMessage(m)
	if err != nil {
		return nil, invalidParams(err.Error())
	}
	cx := m.ContextID
	if cx == "" {
		cx = "ctx-" + hashID("context", ag.ID, m.MessageID)
	}
	start := &agentplanev1.StartTaskRequest{
		RequestId: "a2a-" + hashID("start", ag.ID, m.MessageID),
		Source:    &agentplanev1.StartTaskRequest_AgentId{AgentId: ag.ID},
		Input:     input,
		SessionId: cx,
		Labels:    map[string]string{labelAgent: ag.ID, labelContext: cx},
		Queue:     ag.Queue,
	}
	if ag.InterruptPolicy != nil {
		start.InterruptPolicy = proto.CloneOf(ag.InterruptPolicy)
	}
	if raw, ok := req.Metadata["agentplane.interruptPolicy"]; ok {
		pol, perr := policyFrom(raw)
		if perr != nil {
			return nil, perr
		}
		start.InterruptPolicy = pol
	}
	resp, serr := h.tasks.StartTask(ctx, start)
	if serr != nil {
		return nil, fromAPI(serr)
	}
	if !resp.GetCreated() {
		h.m.retries.Inc()
	}
	return resp.GetTask(), nil
}

func acceptsOutput(modes []string) bool {
	for _, m := range modes {
		switch strings.ToLower(strings.TrimSpace(m)) {
		case "text/plain", "application/json", "text/*", "*/*", "text", "data":
			return true
		}
	}
	return false
}

// continueTask: a message naming a task waiting for input continues it: data parts
// {"callId", "result", "isError"} answer pending client tool calls, anything else is
// the next chat message.
func (h *Handler) continueTask(ctx context.Context, ag *Agent, m *message) (*agentplanev1.Task, *rpcError) {
	t, rerr := h.getTask(ctx, ag, m.TaskID)
	if rerr != nil {
		return nil, rerr
	}
	if m.ContextID != "" && m.ContextID != contextOf(t) {
		return nil, invalidParams("message.contextId is not the context of task " + t.GetTaskId())
	}
	req := &agentplanev1.ContinueTaskRequest{TaskId: t.GetTaskId(), RequestId: "a2a-" + hashID("continue", m.MessageID)}
	if outs, ok, err := toolOutputs(m); err != nil {
		return nil, err
	} else if ok {
		req.Input = &agentplanev1.ContinueTaskRequest_ToolOutputs{ToolOutputs: outs}
	} else {
		input, err := inboundMessage(m)
		if err != nil {
			return nil, invalidParams(err.Error())
		}
		req.Input = &agentplanev1.ContinueTaskRequest_Message{Message: input}
	}
	resp, err := h.tasks.ContinueTask(ctx, req)
	if err != nil {
		e := fromAPI(err)
		if e.code == codeUnsupportedOp && terminal(t) {
			e.msg = "task " + t.GetTaskId() + " has ended; it takes no more messages"
		}
		return nil, e
	}
	return resp.GetTask(), nil
}

func terminal(t *agentplanev1.Task) bool {
	switch t.GetState() {
	case agentplanev1.TaskState_TASK_STATE_COMPLETED, agentplanev1.TaskState_TASK_STATE_FAILED, agentplanev1.TaskState_TASK_STATE_CANCELED:
		return true
	}
	return false
}

// toolOutputs reads a message whose parts are all tool results.
func toolOutputs(m *message) (*agentplanev1.ToolOutputs, bool, *rpcError) {
	outs := &agentplanev1.ToolOutputs{}
	for _, p := range m.Parts {
		if p.Data == nil {
			return nil, false, nil
		}
		var d struct {
			CallID  string          `json:"callId"`
			Result  json.RawMessage `json:"result"`
			IsError bool            `json:"isError"`
		}
		if err := json.Unmarshal(p.Data, &d); err != nil || d.CallID == "" {
			return nil, false, nil
		}
		v := &structValue{}
		if len(d.Result) > 0 {
			if err := v.UnmarshalJSON(d.Result); err != nil {
				return nil, false, invalidParams("tool result for " + d.CallID + ": " + err.Error())
			}
		}
		outs.Outputs = append(outs.Outputs, &agentplanev1.ToolOutput{CallId: d.CallID, Result: v.v, IsError: d.IsError})
	}
	return outs, true, nil
}

// serveCard answers an agent card. It is public, like every discovery document:
// in a multi-tenant deployment it says how to authenticate and nothing about tenants.
func (h *Handler) serveCard(w http.ResponseWriter, r *http.Request, ag *Agent) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		h.plainError(w, http.StatusMethodNotAllowed, "an agent card is read with GET")
		return
	}
	h.m.requests.WithLabelValues("card", "GetAgentCard", "ok").Inc()
	card := h.card(r, ag, false)
	b, _ := json.Marshal(card)
	sum := sha256.Sum256(b)
	etag := `"` + hex.EncodeToString(sum[:8]) + `"`
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "public, max-age=300")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// clientToolsExtension names the extension of the extended card that lists the
// agent's client function tools.
const clientToolsExtension = "urn:agentplane:a2a:client-tools:v1"

func (h *Handler) card(r *http.Request, ag *Agent, extended bool) agentCard {
	base := h.baseURL(r) + prefix + url.PathEscape(ag.ID)
	name := ag.Name
	if name == "" {
		name = ag.ID
	}
	desc := ag.Description
	if desc == "" {
		desc = "The agentplane agent " + ag.ID + ": durable tasks, resumable streams, tool calls gated by human approval."
	}
	version := h.o.Version
	if version == "" {
		version = "0"
	}
	c := agentCard{
		Name: name, Description: desc, Version: version,
		SupportedInterfaces: []agentInterface{
			{URL: base, ProtocolBinding: "JSONRPC", ProtocolVersion: "1.0"},
			{URL: base + restSegment, ProtocolBinding: "HTTP+JSON", ProtocolVersion: "1.0"},
			{URL: base, ProtocolBinding: "JSONRPC", ProtocolVersion: "0.3"},
		},
		Provider:           &agentProvider{Organization: "agentplane", URL: h.baseURL(r)},
		Capabilities:       agentCapabilities{Streaming: true, PushNotifications: h.o.Push != nil, ExtendedAgentCard: h.o.MultiTenant},
		DefaultInputModes:  []string{"text/plain", "application/json"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills: []agentSkill{{ID: ag.ID, Name: name, Description: desc, Tags: []string{"agentplane"},
			InputModes: []string{"text/plain", "application/json"}, OutputModes: []string{"text/plain", "application/json"}}},
		ProtocolVersion: "0.3.0", URL: base, PreferredTransport: "JSONRPC",
		AdditionalInterfaces:              []legacyInterface{{URL: base, Transport: "JSONRPC"}},
		SupportsAuthenticatedExtendedCard: h.o.MultiTenant,
	}
	if h.o.MultiTenant {
		c.SecuritySchemes = map[string]securityScheme{}
		if h.o.Bearer {
			c.SecuritySchemes["bearer"] = securityScheme{HTTPAuth: &httpAuthScheme{Scheme: "Bearer", Description: "an agentplane bearer token (auth.tokens)"},
				Type: "http", Scheme: "Bearer", Description: "an agentplane bearer token (auth.tokens)"}
			c.SecurityRequirements = append(c.SecurityRequirements, securityRequirement{Schemes: map[string]stringList{"bearer": {List: []string{}}}})
			c.Security = append(c.Security, map[string][]string{"bearer": {}})
		}
		if h.o.MTLS {
			c.SecuritySchemes["mtls"] = securityScheme{MTLS: &mtlsScheme{Description: "a client certificate the deployment maps to a principal (auth.client_certs)"},
				Type: "mutualTLS", Description: "a client certificate the deployment maps to a principal (auth.client_certs)"}
			c.SecurityRequirements = append(c.SecurityRequirements, securityRequirement{Schemes: map[string]stringList{"mtls": {List: []string{}}}})
			c.Security = append(c.Security, map[string][]string{"mtls": {}})
		}
	}
	if extended && len(ag.ClientTools) > 0 {
		var tools []any
		for _, t := range ag.ClientTools {
			f := t.GetFunction()
			v := map[string]any{"name": f.GetName(), "description": f.GetDescription()}
			if p := f.GetParameters(); p != nil {
				v["parameters"] = p.AsMap()
			}
			tools = append(tools, v)
		}
		c.Capabilities.Extensions = append(c.Capabilities.Extensions, agentExtension{URI: clientToolsExtension,
			Description: "Function tools the caller runs: the task waits in input-required with the calls, and a message of data parts {callId, result, isError} answers them.",
			Params:      map[string]any{"tools": tools}})
	}
	return c
}

// extendedCard authenticates the caller (any API call does; GetCapabilities is the one
// every role may make) and answers the card with what only callers see.
func (h *Handler) extendedCard(ctx context.Context, r *http.Request, ag *Agent) (agentCard, *rpcError) {
	if !h.o.MultiTenant {
		return agentCard{}, newErr(codeUnsupportedOp, "this deployment has no authentication, so no extended card (capabilities.extendedAgentCard is false)")
	}
	if _, err := h.caps.GetCapabilities(ctx, &agentplanev1.GetCapabilitiesRequest{}); err != nil {
		return agentCard{}, fromAPI(err)
	}
	return h.card(r, ag, true), nil
}

// Request bodies.

// readBody reads a bounded body; a body over the bound is an error, never truncated.
func (h *Handler) readBody(r *http.Request) ([]byte, *rpcError) {
	limit := h.o.MaxBodyBytes
	if limit <= 0 {
		limit = 4 << 20
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &rpcError{code: codeInvalidRequest, http: http.StatusRequestEntityTooLarge, status: "INVALID_ARGUMENT", reason: reasonTooLarge, domain: apierr.Domain, msg: "request body over " + strconv.FormatInt(limit, 10) + " bytes"}
		}
		return nil, newErr(codeParseError, "reading the request body failed")
	}
	if int64(len(b)) > limit {
		return nil, &rpcError{code: codeInvalidRequest, http: http.StatusRequestEntityTooLarge, status: "INVALID_ARGUMENT", reason: reasonTooLarge, domain: apierr.Domain, msg: "request body over " + strconv.FormatInt(limit, 10) + " bytes"}
	}
	return b, nil
}

// decodeStrict decodes JSON into v; trailing data is an error.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// version checks the A2A-Version service parameter (header, or query parameter).
// Empty means 0.3 (§3.6.2).
func version(r *http.Request) (string, *rpcError) {
	v := strings.TrimSpace(r.Header.Get("A2A-Version"))
	if v == "" {
		v = r.URL.Query().Get("A2A-Version")
	}
	switch v {
	case "", "0.3", "0.3.0":
		return "0.3", nil
	case "1.0", "1", "1.0.0":
		return "1.0", nil
	}
	return "", newErr(codeVersionNotSupported, "A2A-Version "+strconv.Quote(truncate(v, 16))+" is not supported; this agent speaks 1.0 and 0.3")
}

// listTasks lists this agent's tasks: those started through the A2A face (by label),
// newest first.
func (h *Handler) listTasks(ctx context.Context, ag *Agent, req *listTasksRequest) (*listTasksResponse, *rpcError) {
	if req.Tenant != "" {
		return nil, invalidParams("tenant: this server takes the tenant from your credentials; leave tenant empty")
	}
	size := int32(50)
	if req.PageSize != nil {
		if *req.PageSize < 1 || *req.PageSize > 100 {
			return nil, invalidParams("pageSize must be between 1 and 100")
		}
		size = *req.PageSize
	}
	sel := []string{labelAgent + "=" + ag.ID}
	if req.ContextID != "" {
		if e := validID("contextId", req.ContextID); e != nil {
			return nil, e
		}
		sel = append(sel, labelContext+"="+req.ContextID)
	}
	lreq := &agentplanev1.ListTasksRequest{PageSize: size, PageToken: req.PageToken, LabelSelector: sel}
	var want string
	switch req.Status {
	case "", "TASK_STATE_UNSPECIFIED", "UNRECOGNIZED":
		// UNRECOGNIZED is what ts-proto writes for an enum left unset (@a2a-js/sdk
		// 1.3's listTasks without a status): no filter, as the client meant.
	case stateSubmitted:
		lreq.States = []agentplanev1.TaskState{agentplanev1.TaskState_TASK_STATE_SUBMITTED}
	case stateWorking:
		lreq.States = []agentplanev1.TaskState{agentplanev1.TaskState_TASK_STATE_WORKING, agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED}
		want = stateWorking
	case stateInputRequired:
		lreq.States = []agentplanev1.TaskState{agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED}
		want = stateInputRequired
	case stateCompleted:
		lreq.States = []agentplanev1.TaskState{agentplanev1.TaskState_TASK_STATE_COMPLETED}
	case stateCanceled:
		lreq.States = []agentplanev1.TaskState{agentplanev1.TaskState_TASK_STATE_CANCELED}
	case stateFailed, stateRejected:
		lreq.States = []agentplanev1.TaskState{agentplanev1.TaskState_TASK_STATE_FAILED}
		want = req.Status
	case stateAuthRequired:
		return &listTasksResponse{Tasks: []task{}, PageSize: size}, nil
	default:
		return nil, invalidParams("status: unknown task state " + strconv.Quote(truncate(req.Status, 40)))
	}
	var after time.Time
	if req.StatusTimestampAfter != "" {
		t, err := parseTime(req.StatusTimestampAfter)
		if err != nil {
			return nil, invalidParams("statusTimestampAfter: want an RFC 3339 time")
		}
		after = t
	}
	resp, err := h.tasks.ListTasks(ctx, lreq)
	if err != nil {
		return nil, fromAPI(err)
	}
	out := &listTasksResponse{Tasks: []task{}, NextPageToken: resp.GetNextPageToken(), PageSize: size}
	withArtifacts := req.IncludeArtifacts != nil && *req.IncludeArtifacts
	hl := req.HistoryLength
	if hl == nil {
		zero := int32(0)
		hl = &zero
	}
	for _, t := range resp.GetTasks() {
		if !after.IsZero() && !t.GetUpdateTime().AsTime().After(after) {
			continue
		}
		v, rerr := h.view(ctx, t, hl, withArtifacts)
		if rerr != nil {
			return nil, rerr
		}
		if want != "" && v.Status.State != want {
			continue
		}
		out.Tasks = append(out.Tasks, v)
	}
	// Newest first by creation: the API's order (A2A asks for the newest update first).
	out.TotalSize = int32(len(out.Tasks))
	return out, nil
}

func parseTime(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }

// cancel cancels a task of this agent.
func (h *Handler) cancel(ctx context.Context, ag *Agent, id string) (task, *rpcError) {
	t, rerr := h.getTask(ctx, ag, id)
	if rerr != nil {
		return task{}, rerr
	}
	if terminal(t) {
		if t.GetState() == agentplanev1.TaskState_TASK_STATE_CANCELED {
			return h.view(ctx, t, nil, true) // canceling twice has the effect of once
		}
		return task{}, newErr(codeTaskNotCancelable, "task "+t.GetTaskId()+" has ended ("+strings.ToLower(strings.TrimPrefix(t.GetState().String(), "TASK_STATE_"))+"); it cannot be canceled")
	}
	resp, err := h.tasks.CancelTask(ctx, &agentplanev1.CancelTaskRequest{TaskId: t.GetTaskId(), Reason: "canceled through A2A"})
	if err != nil {
		e := fromAPI(err)
		if e.code == codeUnsupportedOp {
			e = newErr(codeTaskNotCancelable, e.msg)
		}
		return task{}, e
	}
	return h.view(ctx, resp.GetTask(), nil, true)
}

// pushFromSend sets the push config a SendMessage names, for the task it started or
// continued; a retry of the message sets the same config again (its id derives from
// the message id unless the caller chose one).
func (h *Handler) pushFromSend(ctx context.Context, r *http.Request, ag *Agent, t *agentplanev1.Task, req *sendRequest, legacy bool) *rpcError {
	c := req.Configuration
	if c == nil || c.PushConfig == nil {
		return nil
	}
	in := *c.PushConfig
	if in.ID == "" {
		in.ID = "push-" + hashID("push", req.Message.MessageID)[:16]
	}
	version := "1.0"
	if legacy {
		version = "0.3"
	}
	_, e := h.setPush(ctx, r, ag, t.GetTaskId(), &in, version)
	if e != nil && e.code == codeUnsupportedOp {
		return nil // the task ended before its config was set: there is nothing left to notify
	}
	return e
}
