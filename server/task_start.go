package server

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"

	"github.com/agentplane/agentplane/gates"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/schedules"
	"github.com/agentplane/agentplane/server/spec"
	"github.com/agentplane/agentplane/server/tasks"
)

// StartTask validates the spec exactly as ValidateSpec does, applies the MCP/A2A
// gates, compiles the interrupt policy, resolves the spec for runtimes and persists
// the task with its first events in one transaction. The response carries the basic
// view unless the request asks for the full one.
func (x *taskService) StartTask(ctx context.Context, req *agentplanev1.StartTaskRequest) (*agentplanev1.StartTaskResponse, error) {
	s := x.s
	p := principalOf(ctx)
	tenant, err := auth.TenantOf(ctx)
	if err != nil {
		return nil, err
	}
	view, err := taskView(req.GetView(), tasks.ViewBasic)
	if err != nil {
		return nil, err
	}
	if schedules.ReservedRequestID(req.GetRequestId()) {
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument,
			"request_id %q: ids starting with \"schedule:\" are the ones schedule runs derive; choose another", req.GetRequestId())
	}
	params, err := s.startParams(ctx, tenant, p.Subject, req)
	if err != nil {
		return nil, err
	}
	params.View = view
	task, created, err := s.domain.tasks.Start(ctx, params)
	if err != nil {
		return nil, err
	}
	if created {
		s.log.Debug("task started", "tenant", tenant, "task", task.GetTaskId())
	}
	return &agentplanev1.StartTaskResponse{Task: task, Created: created}, nil
}

// startParams checks a StartTaskRequest of principal in tenant and turns it into the
// parameters of tasks.Manager.Start: the spec validated exactly as ValidateSpec does
// and resolved, the MCP/A2A gates applied, the interrupt policy compiled. StartTask
// and every schedule run go through it.
func (s *Server) startParams(ctx context.Context, tenant, principal string, req *agentplanev1.StartTaskRequest) (tasks.StartParams, error) {
	params := tasks.StartParams{
		Tenant:       tenant,
		Principal:    principal,
		RequestID:    req.GetRequestId(),
		Input:        req.GetInput(),
		Labels:       req.GetLabels(),
		ToolAxes:     req.GetToolAxes(),
		SessionID:    req.GetSessionId(),
		Queue:        req.GetQueue(),
		TraceContext: traceContextOf(ctx),
		Priority:     req.GetPriority(),
		Concurrency:  req.GetConcurrency(),
	}
	if params.RequestID != "" {
		// Only a retry with the same request_id compares digests.
		params.RequestDigest = tasks.RequestDigest(req)
	}
	if q := req.GetQueue(); q != "" {
		if err := tasks.CheckQueue("queue", q); err != nil {
			return tasks.StartParams{}, err
		}
	}
	if t := req.GetInterruptTimeout(); t != nil {
		if err := t.CheckValid(); err != nil || t.AsDuration() < 0 {
			return tasks.StartParams{}, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "interrupt_timeout must be a non-negative duration")
		}
		params.InterruptTimeout = t.AsDuration()
	}

	// What runs: validated by the same code as ValidateSpec.
	var err error
	if params.Resolved, err = s.resolveStartSpec(ctx, req, tenant, &params); err != nil {
		return tasks.StartParams{}, err
	}

	// The gates: the compliance posture, locked keys, caller MCP servers and A2A peers,
	// tool axes.
	d := s.gates.For(tenant)
	if params.Graph != nil && !gates.WorkflowsAllowed(d) {
		return tasks.StartParams{}, apierr.FailedPrecondition(apierr.ReasonComplianceDenied,
			"this deployment's compliance posture %q denies workflows: multi-agent graphs (GraphSpec) cannot run here; start an AgentSpec", d.Posture)
	}
	g, err := gates.ResolveStartTask(d, req)
	if err != nil {
		return tasks.StartParams{}, gateError(err)
	}
	params.McpServers, params.A2aPeers, params.GateEvents = g.Mcp.Effective, g.A2a.Effective, g.Events
	for _, lane := range []struct {
		name    string
		ignored *agentplanev1.InjectionIgnored
	}{{"mcp_injection_ignored", g.Mcp.Ignored}, {"a2a_injection_ignored", g.A2a.Ignored}} {
		if lane.ignored != nil {
			s.log.Info(lane.name, "tenant", tenant, "principal", principal, "request_id", req.GetRequestId(),
				"reason", lane.ignored.GetReason(), "names", strings.Join(lane.ignored.GetNames(), ","))
		}
	}

	// The interrupt policy, compiled and type-checked now so that a bad one never
	// becomes a task (and the gate finds it in the compile cache).
	if pol := req.GetInterruptPolicy(); pol != nil {
		if _, err := s.domain.compiler.Compile(pol); err != nil {
			if apierr.HasReason(err, apierr.ReasonPolicyInvalid) {
				return tasks.StartParams{}, err // already says what is wrong, with a BadRequest per violation
			}
			return tasks.StartParams{}, apierr.Wrap(err, codes.InvalidArgument, apierr.ReasonPolicyInvalid, "invalid interrupt_policy")
		}
		params.InterruptPolicy = pol
	}

	return params, nil
}

// resolveStartSpec validates the request's spec and returns what the runtime runs,
// filling the submitted spec into params.
func (s *Server) resolveStartSpec(ctx context.Context, req *agentplanev1.StartTaskRequest, tenant string, params *tasks.StartParams) (*agentplanev1.ResolvedSpec, error) {
	if req.GetSource() == nil {
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument,
			"give exactly one of spec, document or agent_id")
	}
	in := spec.Input{Document: req.GetDocument(), SpecJSON: req.GetSpec(),
		Format: req.GetFormat(), TenantMaxDepth: s.tenantMaxDepth(tenant, 0)}
	if id := req.GetAgentId(); id != "" {
		static, ok := s.domain.static[id]
		if !ok {
			return nil, apierr.InvalidArgument(apierr.ReasonSpecInvalid,
				"agent_id %q is not in this deployment's static agent table (spec.static_agents)", id)
		}
		params.AgentID = id
		in.Agent = static
	}
	res, err := s.validate(ctx, in)
	if err != nil {
		return nil, err
	}
	if !res.Valid() {
		return nil, invalidSpec(res)
	}
	if params.AgentID == "" {
		params.Agent, params.Graph = res.Agent, res.Graph
	}
	return s.domain.specs.Resolve(res)
}

// invalidSpec is the INVALID_ARGUMENT error of a spec that fails validation, with
// every violation attached.
func invalidSpec(res *spec.Result) error {
	msg := "the spec is invalid"
	if n := len(res.Errors); n > 0 {
		first := res.Errors[0]
		msg += ": " + spec.FormatViolation("", first)
		if n > 1 {
			msg += " (and more; see the SpecViolations detail or run ValidateSpec)"
		}
	}
	return apierr.InvalidArgument(apierr.ReasonSpecInvalid, "%s", msg).
		WithDetails(&agentplanev1.SpecViolations{Violations: res.Errors})
}

// gateError maps the gates' refusals to API errors.
func gateError(err error) error {
	var locked *gates.LockedKeyError
	var axes *gates.AxisError
	switch {
	case errors.As(err, &locked):
		e := apierr.FailedPrecondition(apierr.ReasonLockedKey, "%s", locked.Error())
		keys := make([]string, len(locked.Keys))
		for i, k := range locked.Keys {
			keys[i] = string(k)
		}
		return e.WithMetadata("keys", strings.Join(keys, ","))
	case errors.As(err, &axes):
		br := &errdetails.BadRequest{}
		for _, v := range axes.Violations {
			br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: v.Field, Description: v.Description})
		}
		return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "%s", axes.Error()).WithDetails(br)
	}
	return err
}
