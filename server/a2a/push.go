package a2a

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// PushConfig is a task's A2A push notification config, as the store keeps it.
type PushConfig struct {
	ID, URL, Token, AuthScheme, AuthCredentials string
	// ProtocolVersion is the A2A version of the call that set it: the body's shape.
	ProtocolVersion string
	Created         time.Time
}

// PushStore keeps tasks' push configs; server.newA2A implements it over the task
// store, and the outbox delivers the notifications (server/webhooks). Nil turns push
// notifications off, and the card says so.
type PushStore interface {
	// MayWrite authenticates the request's caller and reports whether it may change a
	// task's push configs (the roles CancelTask needs), as an API error.
	MayWrite(r *http.Request) error
	// CheckURL applies the destination rules of every outbound URL (SSRF).
	CheckURL(url string) error
	// List returns the push configs of tenant's task.
	List(ctx context.Context, tenant, taskID string) ([]PushConfig, error)
	// Update runs fn on them in one transaction and stores what it returns.
	Update(ctx context.Context, tenant, taskID string, fn func([]PushConfig) ([]PushConfig, error)) error
}

// Bounds on push configs.
const (
	maxPushConfigs = 8
	maxURLLen      = 2048
	maxTokenLen    = 512
)

func pushNotSupported() *rpcError {
	return newErr(codePushNotSupported, "push notifications are not supported by this agent (capabilities.pushNotifications is false)")
}

// pushView is a config as a read answers it: the token and credentials are the
// caller's secrets, stored and sent, never read back.
func pushView(taskID string, pc PushConfig) *pushConfig {
	out := &pushConfig{ID: pc.ID, TaskID: taskID, URL: pc.URL}
	if pc.AuthScheme != "" {
		out.Authentication = &authenticationInfo{Scheme: pc.AuthScheme}
	}
	return out
}

func legacyPushView(taskID string, pc PushConfig) *a2a03.TaskPushConfig {
	out := &a2a03.TaskPushConfig{TaskID: a2a03.TaskID(taskID), Config: a2a03.PushConfig{ID: pc.ID, URL: pc.URL}}
	if pc.AuthScheme != "" {
		out.Config.Auth = &a2a03.PushAuthInfo{Schemes: []string{pc.AuthScheme}}
	}
	return out
}

func newPushID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "push-" + hex.EncodeToString(b)
}

// checkPush validates a config a caller sets.
func (h *Handler) checkPush(in *pushConfig) *rpcError {
	if in.URL == "" {
		return invalidParams("url is required")
	}
	if len(in.URL) > maxURLLen {
		return invalidParams("url is longer than 2048 bytes")
	}
	if err := h.o.Push.CheckURL(in.URL); err != nil {
		return invalidParams("url refused: " + err.Error())
	}
	if len(in.Token) > maxTokenLen {
		return invalidParams("token is longer than 512 bytes")
	}
	if in.ID != "" {
		if e := validID("id", in.ID); e != nil {
			return e
		}
	}
	if a := in.Authentication; a != nil {
		if a.Scheme == "" || len(a.Scheme) > 64 || strings.ContainsAny(a.Scheme, " \t\r\n") {
			return invalidParams("authentication.scheme must be one word (Bearer, Basic, ...)")
		}
		if len(a.Credentials) > 4096 || strings.ContainsAny(a.Credentials, "\r\n") {
			return invalidParams("authentication.credentials: at most 4096 bytes, on one line")
		}
	}
	return nil
}

// setPush creates (or, with an id already there, replaces) a push config of a task.
func (h *Handler) setPush(ctx context.Context, r *http.Request, ag *Agent, taskID string, in *pushConfig, version string) (PushConfig, *rpcError) {
	if h.o.Push == nil {
		return PushConfig{}, pushNotSupported()
	}
	if in.Tenant != "" {
		return PushConfig{}, invalidParams("tenant: this server takes the tenant from your credentials; leave tenant empty")
	}
	t, rerr := h.getTask(ctx, ag, taskID)
	if rerr != nil {
		return PushConfig{}, rerr
	}
	if err := h.o.Push.MayWrite(r); err != nil {
		return PushConfig{}, fromAPI(err)
	}
	if terminal(t) {
		return PushConfig{}, newErr(codeUnsupportedOp, "task "+t.GetTaskId()+" has ended; it sends no more notifications")
	}
	if e := h.checkPush(in); e != nil {
		return PushConfig{}, e
	}
	pc := PushConfig{ID: in.ID, URL: in.URL, Token: in.Token, ProtocolVersion: version, Created: time.Now()}
	if pc.ID == "" {
		pc.ID = newPushID()
	}
	if a := in.Authentication; a != nil {
		pc.AuthScheme, pc.AuthCredentials = a.Scheme, a.Credentials
	}
	err := h.o.Push.Update(ctx, t.GetTenant(), t.GetTaskId(), func(cur []PushConfig) ([]PushConfig, error) {
		out := make([]PushConfig, 0, len(cur)+1)
		for _, c := range cur {
			if c.ID != pc.ID {
				out = append(out, c)
			}
		}
		if len(out) >= maxPushConfigs {
			return nil, invalidParams("a task has at most 8 push configs")
		}
		return append(out, pc), nil
	})
	if err != nil {
		return PushConfig{}, fromAPI(err)
	}
	return pc, nil
}

func (h *Handler) listPush(ctx context.Context, ag *Agent, taskID string) (*agentplanev1.Task, []PushConfig, *rpcError) {
	if h.o.Push == nil {
		return nil, nil, pushNotSupported()
	}
	t, rerr := h.getTask(ctx, ag, taskID)
	if rerr != nil {
		return nil, nil, rerr
	}
	cs, err := h.o.Push.List(ctx, t.GetTenant(), t.GetTaskId())
	if err != nil {
		return nil, nil, fromAPI(err)
	}
	return t, cs, nil
}

func (h *Handler) deletePush(ctx context.Context, r *http.Request, ag *Agent, taskID, id string) *rpcError {
	if h.o.Push == nil {
		return pushNotSupported()
	}
	t, rerr := h.getTask(ctx, ag, taskID)
	if rerr != nil {
		return rerr
	}
	if err := h.o.Push.MayWrite(r); err != nil {
		return fromAPI(err)
	}
	found := false
	err := h.o.Push.Update(ctx, t.GetTenant(), t.GetTaskId(), func(cur []PushConfig) ([]PushConfig, error) {
		found = false
		out := cur[:0:0]
		for _, c := range cur {
			if c.ID == id {
				found = true
				continue
			}
			out = append(out, c)
		}
		return out, nil
	})
	if err != nil {
		return fromAPI(err)
	}
	if !found {
		return &rpcError{code: codeTaskNotFound, http: http.StatusNotFound, status: "NOT_FOUND", reason: "TASK_NOT_FOUND", domain: errorDomain, msg: "push config not found"}
	}
	return nil
}

// pushOp runs a push config method; the result is in the method's version's shape.
func (h *Handler) pushOp(ctx context.Context, r *http.Request, ag *Agent, op string, params json.RawMessage, legacy bool) (any, *rpcError) {
	version := "1.0"
	if legacy {
		version = "0.3"
	}
	switch op {
	case "CreateTaskPushNotificationConfig":
		var in pushConfig
		if legacy {
			var p a2a03.TaskPushConfig
			if e := decodeParams(params, &p); e != nil {
				return nil, e
			}
			in = pushConfig{TaskID: string(p.TaskID), ID: p.Config.ID, URL: p.Config.URL, Token: p.Config.Token}
			if a := p.Config.Auth; a != nil && len(a.Schemes) > 0 {
				in.Authentication = &authenticationInfo{Scheme: a.Schemes[0], Credentials: a.Credentials}
			}
		} else if e := decodeParams(params, &in); e != nil {
			return nil, e
		}
		pc, e := h.setPush(ctx, r, ag, in.TaskID, &in, version)
		if e != nil {
			return nil, e
		}
		if legacy {
			return legacyPushView(in.TaskID, pc), nil
		}
		return pushView(in.TaskID, pc), nil
	case "GetTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig":
		var taskID, id string
		if legacy {
			var p a2a03.GetTaskPushConfigParams
			if e := decodeParams(params, &p); e != nil {
				return nil, e
			}
			taskID, id = string(p.TaskID), p.ConfigID
		} else {
			var p struct {
				Tenant string `json:"tenant"`
				TaskID string `json:"taskId"`
				ID     string `json:"id"`
			}
			if e := decodeParams(params, &p); e != nil {
				return nil, e
			}
			if p.Tenant != "" {
				return nil, invalidParams("tenant: this server takes the tenant from your credentials; leave tenant empty")
			}
			taskID, id = p.TaskID, p.ID
		}
		if op == "DeleteTaskPushNotificationConfig" {
			if e := h.deletePush(ctx, r, ag, taskID, id); e != nil {
				return nil, e
			}
			return map[string]any{}, nil
		}
		_, cs, e := h.listPush(ctx, ag, taskID)
		if e != nil {
			return nil, e
		}
		for _, c := range cs {
			if c.ID == id || (legacy && id == "" && len(cs) == 1) {
				if legacy {
					return legacyPushView(taskID, c), nil
				}
				return pushView(taskID, c), nil
			}
		}
		return nil, &rpcError{code: codeTaskNotFound, http: http.StatusNotFound, status: "NOT_FOUND", reason: "TASK_NOT_FOUND", domain: errorDomain, msg: "push config not found"}
	default: // ListTaskPushNotificationConfigs
		var taskID string
		if legacy {
			var p a2a03.ListTaskPushConfigParams
			if e := decodeParams(params, &p); e != nil {
				return nil, e
			}
			taskID = string(p.TaskID)
		} else {
			var p struct {
				TaskID string `json:"taskId"`
			}
			if e := decodeParams(params, &p); e != nil {
				return nil, e
			}
			taskID = p.TaskID
		}
		_, cs, e := h.listPush(ctx, ag, taskID)
		if e != nil {
			return nil, e
		}
		if legacy {
			out := make([]*a2a03.TaskPushConfig, 0, len(cs))
			for _, c := range cs {
				out = append(out, legacyPushView(taskID, c))
			}
			return out, nil
		}
		out := make([]*pushConfig, 0, len(cs))
		for _, c := range cs {
			out = append(out, pushView(taskID, c))
		}
		return map[string]any{"configs": out, "nextPageToken": ""}, nil
	}
}

// PushBody is the body of a push notification of t's state for a config set in A2A
// version: a StreamResponse (1.0) holding the task with its artifacts once it has
// ended, else a status update; 0.3's was the task itself. pendingInts are the
// interrupts a paused task waits on.
func PushBody(t *agentplanev1.Task, pendingInts []*agentplanev1.Interrupt, version string) ([]byte, error) {
	p := classify(pendingInts)
	if t.GetState() != agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED {
		p = pending{}
	}
	tk := toTask(t, p, nil, terminal(t))
	if version == "0.3" {
		return json.Marshal(legacyTask(&tk))
	}
	if terminal(t) {
		return json.Marshal(streamResponse{Task: &tk})
	}
	return json.Marshal(streamResponse{StatusUpdate: &statusUpdate{TaskID: tk.ID, ContextID: tk.ContextID, Status: tk.Status}})
}
