package server

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/tasks"
)

// taskView resolves a request's view: UNSPECIFIED is the RPC's default, a value the
// API does not define is INVALID_ARGUMENT.
func taskView(v agentplanev1.TaskView, def tasks.View) (tasks.View, error) {
	switch v {
	case agentplanev1.TaskView_TASK_VIEW_UNSPECIFIED:
		return def, nil
	case tasks.ViewBasic, tasks.ViewFull:
		return v, nil
	}
	return 0, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "view %d is not a TaskView; use TASK_VIEW_BASIC or TASK_VIEW_FULL", v)
}

// GetTask returns one of the caller's tenant's tasks, in full unless asked otherwise.
func (x *taskService) GetTask(ctx context.Context, req *agentplanev1.GetTaskRequest) (*agentplanev1.GetTaskResponse, error) {
	tenant, err := auth.TenantOf(ctx)
	if err != nil {
		return nil, err
	}
	view, err := taskView(req.GetView(), tasks.ViewFull)
	if err != nil {
		return nil, err
	}
	t, err := x.s.domain.tasks.Get(ctx, tenant, req.GetTaskId(), view)
	if err != nil {
		return nil, err
	}
	return &agentplanev1.GetTaskResponse{Task: t}, nil
}

// ListTasks lists the caller's tenant's tasks, newest first, in the basic view unless
// asked otherwise.
func (x *taskService) ListTasks(ctx context.Context, req *agentplanev1.ListTasksRequest) (*agentplanev1.ListTasksResponse, error) {
	tenant, err := auth.TenantOf(ctx)
	if err != nil {
		return nil, err
	}
	view, err := taskView(req.GetView(), tasks.ViewBasic)
	if err != nil {
		return nil, err
	}
	q := tasks.ListQuery{
		View:      view,
		PageSize:  int(req.GetPageSize()),
		PageToken: req.GetPageToken(),
		States:    req.GetStates(),
		Queue:     req.GetQueue(),
	}
	for _, sel := range req.GetLabelSelector() {
		k, v, ok := strings.Cut(sel, "=")
		if !ok || k == "" {
			return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "label_selector %q is not key=value", sel)
		}
		if _, dup := q.Labels[k]; dup {
			return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "label_selector names label %q twice", k)
		}
		if q.Labels == nil {
			q.Labels = map[string]string{}
		}
		q.Labels[k] = v
	}
	for _, b := range []struct {
		name string
		t    *timestamppb.Timestamp
		dst  *time.Time
	}{{"created_after", req.GetCreatedAfter(), &q.CreatedAfter}, {"created_before", req.GetCreatedBefore(), &q.CreatedBefore}} {
		if b.t == nil {
			continue
		}
		if err := b.t.CheckValid(); err != nil {
			return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "%s is not a valid timestamp (nanos in [0, 1e9), years 1 to 9999): %v", b.name, err)
		}
		*b.dst = b.t.AsTime()
	}
	list, next, err := x.s.domain.tasks.List(ctx, tenant, q)
	if err != nil {
		return nil, err
	}
	return &agentplanev1.ListTasksResponse{Tasks: list, NextPageToken: next}, nil
}

// CancelTask cancels a task; the runtime holding its lease learns it on its next heartbeat.
func (x *taskService) CancelTask(ctx context.Context, req *agentplanev1.CancelTaskRequest) (*agentplanev1.CancelTaskResponse, error) {
	tenant, err := auth.TenantOf(ctx)
	if err != nil {
		return nil, err
	}
	once, err := tasks.NewRequest(req)
	if err != nil {
		return nil, err
	}
	t, err := x.s.domain.tasks.Cancel(ctx, tenant, req.GetTaskId(), principalOf(ctx).Subject, req.GetReason(), once)
	if err != nil {
		return nil, err
	}
	return &agentplanev1.CancelTaskResponse{Task: t}, nil
}

// ContinueTask resumes a task paused for its caller: a message, or tool outputs.
func (x *taskService) ContinueTask(ctx context.Context, req *agentplanev1.ContinueTaskRequest) (*agentplanev1.ContinueTaskResponse, error) {
	tenant, err := auth.TenantOf(ctx)
	if err != nil {
		return nil, err
	}
	once, err := tasks.NewRequest(req)
	if err != nil {
		return nil, err
	}
	t, err := x.s.domain.tasks.Continue(ctx, tenant, req.GetTaskId(), principalOf(ctx).Subject, req.GetMessage(), req.GetToolOutputs(), once)
	if err != nil {
		return nil, err
	}
	return &agentplanev1.ContinueTaskResponse{Task: t}, nil
}

// WatchTask replays the task's log after a sequence, then follows it live, and ends
// after the terminal event. It also ends, with UNAVAILABLE, when the server shuts down,
// so a client reconnects (to another replica, or after the restart) from its last sequence.
func (x *taskService) WatchTask(req *agentplanev1.WatchTaskRequest, stream grpc.ServerStreamingServer[agentplanev1.WatchTaskResponse]) error {
	ctx := stream.Context()
	tenant, err := auth.TenantOf(ctx)
	if err != nil {
		return err
	}
	if req.GetAfterSequence() < 0 {
		return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "after_sequence must not be negative")
	}
	ctx, stop := x.s.untilShutdown(ctx)
	defer stop()
	err = x.s.domain.tasks.Follow(ctx, tenant, req.GetTaskId(), req.GetAfterSequence(), func(ev tasks.Event) error {
		b, err := ev.Encoded(encodeWatchResponse)
		if err != nil {
			return err
		}
		return stream.SendMsg(encoded(b))
	})
	return x.s.shutdownError(ctx, err)
}

// encodeWatchResponse is the wire form of a WatchTaskResponse, as gRPC's protobuf
// codec writes it.
func encodeWatchResponse(resp *agentplanev1.WatchTaskResponse) ([]byte, error) {
	return proto.Marshal(resp)
}

// ListVerdicts pages a task's verdicts, oldest first.
func (x *taskService) ListVerdicts(ctx context.Context, req *agentplanev1.ListVerdictsRequest) (*agentplanev1.ListVerdictsResponse, error) {
	tenant, err := auth.TenantOf(ctx)
	if err != nil {
		return nil, err
	}
	list, next, err := x.s.domain.tasks.ListVerdicts(ctx, tenant, req.GetTaskId(), int(req.GetPageSize()), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &agentplanev1.ListVerdictsResponse{Verdicts: list, NextPageToken: next}, nil
}

// ListObligations pages a task's obligations ledger.
func (x *taskService) ListObligations(ctx context.Context, req *agentplanev1.ListObligationsRequest) (*agentplanev1.ListObligationsResponse, error) {
	tenant, err := auth.TenantOf(ctx)
	if err != nil {
		return nil, err
	}
	list, next, err := x.s.domain.tasks.ListObligations(ctx, tenant, req.GetTaskId(), req.GetStates(), int(req.GetPageSize()), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &agentplanev1.ListObligationsResponse{Obligations: list, NextPageToken: next}, nil
}

// ListTaskEvents pages a task's log, oldest first.
func (x *taskService) ListTaskEvents(ctx context.Context, req *agentplanev1.ListTaskEventsRequest) (*agentplanev1.ListTaskEventsResponse, error) {
	tenant, err := auth.TenantOf(ctx)
	if err != nil {
		return nil, err
	}
	list, next, err := x.s.domain.tasks.ListEvents(ctx, tenant, req.GetTaskId(), req.GetAfterSequence(), int(req.GetPageSize()), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &agentplanev1.ListTaskEventsResponse{Events: list, NextPageToken: next}, nil
}
