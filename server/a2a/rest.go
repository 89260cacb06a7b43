package a2a

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// restError is google.rpc.Status as the HTTP+JSON binding writes it (§11.6).
func restError(e *rpcError) map[string]any {
	code := e.http
	if code == 0 {
		code = http.StatusInternalServerError
	}
	body := map[string]any{"code": code, "status": e.status, "message": e.msg}
	if d := e.details(); d != nil {
		body["details"] = d
	}
	return body
}

func (h *Handler) writeRESTError(w http.ResponseWriter, op string, e *rpcError) {
	h.count("rest", op, e)
	if e.http == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agentplane"`)
	}
	code := e.http
	if code == 0 {
		code = http.StatusInternalServerError
	}
	writeJSON(w, code, map[string]any{"error": restError(e)})
}

// serveREST answers the HTTP+JSON binding under /a2a/{agent}/rest (§11.3). The
// tenant path segment is not supported: the tenant comes from the credentials.
func (h *Handler) serveREST(w http.ResponseWriter, r *http.Request, ag *Agent, path string) {
	op, taskID := restRoute(r.Method, path)
	// The push config methods name the task taskId, and a config by its id.
	idKey, configID := "id", ""
	if strings.Contains(op, "PushNotificationConfig") {
		idKey = "taskId"
		if _, c, ok := strings.Cut(path, "/pushNotificationConfigs/"); ok {
			configID = unescape(c)
		}
	}
	if op == "" {
		h.writeRESTError(w, "", newErr(codeMethodNotFound, "no A2A HTTP+JSON operation is "+r.Method+" "+truncate(path, 80)))
		return
	}
	if v, e := version(r); e != nil || v == "0.3" && r.Header.Get("A2A-Version") != "" {
		if e == nil {
			e = newErr(codeVersionNotSupported, "the HTTP+JSON binding here speaks A2A 1.0; 0.3 clients use the JSON-RPC interface")
		}
		h.writeRESTError(w, op, e)
		return
	}
	var params json.RawMessage
	switch r.Method {
	case http.MethodPost:
		body, e := h.readBody(r)
		if e != nil {
			h.writeRESTError(w, op, e)
			return
		}
		if len(strings.TrimSpace(string(body))) == 0 {
			body = []byte("{}")
		}
		var probe map[string]json.RawMessage
		if err := decodeStrict(body, &probe); err != nil {
			h.writeRESTError(w, op, newErr(codeParseError, "the body must be a JSON object"))
			return
		}
		if taskID != "" {
			probe[idKey], _ = json.Marshal(taskID)
		}
		params, _ = json.Marshal(probe)
	default:
		q := r.URL.Query()
		p, e := queryParams(q)
		if e != nil {
			h.writeRESTError(w, op, e)
			return
		}
		if taskID != "" {
			p[idKey] = taskID
		}
		if configID != "" {
			p["id"] = configID
		}
		params, _ = json.Marshal(p)
	}
	ctx := h.callCtx(r)
	switch op {
	case "SendStreamingMessage", "SubscribeToTask":
		fail := func(e *rpcError) (string, any) { return "error", map[string]any{"error": restError(e)} }
		enc := func(ev *streamResponse) any { return ev }
		if e := h.stream(ctx, w, r, ag, op, params, false, enc, fail); e != nil {
			h.writeRESTError(w, op, e)
			return
		}
		h.count("rest", op, nil)
		return
	}
	res, e := h.unary(ctx, r, ag, op, params, false)
	if e != nil {
		h.writeRESTError(w, op, e)
		return
	}
	h.count("rest", op, nil)
	w.Header().Set("Content-Type", "application/a2a+json")
	writeJSONTyped(w, res)
}

func writeJSONTyped(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": map[string]any{"code": 500, "status": "INTERNAL", "message": "internal error"}})
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// restRoute maps a method and path to the operation and the task id in the path.
func restRoute(method, path string) (op, taskID string) {
	switch {
	case path == "/message:send" && method == http.MethodPost:
		return "SendMessage", ""
	case path == "/message:stream" && method == http.MethodPost:
		return "SendStreamingMessage", ""
	case path == "/tasks" && method == http.MethodGet:
		return "ListTasks", ""
	case path == "/extendedAgentCard" && method == http.MethodGet:
		return "GetExtendedAgentCard", ""
	}
	rest, ok := strings.CutPrefix(path, "/tasks/")
	if !ok || rest == "" {
		return "", ""
	}
	if id, sub, ok := strings.Cut(rest, "/"); ok {
		switch {
		case sub == "pushNotificationConfigs" && method == http.MethodPost:
			return "CreateTaskPushNotificationConfig", unescape(id)
		case sub == "pushNotificationConfigs" && method == http.MethodGet:
			return "ListTaskPushNotificationConfigs", unescape(id)
		case strings.HasPrefix(sub, "pushNotificationConfigs/") && method == http.MethodGet:
			return "GetTaskPushNotificationConfig", unescape(id)
		case strings.HasPrefix(sub, "pushNotificationConfigs/") && method == http.MethodDelete:
			return "DeleteTaskPushNotificationConfig", unescape(id)
		}
		return "", ""
	}
	switch {
	case strings.HasSuffix(rest, ":cancel") && method == http.MethodPost:
		return "CancelTask", unescape(strings.TrimSuffix(rest, ":cancel"))
	case strings.HasSuffix(rest, ":subscribe") && (method == http.MethodPost || method == http.MethodGet):
		return "SubscribeToTask", unescape(strings.TrimSuffix(rest, ":subscribe"))
	case !strings.Contains(rest, ":") && method == http.MethodGet:
		return "GetTask", unescape(rest)
	}
	return "", ""
}

func unescape(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// queryParams reads GET parameters (camelCase, §11.5) into the request's JSON shape.
func queryParams(q url.Values) (map[string]any, *rpcError) {
	out := map[string]any{}
	for k, vs := range q {
		if len(vs) == 0 || k == "A2A-Version" {
			continue
		}
		v := vs[len(vs)-1]
		switch k {
		case "historyLength", "pageSize":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return nil, invalidParams(k + " must be an integer")
			}
			out[k] = n
		case "includeArtifacts":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, invalidParams(k + " must be true or false")
			}
			out[k] = b
		case "contextId", "status", "pageToken", "statusTimestampAfter", "tenant":
			out[k] = v
		}
	}
	return out, nil
}
