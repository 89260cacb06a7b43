package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/gates"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/a2a"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/tasks"
	"github.com/agentplane/agentplane/server/version"
)

// newA2A builds the A2A face (docs/a2a.md): one A2A agent per static agent. It calls
// the API over the gateway's in-process connection, as the console does, so every A2A
// call runs the API's authentication, method table, tenant checks and limits.
func (s *Server) newA2A() (*a2a.Handler, error) {
	ids := make([]string, 0, len(s.domain.static))
	for id := range s.domain.static {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	agents := make([]a2a.Agent, 0, len(ids))
	for _, id := range ids {
		spec := s.domain.static[id]
		c := s.cfg.A2A.Agents[id]
		name := c.Name
		if name == "" {
			name = spec.GetName()
		}
		pol, err := c.Policy()
		if err == nil && pol != nil {
			_, err = hitl.CompilePolicy(pol)
		}
		if err != nil {
			return nil, fmt.Errorf("a2a.agents.%s.interrupt_policy: %w", id, err)
		}
		agents = append(agents, a2a.Agent{ID: id, Name: name, Description: c.Description, Queue: c.Queue, ClientTools: spec.GetTools(), InterruptPolicy: pol})
	}
	return a2a.New(a2a.Options{
		Conn: s.gwConn, Annotate: s.tls2peer.annotate,
		Agents: agents, DefaultAgent: s.cfg.A2ADefaultAgent(), PublicURL: s.cfg.A2A.PublicURL,
		MultiTenant: s.cfg.Auth.RequirePrincipal, Bearer: len(s.cfg.Auth.Tokens) > 0, MTLS: len(s.cfg.Auth.ClientCerts) > 0 && s.tls != nil,
		MaxBodyBytes: s.maxHTTPBody(), MaxStreams: s.cfg.A2A.MaxStreams, BlockingTimeout: s.cfg.A2A.BlockingTimeout.D(),
		Push:    s.a2aPushStore(),
		Version: version.String(), Log: s.log.With("face", "a2a"), Registerer: s.metrics.registry, Stopping: s.stopping,
	})
}

// a2aPushes keeps the push configs of A2A tasks in their task records and checks push
// callers with the guard, for the A2A face (a2a.PushStore).
type a2aPushes struct{ s *Server }

var _ a2a.PushStore = a2aPushes{}

// apiError is err as the API would answer it (a status error).
func apiError(err error) error {
	if err == nil {
		return nil
	}
	st, _ := apierr.ToStatus(err)
	return st.Err()
}

// MayWrite: the caller authenticates as for the API, and holds a role CancelTask allows
// (changing where a task's updates go is a change of the task).
func (p a2aPushes) MayWrite(r *http.Request) error {
	who, err := p.s.guard.AuthenticateHTTP(r)
	if err != nil {
		return apiError(err)
	}
	rule, ok := p.s.guard.Lookup(agentplanev1.TaskService_CancelTask_FullMethodName)
	if !ok || !rule.Allows(who) {
		return apiError(apierr.New(codes.PermissionDenied, apierr.ReasonPermissionDenied,
			"changing a task's push notification configs needs one of the roles %v; %q has %v", rule.Roles, who.Subject, who.Roles))
	}
	return nil
}

func (p a2aPushes) CheckURL(u string) error {
	if reason, ok := gates.CheckDestinationURL(u, p.s.cfg.Notifications.AllowPrivateDestinations); !ok {
		hint := ""
		if reason == gates.DropURLPrivateHost || reason == gates.DropURLPlainHTTP {
			hint = " (notifications.allow_private_destinations lets notifications reach private hosts and plain http)"
		}
		return errors.New(string(reason) + hint)
	}
	return nil
}

func (p a2aPushes) List(ctx context.Context, tenant, taskID string) ([]a2a.PushConfig, error) {
	var out []a2a.PushConfig
	err := p.s.domain.store.View(ctx, func(r store.Reader) error {
		rec, err := r.GetTask(tenant, taskID)
		if err != nil {
			return err
		}
		out = fromPushRecords(rec.GetA2APushConfigs())
		return nil
	})
	return out, apiError(err)
}

func (p a2aPushes) Update(ctx context.Context, tenant, taskID string, fn func([]a2a.PushConfig) ([]a2a.PushConfig, error)) error {
	var fnErr error
	err := p.s.domain.tasks.UpdateTask(ctx, tenant, taskID, func(op *tasks.Op) error {
		rec := op.Task()
		out, err := fn(fromPushRecords(rec.GetA2APushConfigs()))
		if err != nil {
			fnErr = err
			return err
		}
		rec.A2APushConfigs = toPushRecords(out)
		return nil
	})
	if fnErr != nil {
		return fnErr
	}
	return apiError(err)
}

func fromPushRecords(recs []*storagev1.A2APushConfig) []a2a.PushConfig {
	out := make([]a2a.PushConfig, 0, len(recs))
	for _, r := range recs {
		out = append(out, a2a.PushConfig{ID: r.GetId(), URL: r.GetUrl(), Token: r.GetToken(), AuthScheme: r.GetAuthScheme(),
			AuthCredentials: r.GetAuthCredentials(), ProtocolVersion: r.GetProtocolVersion(), Created: r.GetCreateTime().AsTime()})
	}
	return out
}

func toPushRecords(cs []a2a.PushConfig) []*storagev1.A2APushConfig {
	out := make([]*storagev1.A2APushConfig, 0, len(cs))
	for _, c := range cs {
		out = append(out, &storagev1.A2APushConfig{Id: c.ID, Url: c.URL, Token: c.Token, AuthScheme: c.AuthScheme,
			AuthCredentials: c.AuthCredentials, ProtocolVersion: c.ProtocolVersion, CreateTime: timestamppb.New(c.Created)})
	}
	return out
}

// a2aPushBody is the body of a push notification of rec's new state to pc, read in the
// transaction of the change (webhooks.Options.A2APush).
func a2aPushBody(r store.Reader, rec *storagev1.TaskRecord, pc *storagev1.A2APushConfig) ([]byte, error) {
	t := &agentplanev1.Task{TaskId: rec.GetTaskId(), Tenant: rec.GetTenant(), State: rec.GetState(), Labels: rec.GetLabels(),
		SessionId: rec.GetSessionId(), UpdateTime: rec.GetUpdateTime(), Failure: rec.GetFailure(), Output: rec.GetOutput(),
		CancelRequested: rec.GetCancellation().GetRuntimeHeld()}
	var ints []*agentplanev1.Interrupt
	for _, id := range rec.GetPendingInterruptIds() {
		ir, err := r.GetInterrupt(rec.GetTenant(), id)
		if err != nil {
			if store.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		ints = append(ints, ir.GetInterrupt())
	}
	return a2a.PushBody(t, ints, pc.GetProtocolVersion())
}

// a2aPushFunc is the outbox's A2A push body builder: nil when the face is off.
func a2aPushFunc(cfg *config.Config) func(store.Reader, *storagev1.TaskRecord, *storagev1.A2APushConfig) ([]byte, error) {
	if cfg.A2A.Disabled || cfg.A2A.DisablePush || cfg.HTTPAddr == "off" {
		return nil
	}
	return a2aPushBody
}

func (s *Server) a2aPushStore() a2a.PushStore {
	if a2aPushFunc(&s.cfg) == nil {
		return nil
	}
	return a2aPushes{s}
}
