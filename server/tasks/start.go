package tasks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

// Bounds on caller-chosen identifiers and labels.
const (
	maxIDBytes         = 128
	maxLabelKeyBytes   = 63
	maxLabelValueBytes = 256
)

// Spec kinds, as TaskSubmitted.kind records them.
const (
	KindAgent  = "AgentSpec"
	KindGraph  = "GraphSpec"
	KindStatic = "static"
)

// StartParams is a validated StartTask: the service layer has authenticated the
// caller, validated the spec (an invalid spec never reaches Start), resolved it, and
// applied the MCP/A2A gates.
type StartParams struct {
	// Tenant and Principal identify the caller.
	Tenant, Principal string
	// RequestID is the caller's idempotency key; "" creates a new task every time.
	RequestID string
	// RequestDigest identifies the request a RequestID was first used with; compute it
	// with RequestDigest from the caller's StartTaskRequest. When nil, Start derives one
	// from these parameters, which then includes the gates' effective lists.
	RequestDigest []byte
	// Exactly one of Agent, Graph, AgentID: what runs, as submitted.
	Agent   *agentplanev1.AgentSpec
	Graph   *agentplanev1.GraphSpec
	AgentID string
	// Resolved is the spec the runtime runs (required).
	Resolved *agentplanev1.ResolvedSpec
	// Input is the user's message, if any (CheckUserMessage; at most
	// Config.MaxInputBytes encoded). Start logs a copy with role USER and an id
	// assigned when it has none.
	Input *agentplanev1.Message
	// Labels are filterable caller labels (at most Config.MaxLabels; keys 1-63 bytes,
	// values up to 256).
	Labels map[string]string
	// InterruptPolicy gates tool calls (already compiled and checked).
	InterruptPolicy *agentplanev1.InterruptPolicy
	// InterruptTimeout is each interrupt's deadline; 0 means the deployment default.
	InterruptTimeout time.Duration
	// ToolAxes are the caller's tighten-only overrides.
	ToolAxes []*agentplanev1.ToolAxisOverride
	// McpServers and A2aPeers are the effective lists after the gates.
	McpServers []*agentplanev1.McpServer
	A2aPeers   []*agentplanev1.A2APeer
	// SessionID is the caller's session id.
	SessionID string
	// Queue is the run queue; "" means store.DefaultQueue (see CheckQueue).
	Queue string
	// GateEvents are recorded right after the TaskSubmitted event, in order: what the
	// gates ignored or dropped (payload only).
	GateEvents []*agentplanev1.TaskEvent
	// View is how much of the task Start returns (UNSPECIFIED: full).
	View View
	// TraceContext is the W3C trace context of the StartTask call, kept with the task
	// and handed to its leases; nil when the call carried none.
	TraceContext *agentplanev1.TraceContext
	// Priority orders the task among its tenant's tasks of the queue:
	// schema.MinPriority to schema.MaxPriority, higher first.
	Priority int32
}

// CheckQueue refuses a run queue name that is not 1 to 64 characters of ASCII
// letters, digits, '.', '_' and '-' starting with a letter or digit; field names it.
func CheckQueue(field, q string) error {
	if schema.ValidQueueName(q) {
		return nil
	}
	return apierr.InvalidArgument(apierr.ReasonInvalidArgument,
		"%s %q is not a queue name: 1 to %d characters of letters, digits, '.', '_' and '-', starting with a letter or digit",
		field, q, schema.MaxQueueName)
}

// RequestDigest is the digest of a StartTaskRequest without its request_id and view, to tell a
// retry (same digest) from a different request reusing the id. It uses deterministic
// protobuf encoding, which is stable for one binary; a retry that straddles an upgrade
// which changes the encoding would be refused as a different request.
func RequestDigest(req *agentplanev1.StartTaskRequest) []byte {
	// The digest of the request with request_id and view cleared (view is how much to
	// show, not what to start), without copying it (a deep copy, of the whole spec, was
	// 3% of a StartTask's CPU): a message's encoding is its fields' encodings one after
	// the other, so leaving those two fields' out of the request's encoding gives the
	// encoding of the request without them.
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(req) // valid messages always encode
	h := sha256.New()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if n < 0 || m < 0 {
			break // not reached: b is what Marshal wrote
		}
		if !(num == requestIDField && typ == protowire.BytesType) && !(num == viewField && typ == protowire.VarintType) {
			h.Write(b[:n+m])
		}
		b = b[n+m:]
	}
	return h.Sum(nil)
}

// The numbers of the StartTaskRequest fields a retry may change.
var (
	requestIDField = (&agentplanev1.StartTaskRequest{}).ProtoReflect().Descriptor().Fields().ByName("request_id").Number()
	viewField      = (&agentplanev1.StartTaskRequest{}).ProtoReflect().Descriptor().Fields().ByName("view").Number()
)

// asRequest is the request these parameters stand for, for the fallback digest.
func (p *StartParams) asRequest() *agentplanev1.StartTaskRequest {
	req := &agentplanev1.StartTaskRequest{
		Input:           p.Input,
		Labels:          p.Labels,
		InterruptPolicy: p.InterruptPolicy,
		McpServers:      &agentplanev1.McpServerList{Servers: p.McpServers},
		A2APeers:        &agentplanev1.A2APeerList{Peers: p.A2aPeers},
		ToolAxes:        p.ToolAxes,
		SessionId:       p.SessionID,
		Queue:           p.Queue,
		Priority:        p.Priority,
	}
	switch {
	case p.Agent != nil:
		req.Spec = &agentplanev1.StartTaskRequest_Agent{Agent: p.Agent}
	case p.Graph != nil:
		req.Spec = &agentplanev1.StartTaskRequest_Graph{Graph: p.Graph}
	default:
		req.Spec = &agentplanev1.StartTaskRequest_AgentId{AgentId: p.AgentID}
	}
	if p.InterruptTimeout > 0 {
		req.InterruptTimeout = durationpb.New(p.InterruptTimeout)
	}
	return req
}

func (m *Manager) checkStart(p *StartParams) error {
	invalid := func(format string, args ...any) error {
		return apierr.InvalidArgument(apierr.ReasonInvalidArgument, format, args...)
	}
	specs := 0
	for _, set := range []bool{p.Agent != nil, p.Graph != nil, p.AgentID != ""} {
		if set {
			specs++
		}
	}
	switch {
	case p.Tenant == "" || len(p.Tenant) > 255:
		return invalid("tenant is required (1 to 255 bytes)")
	case specs != 1:
		return invalid("exactly one of agent, graph or agent_id is required")
	case p.Resolved.GetSpec() == nil:
		return invalid("the resolved spec is missing")
	case len(p.RequestID) > maxIDBytes || !utf8.ValidString(p.RequestID):
		return invalid("request_id must be valid UTF-8 of at most %d bytes", maxIDBytes)
	case len(p.SessionID) > maxIDBytes:
		return invalid("session_id is longer than %d bytes", maxIDBytes)
	case len(p.Labels) > m.cfg.MaxLabels:
		return invalid("%d labels; at most %d are allowed", len(p.Labels), m.cfg.MaxLabels)
	case p.InterruptTimeout < 0:
		return invalid("interrupt_timeout may not be negative")
	case p.Priority < schema.MinPriority || p.Priority > schema.MaxPriority:
		return invalid("priority %d: want %d to %d", p.Priority, schema.MinPriority, schema.MaxPriority)
	}
	if p.Input != nil {
		if err := CheckUserMessage("input", p.Input, m.cfg.MaxInputBytes); err != nil {
			return err
		}
	}
	if p.Queue == "" {
		p.Queue = store.DefaultQueue
	}
	if err := CheckQueue("queue", p.Queue); err != nil {
		return err
	}
	for k, v := range p.Labels {
		if k == "" || len(k) > maxLabelKeyBytes || len(v) > maxLabelValueBytes {
			return invalid("label %q: keys are 1 to %d bytes, values at most %d", k, maxLabelKeyBytes, maxLabelValueBytes)
		}
	}
	for i, ev := range p.GateEvents {
		if ev.GetPayload() == nil {
			return invalid("gate event %d has no payload", i)
		}
	}
	return nil
}

// Start creates a task in SUBMITTED, queued for runtimes, with its TaskSubmitted event
// and the gate events, in one transaction. With a RequestID it is idempotent per
// tenant: a retry with the same digest returns the existing task and created=false;
// the same RequestID with a different digest is ALREADY_EXISTS
// (task.request_id_reused). An input over Config.MaxInputBytes is RESOURCE_EXHAUSTED.
func (m *Manager) Start(ctx context.Context, p StartParams) (task *agentplanev1.Task, created bool, err error) {
	if err := m.checkStart(&p); err != nil {
		return nil, false, err
	}
	id, now := newTaskID(), m.clock.Now()
	reqDigest := p.RequestDigest
	if reqDigest == nil {
		reqDigest = RequestDigest(p.asRequest())
	}
	// After the digest: an assigned id is not part of what a retry is compared on.
	var input *agentplanev1.Message
	if p.Input != nil {
		input = userMessage(p.Input)
	}
	spec := &storagev1.TaskSpecRecord{
		ResolvedSpec:    p.Resolved,
		Input:           input,
		InterruptPolicy: p.InterruptPolicy,
		ToolAxes:        p.ToolAxes,
		McpServers:      p.McpServers,
		A2APeers:        p.A2aPeers,
	}
	if p.InterruptTimeout > 0 {
		spec.InterruptTimeout = durationpb.New(p.InterruptTimeout)
	}
	kind := KindStatic
	switch {
	case p.Agent != nil:
		spec.Spec, kind = &storagev1.TaskSpecRecord_Agent{Agent: p.Agent}, KindAgent
	case p.Graph != nil:
		spec.Spec, kind = &storagev1.TaskSpecRecord_Graph{Graph: p.Graph}, KindGraph
	default:
		spec.Spec = &storagev1.TaskSpecRecord_AgentId{AgentId: p.AgentID}
	}
	keys := &storagev1.TaskRecord{}
	startBucket, err := m.flowKeys(ctx, &p, keys)
	if err != nil {
		return nil, false, err
	}
	err = m.store.Update(ctx, func(w store.Writer) error {
		task, created = nil, false
		if p.RequestID != "" {
			owner, err := w.TaskForRequest(p.Tenant, p.RequestID)
			if err != nil {
				return err
			}
			if owner != "" {
				rec, err := w.GetTask(p.Tenant, owner)
				if err != nil {
					return err
				}
				if !bytes.Equal(rec.GetRequestDigest(), reqDigest) {
					return apierr.New(codes.AlreadyExists, apierr.ReasonRequestIDReused,
						"request_id %q was already used for a different request (task %s); use a new request_id for a new task",
						p.RequestID, owner)
				}
				existing, err := readSpec(w, p.Tenant, owner, p.View)
				if err != nil {
					return err
				}
				task = toAPITask(rec, existing, p.View)
				return nil
			}
		}
		rec := &storagev1.TaskRecord{
			TaskId:         id,
			Tenant:         p.Tenant,
			State:          agentplanev1.TaskState_TASK_STATE_SUBMITTED,
			RequestId:      p.RequestID,
			RequestDigest:  reqDigest,
			Labels:         p.Labels,
			CreateTime:     timestamppb.New(now),
			CreatedBy:      p.Principal,
			SessionId:      p.SessionID,
			SpecKind:       kind,
			Queue:          p.Queue,
			TraceContext:   p.TraceContext,
			Priority:       p.Priority,
			ConcurrencyKey: keys.GetConcurrencyKey(),
			RateKey:        keys.GetRateKey(),
		}
		// After the request id: a retry of a start that was let through is answered,
		// not refused.
		if startBucket != "" {
			if err := m.takeStartToken(w, p.Tenant, p.Queue, startBucket, now); err != nil {
				return err
			}
		}
		op := m.newOp(w, now, rec)
		if err := op.Append(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_Submitted{Submitted: &agentplanev1.TaskSubmitted{
			Input: input, Kind: kind, CreatedBy: p.Principal,
		}}}); err != nil {
			return err
		}
		for _, ev := range p.GateEvents {
			if err := op.Append(ev); err != nil {
				return err
			}
		}
		op.Enqueue()
		if err := op.flush(); err != nil {
			return err
		}
		if err := w.PutTaskSpec(p.Tenant, id, spec); err != nil {
			return err
		}
		task, created = toAPITask(rec, spec, p.View), true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return task, created, nil
}
