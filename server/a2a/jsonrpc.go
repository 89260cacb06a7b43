package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// methods maps JSON-RPC method names, 1.0's and 0.3's, to the 1.0 operation.
var methods = map[string]struct {
	op     string
	legacy bool
}{
	"SendMessage":                      {"SendMessage", false},
	"SendStreamingMessage":             {"SendStreamingMessage", false},
	"GetTask":                          {"GetTask", false},
	"ListTasks":                        {"ListTasks", false},
	"CancelTask":                       {"CancelTask", false},
	"SubscribeToTask":                  {"SubscribeToTask", false},
	"CreateTaskPushNotificationConfig": {"CreateTaskPushNotificationConfig", false},
	"GetTaskPushNotificationConfig":    {"GetTaskPushNotificationConfig", false},
	"ListTaskPushNotificationConfigs":  {"ListTaskPushNotificationConfigs", false},
	"DeleteTaskPushNotificationConfig": {"DeleteTaskPushNotificationConfig", false},
	"GetExtendedAgentCard":             {"GetExtendedAgentCard", false},

	"message/send":                        {"SendMessage", true},
	"message/stream":                      {"SendStreamingMessage", true},
	"tasks/get":                           {"GetTask", true},
	"tasks/list":                          {"ListTasks", true},
	"tasks/cancel":                        {"CancelTask", true},
	"tasks/resubscribe":                   {"SubscribeToTask", true},
	"tasks/pushNotificationConfig/set":    {"CreateTaskPushNotificationConfig", true},
	"tasks/pushNotificationConfig/get":    {"GetTaskPushNotificationConfig", true},
	"tasks/pushNotificationConfig/list":   {"ListTaskPushNotificationConfigs", true},
	"tasks/pushNotificationConfig/delete": {"DeleteTaskPushNotificationConfig", true},
	"agent/getAuthenticatedExtendedCard":  {"GetExtendedAgentCard", true},
}

type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

func jsonrpcError(id json.RawMessage, e *rpcError) map[string]any {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	body := map[string]any{"code": e.code, "message": e.msg}
	if d := e.details(); d != nil {
		body["data"] = d
	}
	return map[string]any{"jsonrpc": "2.0", "id": id, "error": body}
}

// jsonrpcStatus: a JSON-RPC error is an HTTP 200 with an error body, except the
// authentication, authorization and overload failures, which keep their HTTP status
// so that an HTTP client (and a proxy) sees them for what they are.
func jsonrpcStatus(e *rpcError) int {
	switch e.http {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests, http.StatusRequestEntityTooLarge, http.StatusMethodNotAllowed:
		return e.http
	}
	return http.StatusOK
}

func (h *Handler) writeRPCError(w http.ResponseWriter, id json.RawMessage, method string, e *rpcError) {
	h.count("jsonrpc", method, e)
	if e.http == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agentplane"`)
	}
	writeJSON(w, jsonrpcStatus(e), jsonrpcError(id, e))
}

func (h *Handler) count(binding, method string, e *rpcError) {
	outcome := "ok"
	if e != nil {
		outcome = e.reason
		if outcome == "" {
			outcome = strings.ToLower(e.status)
		}
		if e.http >= 500 {
			h.o.Log.Warn("a2a call failed", "binding", binding, "method", method, "code", e.code, "err", e.msg)
		} else {
			h.o.Log.Debug("a2a call refused", "binding", binding, "method", method, "code", e.code, "err", e.msg)
		}
	}
	if _, ok := methods[method]; !ok && method != "GetAgentCard" {
		method = "unknown"
	}
	h.m.requests.WithLabelValues(binding, method, outcome).Inc()
}

// serveJSONRPC answers one JSON-RPC 2.0 request (no batches: A2A defines none).
func (h *Handler) serveJSONRPC(w http.ResponseWriter, r *http.Request, ag *Agent) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		h.writeRPCError(w, nil, "", &rpcError{code: codeInvalidRequest, http: http.StatusMethodNotAllowed, status: "INVALID_ARGUMENT", msg: "JSON-RPC requests are POSTed; the agent card is at " + wellKnownCard})
		return
	}
	body, rerr := h.readBody(r)
	if rerr != nil {
		h.writeRPCError(w, nil, "", rerr)
		return
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		h.writeRPCError(w, nil, "", newErr(codeInvalidRequest, "batch requests are not supported"))
		return
	}
	var req rpcRequest
	if err := decodeStrict(body, &req); err != nil {
		h.writeRPCError(w, nil, "", newErr(codeParseError, "invalid JSON payload"))
		return
	}
	if req.JSONRPC != "2.0" || req.Method == "" || !validRPCID(req.ID) {
		h.writeRPCError(w, validIDOrNull(req.ID), "", newErr(codeInvalidRequest, `not a JSON-RPC 2.0 request: want {"jsonrpc": "2.0", "id": string or number, "method": string, "params": object}`))
		return
	}
	m, ok := methods[req.Method]
	if !ok {
		h.writeRPCError(w, req.ID, req.Method, newErr(codeMethodNotFound, "method not found: "+truncate(req.Method, 64)))
		return
	}
	if _, verr := version(r); verr != nil {
		h.writeRPCError(w, req.ID, m.op, verr)
		return
	}
	params := req.Params
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage("{}")
	}
	if t := bytes.TrimLeft(params, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		h.writeRPCError(w, req.ID, m.op, invalidParams("params must be an object"))
		return
	}
	ctx := h.callCtx(r)
	enc := func(v any) any { return map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": v} }
	switch m.op {
	case "SendStreamingMessage", "SubscribeToTask":
		streamEnc := func(ev *streamResponse) any {
			if m.legacy {
				return enc(legacyEvent(ev))
			}
			return enc(ev)
		}
		fail := func(e *rpcError) (string, any) { return "", jsonrpcError(req.ID, e) }
		if e := h.stream(ctx, w, r, ag, m.op, params, m.legacy, streamEnc, fail); e != nil {
			h.writeRPCError(w, req.ID, m.op, e)
			return
		}
		h.count("jsonrpc", m.op, nil)
		return
	}
	res, e := h.unary(ctx, r, ag, m.op, params, m.legacy)
	if e != nil {
		h.writeRPCError(w, req.ID, m.op, e)
		return
	}
	h.count("jsonrpc", m.op, nil)
	writeJSON(w, http.StatusOK, enc(res))
}

func validRPCID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	switch id[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return len(id) <= 256
	}
	return string(id) == "null"
}

func validIDOrNull(id json.RawMessage) json.RawMessage {
	if validRPCID(id) {
		return id
	}
	return nil
}

func decodeParams(params json.RawMessage, v any) *rpcError {
	if err := json.Unmarshal(params, v); err != nil {
		return invalidParams("params: " + err.Error())
	}
	return nil
}

// unary runs a non-streaming operation; the result is in the shape of the method's
// protocol version.
func (h *Handler) unary(ctx context.Context, r *http.Request, ag *Agent, op string, params json.RawMessage, legacy bool) (any, *rpcError) {
	switch op {
	case "SendMessage":
		var req *sendRequest
		if legacy {
			var e *rpcError
			if req, e = fromLegacySend(params); e != nil {
				return nil, e
			}
		} else {
			req = &sendRequest{}
			if e := decodeParams(params, req); e != nil {
				return nil, e
			}
		}
		t, e := h.submit(ctx, ag, req)
		if e != nil {
			return nil, e
		}
		if e := h.pushFromSend(ctx, r, ag, t, req, legacy); e != nil {
			return nil, e
		}
		var hl *int32
		if c := req.Configuration; c == nil || !c.ReturnImmediately {
			t = h.await(ctx, t) // blocking is the default
		}
		if c := req.Configuration; c != nil {
			hl = c.HistoryLength
		}
		v, e := h.view(ctx, t, hl, true)
		if e != nil {
			return nil, e
		}
		if legacy {
			return legacyTask(&v), nil
		}
		return &streamResponse{Task: &v}, nil
	case "GetTask":
		var req getTaskRequest
		if e := decodeParams(params, &req); e != nil {
			return nil, e
		}
		t, e := h.getTask(ctx, ag, req.ID)
		if e != nil {
			return nil, e
		}
		v, e := h.view(ctx, t, req.HistoryLength, true)
		if e != nil {
			return nil, e
		}
		if legacy {
			return legacyTask(&v), nil
		}
		return &v, nil
	case "ListTasks":
		var req listTasksRequest
		if e := decodeParams(params, &req); e != nil {
			return nil, e
		}
		resp, e := h.listTasks(ctx, ag, &req)
		if e != nil {
			return nil, e
		}
		if legacy {
			out := make([]any, 0, len(resp.Tasks))
			for i := range resp.Tasks {
				out = append(out, legacyTask(&resp.Tasks[i]))
			}
			return map[string]any{"tasks": out, "nextPageToken": resp.NextPageToken, "pageSize": resp.PageSize, "totalSize": resp.TotalSize}, nil
		}
		return resp, nil
	case "CancelTask":
		var req taskIDRequest
		if e := decodeParams(params, &req); e != nil {
			return nil, e
		}
		v, e := h.cancel(ctx, ag, req.ID)
		if e != nil {
			return nil, e
		}
		if legacy {
			return legacyTask(&v), nil
		}
		return &v, nil
	case "GetExtendedAgentCard":
		c, e := h.extendedCard(ctx, r, ag)
		if e != nil {
			return nil, e
		}
		return &c, nil
	case "CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig":
		return h.pushOp(ctx, r, ag, op, params, legacy)
	}
	return nil, newErr(codeMethodNotFound, "method not found")
}

// stream runs SendStreamingMessage or SubscribeToTask. An error before the stream
// opens is returned (and answered as an ordinary error response); after, it is the
// stream's last event.
func (h *Handler) stream(ctx context.Context, w http.ResponseWriter, r *http.Request, ag *Agent, op string, params json.RawMessage, legacy bool,
	encode func(*streamResponse) any, fail func(*rpcError) (string, any)) *rpcError {
	var t *agentplanev1.Task
	var after int64
	switch op {
	case "SendStreamingMessage":
		var req *sendRequest
		if legacy {
			var e *rpcError
			if req, e = fromLegacySend(params); e != nil {
				return e
			}
		} else {
			req = &sendRequest{}
			if e := decodeParams(params, req); e != nil {
				return e
			}
		}
		release, e := h.acquireStream()
		if e != nil {
			return e
		}
		defer release()
		if t, e = h.submit(ctx, ag, req); e != nil {
			return e
		}
		if e := h.pushFromSend(ctx, r, ag, t, req, legacy); e != nil {
			return e
		}
		after = t.GetLastSequence()
	default: // SubscribeToTask
		var req taskIDRequest
		if e := decodeParams(params, &req); e != nil {
			return e
		}
		if req.Tenant != "" {
			return invalidParams("tenant: this server takes the tenant from your credentials; leave tenant empty")
		}
		last, e := lastEventID(r)
		if e != nil {
			return e
		}
		release, e := h.acquireStream()
		if e != nil {
			return e
		}
		defer release()
		if t, e = h.getTask(ctx, ag, req.ID); e != nil {
			return e
		}
		after = t.GetLastSequence()
		if last > 0 && last < after {
			after = last // resume: the events after the client's position
		} else if terminal(t) {
			return newErr(codeUnsupportedOp, "task "+t.GetTaskId()+" has ended; read it with GetTask")
		}
	}
	s := h.openSSE(w, encode, fail)
	h.follow(ctx, t, after, s, true)
	return nil
}
