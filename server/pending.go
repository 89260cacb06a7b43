package server

// This file holds the RPCs whose implementation has not landed. Each answers
// UNIMPLEMENTED naming what is missing, so nothing pretends to work; GetCapabilities
// reports the same features as false. An RPC moves out of this file into a file of
// its own when its issue lands.

import (
	"context"

	"google.golang.org/grpc"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

// pending is the error of an RPC that has not landed.
func pending(method, what string) error {
	return apierr.Unimplemented("%s is not implemented in this build yet (%s)", method, what)
}

// Backup is pending (store administration, issue 4).
func (x *adminService) Backup(*agentplanev1.BackupRequest, grpc.ServerStreamingServer[agentplanev1.BackupResponse]) error {
	return pending("AdminService.Backup", "store administration")
}

// PurgeTasks is pending (store administration, issue 4).
func (x *adminService) PurgeTasks(context.Context, *agentplanev1.PurgeTasksRequest) (*agentplanev1.PurgeTasksResponse, error) {
	return nil, pending("AdminService.PurgeTasks", "store administration")
}

// GetStats is pending (store administration, issue 4).
func (x *adminService) GetStats(context.Context, *agentplanev1.GetStatsRequest) (*agentplanev1.GetStatsResponse, error) {
	return nil, pending("AdminService.GetStats", "store administration")
}

// ListInterrupts is pending (human approvals, issue 5).
func (x *hitlService) ListInterrupts(context.Context, *agentplanev1.ListInterruptsRequest) (*agentplanev1.ListInterruptsResponse, error) {
	return nil, pending("HitlService.ListInterrupts", "human approvals")
}

// GetInterrupt is pending (human approvals, issue 5).
func (x *hitlService) GetInterrupt(context.Context, *agentplanev1.GetInterruptRequest) (*agentplanev1.GetInterruptResponse, error) {
	return nil, pending("HitlService.GetInterrupt", "human approvals")
}

// ResolveInterrupt is pending (human approvals, issue 5).
func (x *hitlService) ResolveInterrupt(context.Context, *agentplanev1.ResolveInterruptRequest) (*agentplanev1.ResolveInterruptResponse, error) {
	return nil, pending("HitlService.ResolveInterrupt", "human approvals")
}

// LeaseTasks is pending (runtime leases, issue 4).
func (x *runtimeService) LeaseTasks(context.Context, *agentplanev1.LeaseTasksRequest) (*agentplanev1.LeaseTasksResponse, error) {
	return nil, pending("RuntimeService.LeaseTasks", "runtime leases")
}

// Heartbeat is pending (runtime leases, issue 4).
func (x *runtimeService) Heartbeat(context.Context, *agentplanev1.HeartbeatRequest) (*agentplanev1.HeartbeatResponse, error) {
	return nil, pending("RuntimeService.Heartbeat", "runtime leases")
}

// ReportEvents is pending (runtime leases, issue 4).
func (x *runtimeService) ReportEvents(context.Context, *agentplanev1.ReportEventsRequest) (*agentplanev1.ReportEventsResponse, error) {
	return nil, pending("RuntimeService.ReportEvents", "runtime leases")
}

// CheckToolCall is pending (the tool-call gate, issue 5).
func (x *runtimeService) CheckToolCall(context.Context, *agentplanev1.CheckToolCallRequest) (*agentplanev1.CheckToolCallResponse, error) {
	return nil, pending("RuntimeService.CheckToolCall", "the tool-call gate")
}

// AwaitDecision is pending (human approvals, issue 5).
func (x *runtimeService) AwaitDecision(*agentplanev1.AwaitDecisionRequest, grpc.ServerStreamingServer[agentplanev1.AwaitDecisionResponse]) error {
	return pending("RuntimeService.AwaitDecision", "human approvals")
}

// SuspendTask is pending (durable interrupts, issue 5).
func (x *runtimeService) SuspendTask(context.Context, *agentplanev1.SuspendTaskRequest) (*agentplanev1.SuspendTaskResponse, error) {
	return nil, pending("RuntimeService.SuspendTask", "durable interrupts")
}

// RecordVerdict is pending (reviewer verdicts, issue 5).
func (x *runtimeService) RecordVerdict(context.Context, *agentplanev1.RecordVerdictRequest) (*agentplanev1.RecordVerdictResponse, error) {
	return nil, pending("RuntimeService.RecordVerdict", "reviewer verdicts")
}

// PauseTask is pending (runtime leases, issue 4).
func (x *runtimeService) PauseTask(context.Context, *agentplanev1.PauseTaskRequest) (*agentplanev1.PauseTaskResponse, error) {
	return nil, pending("RuntimeService.PauseTask", "runtime leases")
}

// CompleteTask is pending (runtime leases, issue 4).
func (x *runtimeService) CompleteTask(context.Context, *agentplanev1.CompleteTaskRequest) (*agentplanev1.CompleteTaskResponse, error) {
	return nil, pending("RuntimeService.CompleteTask", "runtime leases")
}

// FailTask is pending (runtime leases, issue 4).
func (x *runtimeService) FailTask(context.Context, *agentplanev1.FailTaskRequest) (*agentplanev1.FailTaskResponse, error) {
	return nil, pending("RuntimeService.FailTask", "runtime leases")
}

// ValidateSpec is pending (spec validation, issue 3).
func (x *specService) ValidateSpec(context.Context, *agentplanev1.ValidateSpecRequest) (*agentplanev1.ValidateSpecResponse, error) {
	return nil, pending("SpecService.ValidateSpec", "spec validation")
}

// ListRules is pending (spec validation, issue 3).
func (x *specService) ListRules(context.Context, *agentplanev1.ListRulesRequest) (*agentplanev1.ListRulesResponse, error) {
	return nil, pending("SpecService.ListRules", "spec validation")
}

// GetRule is pending (spec validation, issue 3).
func (x *specService) GetRule(context.Context, *agentplanev1.GetRuleRequest) (*agentplanev1.GetRuleResponse, error) {
	return nil, pending("SpecService.GetRule", "spec validation")
}

// GetSpecSchema is pending (spec validation, issue 3).
func (x *specService) GetSpecSchema(context.Context, *agentplanev1.GetSpecSchemaRequest) (*agentplanev1.GetSpecSchemaResponse, error) {
	return nil, pending("SpecService.GetSpecSchema", "spec validation")
}

// StartTask is pending (durable tasks, issue 4).
func (x *taskService) StartTask(context.Context, *agentplanev1.StartTaskRequest) (*agentplanev1.StartTaskResponse, error) {
	return nil, pending("TaskService.StartTask", "durable tasks")
}

// ContinueTask is pending (durable tasks, issue 4).
func (x *taskService) ContinueTask(context.Context, *agentplanev1.ContinueTaskRequest) (*agentplanev1.ContinueTaskResponse, error) {
	return nil, pending("TaskService.ContinueTask", "durable tasks")
}

// GetTask is pending (durable tasks, issue 4).
func (x *taskService) GetTask(context.Context, *agentplanev1.GetTaskRequest) (*agentplanev1.GetTaskResponse, error) {
	return nil, pending("TaskService.GetTask", "durable tasks")
}

// ListTasks is pending (durable tasks, issue 4).
func (x *taskService) ListTasks(context.Context, *agentplanev1.ListTasksRequest) (*agentplanev1.ListTasksResponse, error) {
	return nil, pending("TaskService.ListTasks", "durable tasks")
}

// CancelTask is pending (durable tasks, issue 4).
func (x *taskService) CancelTask(context.Context, *agentplanev1.CancelTaskRequest) (*agentplanev1.CancelTaskResponse, error) {
	return nil, pending("TaskService.CancelTask", "durable tasks")
}

// WatchTask is pending (durable tasks, issue 4).
func (x *taskService) WatchTask(*agentplanev1.WatchTaskRequest, grpc.ServerStreamingServer[agentplanev1.WatchTaskResponse]) error {
	return pending("TaskService.WatchTask", "durable tasks")
}

// ListVerdicts is pending (reviewer verdicts, issue 5).
func (x *taskService) ListVerdicts(context.Context, *agentplanev1.ListVerdictsRequest) (*agentplanev1.ListVerdictsResponse, error) {
	return nil, pending("TaskService.ListVerdicts", "reviewer verdicts")
}

// ListObligations is pending (reviewer verdicts, issue 5).
func (x *taskService) ListObligations(context.Context, *agentplanev1.ListObligationsRequest) (*agentplanev1.ListObligationsResponse, error) {
	return nil, pending("TaskService.ListObligations", "reviewer verdicts")
}
