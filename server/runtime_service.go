package server

import (
	"context"
	"math"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/tasks"
)

// The runtime protocol. Every write names its lease; the task domain fences it. The
// service layer adds one check before that: the lease's tenant must be one the calling
// runtime serves, so a runtime of one tenant cannot touch another's task even with a
// leaked lease id (answered like any stale lease, LEASE_LOST).

// checkLease refuses a lease outside the caller's tenants.
func checkLease(ctx context.Context, ref *agentplanev1.LeaseRef) error {
	if ref.GetTaskId() == "" || ref.GetLeaseId() == "" {
		return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "lease.task_id and lease.lease_id are required")
	}
	tenant, ok := tasks.LeaseTenant(ref.GetLeaseId())
	p, _ := auth.FromContext(ctx)
	if !ok || !p.ServesTenant(tenant) {
		return apierr.FailedPrecondition(apierr.ReasonLeaseLost, "lease %s of task %s is not a current lease", ref.GetLeaseId(), ref.GetTaskId())
	}
	return nil
}

// LeaseTasks long-polls for work in the tenants the runtime serves.
func (x *runtimeService) LeaseTasks(ctx context.Context, req *agentplanev1.LeaseTasksRequest) (*agentplanev1.LeaseTasksResponse, error) {
	p, _ := auth.FromContext(ctx)
	tenant := p.Tenant
	if tenant == auth.AllTenants {
		tenant = ""
	}
	var wait time.Duration
	if w := req.GetWait(); w != nil {
		if err := w.CheckValid(); err != nil || w.AsDuration() < 0 {
			return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "wait must be a non-negative duration")
		}
		wait = w.AsDuration()
	}
	ctx, stop := x.s.untilShutdown(ctx)
	defer stop()
	leases, err := x.s.domain.tasks.LeaseTasks(ctx, tasks.LeaseRequest{
		RuntimeID: req.GetRuntimeId(), MaxTasks: int(req.GetMaxTasks()), Wait: wait, Tenant: tenant, Queues: req.GetQueues(),
	})
	if err != nil {
		return nil, x.s.shutdownError(ctx, err)
	}
	return &agentplanev1.LeaseTasksResponse{Leases: leases}, nil
}

// Heartbeat extends a lease.
func (x *runtimeService) Heartbeat(ctx context.Context, req *agentplanev1.HeartbeatRequest) (*agentplanev1.HeartbeatResponse, error) {
	if err := checkLease(ctx, req.GetLease()); err != nil {
		return nil, err
	}
	hb, err := x.s.domain.tasks.Heartbeat(ctx, req.GetLease())
	if err != nil {
		return nil, err
	}
	return &agentplanev1.HeartbeatResponse{Deadline: timestamppb.New(hb.Deadline), Canceled: hb.Canceled, CancelReason: hb.CancelReason}, nil
}

// ReportEvents appends runtime events in one transaction.
func (x *runtimeService) ReportEvents(ctx context.Context, req *agentplanev1.ReportEventsRequest) (*agentplanev1.ReportEventsResponse, error) {
	if err := checkLease(ctx, req.GetLease()); err != nil {
		return nil, err
	}
	once, err := tasks.NewRequest(req)
	if err != nil {
		return nil, err
	}
	last, err := x.s.domain.tasks.ReportEvents(ctx, req.GetLease(), once, req.GetEvents())
	if err != nil {
		return nil, err
	}
	return &agentplanev1.ReportEventsResponse{LastSequence: last}, nil
}

// CheckToolCall asks the gate about one tool call.
func (x *runtimeService) CheckToolCall(ctx context.Context, req *agentplanev1.CheckToolCallRequest) (*agentplanev1.CheckToolCallResponse, error) {
	if err := checkLease(ctx, req.GetLease()); err != nil {
		return nil, err
	}
	return x.s.domain.approvals.CheckToolCall(ctx, req)
}

// CheckModelCall asks whether a model call may run under the task's budgets.
func (x *runtimeService) CheckModelCall(ctx context.Context, req *agentplanev1.CheckModelCallRequest) (*agentplanev1.CheckModelCallResponse, error) {
	if err := checkLease(ctx, req.GetLease()); err != nil {
		return nil, err
	}
	return x.s.domain.approvals.CheckModelCall(ctx, req)
}

// AwaitDecision waits for the decision on an interrupt (interactive delivery).
func (x *runtimeService) AwaitDecision(req *agentplanev1.AwaitDecisionRequest, stream grpc.ServerStreamingServer[agentplanev1.AwaitDecisionResponse]) error {
	ctx := stream.Context()
	if err := checkLease(ctx, req.GetLease()); err != nil {
		return err
	}
	ctx, stop := x.s.untilShutdown(ctx)
	defer stop()
	err := x.s.domain.approvals.AwaitDecision(ctx, req.GetLease(), req.GetInterruptId(), stream.Send)
	return x.s.shutdownError(ctx, err)
}

// SuspendTask gives up the lease while interrupts are pending (durable delivery).
func (x *runtimeService) SuspendTask(ctx context.Context, req *agentplanev1.SuspendTaskRequest) (*agentplanev1.SuspendTaskResponse, error) {
	if err := checkLease(ctx, req.GetLease()); err != nil {
		return nil, err
	}
	once, err := tasks.NewRequest(req)
	if err != nil {
		return nil, err
	}
	t, err := x.s.domain.approvals.SuspendTask(ctx, req.GetLease(), once)
	if err != nil {
		return nil, err
	}
	return &agentplanev1.SuspendTaskResponse{Task: t}, nil
}

// RecordVerdict records an evaluator's verdict and updates the ledger.
func (x *runtimeService) RecordVerdict(ctx context.Context, req *agentplanev1.RecordVerdictRequest) (*agentplanev1.RecordVerdictResponse, error) {
	if err := checkLease(ctx, req.GetLease()); err != nil {
		return nil, err
	}
	return x.s.domain.verdicts.Record(ctx, req)
}

// PauseTask ends a turn and waits for the user (a message or tool outputs).
func (x *runtimeService) PauseTask(ctx context.Context, req *agentplanev1.PauseTaskRequest) (*agentplanev1.PauseTaskResponse, error) {
	if err := checkLease(ctx, req.GetLease()); err != nil {
		return nil, err
	}
	once, err := tasks.NewRequest(req)
	if err != nil {
		return nil, err
	}
	in, waits, err := x.s.domain.tasks.Pause(ctx, req.GetLease(), once, req.GetMessage(), req.GetNode(), req.GetToolOutputCalls())
	if err != nil {
		return nil, err
	}
	return &agentplanev1.PauseTaskResponse{Interrupt: in, ToolOutputInterrupts: waits}, nil
}

// CompleteTask ends the task with its output.
func (x *runtimeService) CompleteTask(ctx context.Context, req *agentplanev1.CompleteTaskRequest) (*agentplanev1.CompleteTaskResponse, error) {
	if err := checkLease(ctx, req.GetLease()); err != nil {
		return nil, err
	}
	once, err := tasks.NewRequest(req)
	if err != nil {
		return nil, err
	}
	t, err := x.s.domain.tasks.Complete(ctx, req.GetLease(), once, req.GetOutput())
	if err != nil {
		return nil, err
	}
	return &agentplanev1.CompleteTaskResponse{Task: t}, nil
}

// FailTask fails the task, or returns it to the queue.
func (x *runtimeService) FailTask(ctx context.Context, req *agentplanev1.FailTaskRequest) (*agentplanev1.FailTaskResponse, error) {
	if err := checkLease(ctx, req.GetLease()); err != nil {
		return nil, err
	}
	once, err := tasks.NewRequest(req)
	if err != nil {
		return nil, err
	}
	t, err := x.s.domain.tasks.Fail(ctx, req.GetLease(), once, req.GetReason(), req.GetMessage(), req.GetRetry())
	if err != nil {
		return nil, err
	}
	return &agentplanev1.FailTaskResponse{Task: t}, nil
}

// ReadTaskHistory reads a page of the log of a task the runtime holds a lease on.
func (x *runtimeService) ReadTaskHistory(ctx context.Context, req *agentplanev1.ReadTaskHistoryRequest) (*agentplanev1.ReadTaskHistoryResponse, error) {
	if err := checkLease(ctx, req.GetLease()); err != nil {
		return nil, err
	}
	events, last, err := x.s.domain.tasks.ReadHistory(ctx, req.GetLease(), req.GetAfterSequence(), int(req.GetPageSize()))
	if err != nil {
		return nil, err
	}
	return &agentplanev1.ReadTaskHistoryResponse{Events: events, LastSequence: last}, nil
}

// PublishDeltas hands message deltas to the task's live watchers; nothing is stored.
func (x *runtimeService) PublishDeltas(ctx context.Context, req *agentplanev1.PublishDeltasRequest) (*agentplanev1.PublishDeltasResponse, error) {
	if err := checkLease(ctx, req.GetLease()); err != nil {
		return nil, err
	}
	n, err := x.s.domain.tasks.PublishDeltas(ctx, req.GetLease(), req.GetDeltas())
	if err != nil {
		return nil, err
	}
	return &agentplanev1.PublishDeltasResponse{Watchers: int32(min(n, math.MaxInt32))}, nil
}
