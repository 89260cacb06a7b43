package tasks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"time"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/config"
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
	// from these parameters, which then includes the gates' effective lists. Without a
	// RequestID there is no retry to compare: no digest is computed or stored.
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
	// ScheduledBy is the schedule run starting the task (package schedules); nil
	// otherwise.
	ScheduledBy *agentplanev1.ScheduledBy
	// Priority orders the task among its tenant's tasks of the queue:
	// schema.MinPriority to schema.MaxPriority, higher first.
	Priority int32
	// Concurrency is the task's own concurrency cap (StartTaskRequest.concurrency);
	// nil when it has none.
	Concurrency *agentplanev1.ConcurrencyLimit
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

// fallbackDigest identifies these parameters when the caller gave no RequestDigest:
// the digest of the request they stand for without its spec, followed by the
// deterministic encoding of the typed spec (a request carries the spec in its wire
// shape, which these parameters no longer hold).
func (p *StartParams) fallbackDigest() []byte {
	h := sha256.New()
	h.Write(RequestDigest(p.asRequest()))
	var spec proto.Message = &agentplanev1.StaticAgentRef{AgentId: p.AgentID}
	switch {
	case p.Agent != nil:
		spec = p.Agent
	case p.Graph != nil:
		spec = p.Graph
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(spec) // valid messages always encode
	h.Write([]byte(string(spec.ProtoReflect().Descriptor().FullName())))
	h.Write(b)
	return h.Sum(nil)
}

// asRequest is the request these parameters stand for, without its spec.
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
		Concurrency:     p.Concurrency,
	}
	if p.InterruptTimeout > 0 {
		req.InterruptTimeout = durationpb.New(p.InterruptTimeout)
	}
	return req
}

// CheckStart checks p as Start does before it writes anything, filling in the
// defaults (the queue). A caller of StartIn runs it first: what it refuses is the
// request's fault, while StartIn's own errors are the store's.
func (m *Manager) CheckStart(p *StartParams) error { return m.checkStart(p) }

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
	if c := p.Concurrency; c != nil {
		if c.GetLimit() < 1 || c.GetLimit() > config.MaxConcurrencyLimit {
			return fieldInvalid("concurrency.limit", "concurrency.limit %d: want 1 to %d", c.GetLimit(), config.MaxConcurrencyLimit)
		}
		if _, err := m.taskKeys.Compile(c.GetKey()); err != nil {
			return fieldInvalid("concurrency.key", "concurrency.key: %v", err)
		}
	}
	return nil
}

// fieldInvalid is INVALID_ARGUMENT (REQUEST_INVALID) naming the field in a BadRequest.
func fieldInvalid(field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "%s", msg).
		WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: msg}}})
}

// Start creates a task in SUBMITTED, queued for runtimes, with its TaskSubmitted event
// and the gate events, in one transaction. With a RequestID it is idempotent per
// tenant: a retry with the same digest returns the existing task and created=false;
// the same RequestID with a different digest is ALREADY_EXISTS
// (TASK_REQUEST_ID_REUSED). An input over Config.MaxInputBytes is RESOURCE_EXHAUSTED,
// and so is a new task whose budget is spent (BUDGET_EXCEEDED, Options.Budgets).
func (m *Manager) Start(ctx context.Context, p StartParams) (task *agentplanev1.Task, created bool, err error) {
	if err := m.checkStart(&p); err != nil {
		return nil, false, err
	}
	id, now := newTaskID(), m.clock.Now()
	ns := m.newStart(ctx, &p)
	if ns.keyErr != nil {
		return nil, false, ns.keyErr
	}
	err = m.store.Update(ctx, func(w store.Writer) error {
		task, created, err = m.startIn(w, &p, ns, id, now)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return task, created, nil
}

// NewTaskID returns a new task id, for StartIn.
func NewTaskID() string { return newTaskID() }

// StartIn is Start inside the caller's transaction w, so that the task is created
// together with the caller's own writes (a schedule advancing past the run it
// starts): with id and now fixed before the transaction, as Store.Update requires.
// p must have passed CheckStart; an error is the store's, and w must not commit.
//
// A task started by a schedule (p.ScheduledBy) takes a concurrency or lease-rate key
// like any other, but no start-rate token: its schedule already paces it, and a
// refused fire would have to be retried. A key that does not evaluate is an error.
func (m *Manager) StartIn(w store.Writer, p StartParams, id string, now time.Time) (*agentplanev1.Task, bool, error) {
	ns := m.newStart(context.Background(), &p)
	if ns.keyErr != nil {
		return nil, false, ns.keyErr
	}
	return m.startIn(w, &p, ns, id, now)
}

// start is what Start derives from its parameters before the transaction.
type start struct {
	reqDigest []byte
	input     *agentplanev1.Message
	spec      *storagev1.TaskSpecRecord
	kind      string
	// keys holds the flow-control keys (concurrency_key, rate_key) the queue's policies
	// compute; startBucket is the start-rate key ("" when none); keyErr refuses the
	// start when a key does not evaluate.
	keys        *storagev1.TaskRecord
	startBucket string
	keyErr      error
}

func (m *Manager) newStart(ctx context.Context, p *StartParams) *start {
	reqDigest := p.RequestDigest
	if p.RequestID == "" {
		reqDigest = nil // nothing can look the task up to compare it
	} else if reqDigest == nil {
		reqDigest = p.fallbackDigest()
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
	ns := &start{reqDigest: reqDigest, input: input, spec: spec, kind: kind, keys: &storagev1.TaskRecord{}}
	ns.startBucket, ns.keyErr = m.flowKeys(ctx, p, ns.keys)
	return ns
}

func (m *Manager) startIn(w store.Writer, p *StartParams, ns *start, id string, now time.Time) (*agentplanev1.Task, bool, error) {
	reqDigest, input, spec, kind := ns.reqDigest, ns.input, ns.spec, ns.kind
	if p.RequestID != "" {
		owner, err := w.TaskForRequest(p.Tenant, p.RequestID)
		if err != nil {
			return nil, false, err
		}
		if owner != "" {
			rec, err := w.GetTask(p.Tenant, owner)
			if err != nil {
				return nil, false, err
			}
			if !bytes.Equal(rec.GetRequestDigest(), reqDigest) {
				return nil, false, apierr.New(codes.AlreadyExists, apierr.ReasonRequestIDReused,
					"request_id %q was already used for a different request (task %s); use a new request_id for a new task",
					p.RequestID, owner)
			}
			existing, err := readSpec(w, p.Tenant, owner, p.View)
			if err != nil {
				return nil, false, err
			}
			return toAPITask(rec, existing, p.View), false, nil
		}
	}
	// After the retry check: a retry of a task already started is answered whatever
	// its budget says now.
	if err := m.budgets.Check(w, p.Tenant, p.AgentID, now); err != nil {
		return nil, false, err
	}
	rec := &storagev1.TaskRecord{
		TaskId:               id,
		Tenant:               p.Tenant,
		State:                agentplanev1.TaskState_TASK_STATE_SUBMITTED,
		RequestId:            p.RequestID,
		RequestDigest:        reqDigest,
		Labels:               p.Labels,
		CreateTime:           timestamppb.New(now),
		CreatedBy:            p.Principal,
		SessionId:            p.SessionID,
		SpecKind:             kind,
		Queue:                p.Queue,
		TraceContext:         p.TraceContext,
		ScheduledBy:          p.ScheduledBy,
		AgentId:              p.AgentID,
		Priority:             p.Priority,
		ConcurrencyKey:       ns.keys.GetConcurrencyKey(),
		RateKey:              ns.keys.GetRateKey(),
		Concurrency:          p.Concurrency,
		PolicyConcurrencyKey: ns.keys.GetPolicyConcurrencyKey(),
		FairnessKey:          ns.keys.GetFairnessKey(),
	}
	// After the request id: a retry of a start that was let through is answered,
	// not refused.
	if ns.startBucket != "" && p.ScheduledBy == nil {
		if err := m.takeStartToken(w, p.Tenant, p.Queue, ns.startBucket, now); err != nil {
			return nil, false, err
		}
	}
	op := m.newOp(w, now, rec)
	if err := op.Append(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_Submitted{Submitted: &agentplanev1.TaskSubmitted{
		Input: input, Kind: kind, CreatedBy: p.Principal,
	}}}); err != nil {
		return nil, false, err
	}
	for _, ev := range p.GateEvents {
		if err := op.Append(ev); err != nil {
			return nil, false, err
		}
	}
	if err := op.Enqueue(); err != nil {
		return nil, false, err
	}
	if err := op.flush(); err != nil {
		return nil, false, err
	}
	if err := w.PutTaskSpec(p.Tenant, id, spec); err != nil {
		return nil, false, err
	}
	return toAPITask(rec, spec, p.View), true, nil
}
