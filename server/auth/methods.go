package auth

import (
	"slices"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
)

// Scope says whose resources a method touches.
type Scope string

// Scopes.
const (
	// ScopeTenant: the caller's tenant's resources (TenantOf keys every lookup).
	ScopeTenant Scope = "tenant"
	// ScopeRuntime: server-to-server calls of a runtime, on tasks of the tenants it
	// serves (Principal.ServesTenant).
	ScopeRuntime Scope = "runtime"
	// ScopeAdmin: the whole deployment.
	ScopeAdmin Scope = "admin"
	// ScopePublic: no credentials needed and no principal attached (health only).
	ScopePublic Scope = "public"
)

// Rule is a method's entry in the table: its scope and the roles of which a caller
// must hold at least one (ignored for ScopePublic).
type Rule struct {
	Scope Scope
	Roles []Role
}

// Allows reports whether p may call a method with rule r.
func (r Rule) Allows(p Principal) bool {
	if r.Scope == ScopePublic {
		return true
	}
	for _, role := range r.Roles {
		if p.Has(role) {
			return true
		}
	}
	return false
}

var (
	anyRole     = []Role{RoleUser, RoleApprover, RoleRuntime, RoleAdmin}
	reader      = []Role{RoleUser, RoleApprover}
	user        = []Role{RoleUser}
	approver    = []Role{RoleApprover}
	runtimeOnly = []Role{RoleRuntime}
	admin       = []Role{RoleAdmin}
)

// methodTable is every RPC the server can serve, by full method name. A method not
// here is denied (TestMethodTableCoversEveryRPC fails first).
//
// Health is public so probes need no credentials; it says nothing about tenants.
// Reflection describes the whole API surface and is admin-only; in single-user mode
// the owner holds admin, so it is open there.
func methodTable() map[string]Rule {
	t := map[string]Rule{}
	add := func(scope Scope, roles []Role, methods ...string) {
		for _, m := range methods {
			t[m] = Rule{Scope: scope, Roles: roles}
		}
	}
	add(ScopeTenant, anyRole,
		agentplanev1.SpecService_ValidateSpec_FullMethodName,
		agentplanev1.SpecService_ListRules_FullMethodName,
		agentplanev1.SpecService_GetRule_FullMethodName,
		agentplanev1.SpecService_GetSpecSchema_FullMethodName,
		agentplanev1.CapabilityService_GetCapabilities_FullMethodName)
	add(ScopeTenant, user,
		agentplanev1.TaskService_StartTask_FullMethodName,
		agentplanev1.TaskService_ContinueTask_FullMethodName,
		agentplanev1.TaskService_CancelTask_FullMethodName)
	add(ScopeTenant, reader,
		agentplanev1.TaskService_GetTask_FullMethodName,
		agentplanev1.TaskService_ListTasks_FullMethodName,
		agentplanev1.TaskService_WatchTask_FullMethodName,
		agentplanev1.TaskService_ListVerdicts_FullMethodName,
		agentplanev1.TaskService_ListObligations_FullMethodName,
		agentplanev1.TaskService_ListTaskEvents_FullMethodName,
		agentplanev1.HitlService_ListInterrupts_FullMethodName,
		agentplanev1.HitlService_GetInterrupt_FullMethodName,
		agentplanev1.HitlService_ListAuditRecords_FullMethodName)
	add(ScopeTenant, approver,
		agentplanev1.HitlService_ResolveInterrupt_FullMethodName,
		agentplanev1.HitlService_RevokeApprovalLink_FullMethodName)
	// Schedules start tasks, so changing one needs what starting a task needs.
	add(ScopeTenant, user,
		agentplanev1.ScheduleService_CreateSchedule_FullMethodName,
		agentplanev1.ScheduleService_UpdateSchedule_FullMethodName,
		agentplanev1.ScheduleService_PauseSchedule_FullMethodName,
		agentplanev1.ScheduleService_ResumeSchedule_FullMethodName,
		agentplanev1.ScheduleService_TriggerSchedule_FullMethodName,
		agentplanev1.ScheduleService_DeleteSchedule_FullMethodName)
	add(ScopeTenant, reader,
		agentplanev1.ScheduleService_GetSchedule_FullMethodName,
		agentplanev1.ScheduleService_ListSchedules_FullMethodName)
	add(ScopeRuntime, runtimeOnly,
		agentplanev1.RuntimeService_LeaseTasks_FullMethodName,
		agentplanev1.RuntimeService_Heartbeat_FullMethodName,
		agentplanev1.RuntimeService_ReportEvents_FullMethodName,
		agentplanev1.RuntimeService_CheckToolCall_FullMethodName,
		agentplanev1.RuntimeService_CheckModelCall_FullMethodName,
		agentplanev1.RuntimeService_AwaitDecision_FullMethodName,
		agentplanev1.RuntimeService_SuspendTask_FullMethodName,
		agentplanev1.RuntimeService_RecordVerdict_FullMethodName,
		agentplanev1.RuntimeService_PauseTask_FullMethodName,
		agentplanev1.RuntimeService_CompleteTask_FullMethodName,
		agentplanev1.RuntimeService_FailTask_FullMethodName,
		agentplanev1.RuntimeService_ReadTaskHistory_FullMethodName,
		agentplanev1.RuntimeService_PublishDeltas_FullMethodName)
	add(ScopeAdmin, admin,
		agentplanev1.AdminService_Backup_FullMethodName,
		agentplanev1.AdminService_PurgeTasks_FullMethodName,
		agentplanev1.AdminService_GetStats_FullMethodName,
		agentplanev1.AdminService_ListWebhookDeadLetters_FullMethodName,
		agentplanev1.AdminService_RetryWebhookDeadLetter_FullMethodName,
		reflectionv1.ServerReflection_ServerReflectionInfo_FullMethodName,
		reflectionv1alpha.ServerReflection_ServerReflectionInfo_FullMethodName)
	add(ScopePublic, nil,
		grpc_health_v1.Health_Check_FullMethodName,
		grpc_health_v1.Health_Watch_FullMethodName,
		grpc_health_v1.Health_List_FullMethodName)
	return t
}

// Lookup returns the rule of a full method name ("/agentplane.v1.TaskService/StartTask").
func (g *Guard) Lookup(fullMethod string) (Rule, bool) {
	r, ok := g.methods[fullMethod]
	if ok {
		r.Roles = slices.Clone(r.Roles)
	}
	return r, ok
}

// Methods returns every full method name in the table, sorted.
func (g *Guard) Methods() []string {
	out := make([]string, 0, len(g.methods))
	for m := range g.methods {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}
