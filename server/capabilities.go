package server

import (
	"context"
	"math"
	"slices"

	"google.golang.org/grpc/codes"

	"github.com/agentplane/agentplane/gates"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/spec"
	"github.com/agentplane/agentplane/server/store/pagetoken"
	"github.com/agentplane/agentplane/server/version"
)

// features is what this deployment serves: a feature is on when every RPC backing it
// (as capability_service.proto documents it) is registered on this server and the
// store, the listeners and the configuration in force support it. Nothing here is a
// constant: each flag is read from the running server.
func (s *Server) features() *agentplanev1.Features {
	registered := map[string]bool{}
	for name, info := range s.grpc.GetServiceInfo() {
		for _, m := range info.Methods {
			registered["/"+name+"/"+m.Name] = true
		}
	}
	serves := func(methods ...string) bool {
		for _, m := range methods {
			if !registered[m] {
				return false
			}
		}
		return true
	}
	st := s.domain.store.Features()
	return &agentplanev1.Features{
		SpecValidation: serves(agentplanev1.SpecService_ValidateSpec_FullMethodName, agentplanev1.SpecService_ListRules_FullMethodName,
			agentplanev1.SpecService_GetRule_FullMethodName),
		Tasks: serves(agentplanev1.TaskService_StartTask_FullMethodName, agentplanev1.TaskService_GetTask_FullMethodName,
			agentplanev1.TaskService_ListTasks_FullMethodName, agentplanev1.TaskService_CancelTask_FullMethodName,
			agentplanev1.TaskService_ContinueTask_FullMethodName),
		WatchResume:     serves(agentplanev1.TaskService_WatchTask_FullMethodName),
		IdempotentStart: serves(agentplanev1.TaskService_StartTask_FullMethodName),
		RuntimeLeases:   serves(agentplanev1.RuntimeService_LeaseTasks_FullMethodName, agentplanev1.RuntimeService_Heartbeat_FullMethodName),
		DurableInterrupts: serves(agentplanev1.HitlService_ListInterrupts_FullMethodName, agentplanev1.HitlService_ResolveInterrupt_FullMethodName,
			agentplanev1.RuntimeService_SuspendTask_FullMethodName, agentplanev1.RuntimeService_AwaitDecision_FullMethodName),
		CelPolicies: serves(agentplanev1.RuntimeService_CheckToolCall_FullMethodName),
		Verdicts: serves(agentplanev1.RuntimeService_RecordVerdict_FullMethodName, agentplanev1.TaskService_ListVerdicts_FullMethodName,
			agentplanev1.TaskService_ListObligations_FullMethodName),
		ChatMode:  serves(agentplanev1.RuntimeService_PauseTask_FullMethodName, agentplanev1.TaskService_ContinueTask_FullMethodName),
		HotBackup: st.HotBackup && serves(agentplanev1.AdminService_Backup_FullMethodName),
		HttpJson:  s.http != nil,
		Schedules: serves(agentplanev1.ScheduleService_CreateSchedule_FullMethodName, agentplanev1.ScheduleService_GetSchedule_FullMethodName,
			agentplanev1.ScheduleService_ListSchedules_FullMethodName, agentplanev1.ScheduleService_TriggerSchedule_FullMethodName,
			agentplanev1.ScheduleService_DeleteSchedule_FullMethodName),
	}
}

// GetCapabilities answers for the calling principal. Every field is derived from what
// this process actually serves: a feature is true only when its RPCs work.
func (x *capabilityService) GetCapabilities(ctx context.Context, _ *agentplanev1.GetCapabilitiesRequest) (*agentplanev1.GetCapabilitiesResponse, error) {
	s := x.s
	p, ok := auth.FromContext(ctx)
	if !ok {
		return nil, apierr.New(codes.Unauthenticated, apierr.ReasonUnauthenticated, "no principal")
	}
	// The gate-derived answers come from the same predicates StartTask reads.
	d := s.gates.For(p.Tenant)
	caps := gates.Capabilities(d)
	caps.ServerVersion = version.String()
	caps.Store = s.domain.store.Features().Backend
	caps.Principal = p.Proto()
	caps.Features = s.features()
	caps.Spec = spec.Vocabulary()
	if !gates.WorkflowsAllowed(d) {
		caps.Spec.Kinds = slices.DeleteFunc(caps.Spec.Kinds, func(k string) bool { return k == spec.KindGraph })
	}
	caps.DecisionTypes = []agentplanev1.DecisionType{
		agentplanev1.DecisionType_DECISION_TYPE_APPROVE,
		agentplanev1.DecisionType_DECISION_TYPE_REJECT,
		agentplanev1.DecisionType_DECISION_TYPE_EDIT,
	}
	maxDepth := s.cfg.Spec.PlatformMaxDepth
	if t := s.tenantMaxDepth(p.Tenant, 0); t > 0 && t < maxDepth {
		maxDepth = t
	}
	lim := s.cfg.Limits
	caps.Limits = &agentplanev1.Limits{
		MaxDepth:             int32(maxDepth),
		MaxSpecBytes:         lim.MaxSpecBytes,
		MaxEventBytes:        lim.MaxEventBytes,
		MaxTaskHistoryBytes:  lim.MaxTaskHistoryBytes,
		MaxTaskEvents:        int32(min(lim.MaxTaskEvents, math.MaxInt32)),
		MaxRequestBytes:      lim.MaxRequestBytes(),
		MaxInputBytes:        lim.MaxInputBytes,
		MaxLabels:            int32(lim.MaxLabels),
		MaxListResponseBytes: lim.MaxListResponseBytes,
		MaxEventsPerReport:   int32(lim.MaxEventsPerReport()),
		DefaultPageSize:      pagetoken.DefaultPageSize,
		MaxPageSize:          pagetoken.MaxPageSize,
	}
	if s.limits.enabled { // the per-principal limits hold in multi-tenant mode only
		caps.Limits.MaxCallsPerPrincipal = int32(s.limits.max[slotCall])
		caps.Limits.MaxWatchesPerPrincipal = int32(s.limits.max[slotWatch])
		caps.Limits.MaxAwaitsPerPrincipal = int32(s.limits.max[slotAwait])
	}
	return &agentplanev1.GetCapabilitiesResponse{Capabilities: caps}, nil
}
