package server

import (
	"context"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/schedules"
)

// The ScheduleService RPCs: each checks the id, takes the caller's tenant and calls
// the schedules domain, which validates the rest.

func (x *scheduleService) CreateSchedule(ctx context.Context, req *agentplanev1.CreateScheduleRequest) (*agentplanev1.CreateScheduleResponse, error) {
	tenant, err := auth.TenantOf(ctx)
	if err != nil {
		return nil, err
	}
	sc, created, err := x.s.domain.schedules.Create(ctx, tenant, principalOf(ctx).Subject, req)
	if err != nil {
		return nil, err
	}
	x.s.log.Info("schedule created", "tenant", tenant, "schedule", sc.GetScheduleId(), "created", created)
	return &agentplanev1.CreateScheduleResponse{Schedule: sc, Created: created}, nil
}

func (x *scheduleService) GetSchedule(ctx context.Context, req *agentplanev1.GetScheduleRequest) (*agentplanev1.GetScheduleResponse, error) {
	tenant, err := scheduleTenant(ctx, req.GetScheduleId())
	if err != nil {
		return nil, err
	}
	sc, err := x.s.domain.schedules.Get(ctx, tenant, req.GetScheduleId())
	if err != nil {
		return nil, err
	}
	return &agentplanev1.GetScheduleResponse{Schedule: sc}, nil
}

func (x *scheduleService) ListSchedules(ctx context.Context, req *agentplanev1.ListSchedulesRequest) (*agentplanev1.ListSchedulesResponse, error) {
	tenant, err := auth.TenantOf(ctx)
	if err != nil {
		return nil, err
	}
	list, next, err := x.s.domain.schedules.List(ctx, tenant, req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &agentplanev1.ListSchedulesResponse{Schedules: list, NextPageToken: next}, nil
}

func (x *scheduleService) UpdateSchedule(ctx context.Context, req *agentplanev1.UpdateScheduleRequest) (*agentplanev1.UpdateScheduleResponse, error) {
	tenant, err := scheduleTenant(ctx, req.GetScheduleId())
	if err != nil {
		return nil, err
	}
	sc, err := x.s.domain.schedules.Update(ctx, tenant, principalOf(ctx).Subject, req)
	if err != nil {
		return nil, err
	}
	return &agentplanev1.UpdateScheduleResponse{Schedule: sc}, nil
}

func (x *scheduleService) PauseSchedule(ctx context.Context, req *agentplanev1.PauseScheduleRequest) (*agentplanev1.PauseScheduleResponse, error) {
	tenant, err := scheduleTenant(ctx, req.GetScheduleId())
	if err != nil {
		return nil, err
	}
	sc, err := x.s.domain.schedules.Pause(ctx, tenant, req.GetScheduleId(), req.GetReason())
	if err != nil {
		return nil, err
	}
	return &agentplanev1.PauseScheduleResponse{Schedule: sc}, nil
}

func (x *scheduleService) ResumeSchedule(ctx context.Context, req *agentplanev1.ResumeScheduleRequest) (*agentplanev1.ResumeScheduleResponse, error) {
	tenant, err := scheduleTenant(ctx, req.GetScheduleId())
	if err != nil {
		return nil, err
	}
	sc, err := x.s.domain.schedules.Resume(ctx, tenant, req.GetScheduleId())
	if err != nil {
		return nil, err
	}
	return &agentplanev1.ResumeScheduleResponse{Schedule: sc}, nil
}

func (x *scheduleService) TriggerSchedule(ctx context.Context, req *agentplanev1.TriggerScheduleRequest) (*agentplanev1.TriggerScheduleResponse, error) {
	tenant, err := scheduleTenant(ctx, req.GetScheduleId())
	if err != nil {
		return nil, err
	}
	run, task, err := x.s.domain.schedules.Trigger(ctx, tenant, req.GetScheduleId(), req.GetRequestId())
	if err != nil {
		return nil, err
	}
	return &agentplanev1.TriggerScheduleResponse{Run: run, Task: task}, nil
}

func (x *scheduleService) DeleteSchedule(ctx context.Context, req *agentplanev1.DeleteScheduleRequest) (*agentplanev1.DeleteScheduleResponse, error) {
	tenant, err := scheduleTenant(ctx, req.GetScheduleId())
	if err != nil {
		return nil, err
	}
	if err := x.s.domain.schedules.Delete(ctx, tenant, req.GetScheduleId()); err != nil {
		return nil, err
	}
	x.s.log.Info("schedule deleted", "tenant", tenant, "schedule", req.GetScheduleId())
	return &agentplanev1.DeleteScheduleResponse{}, nil
}

// scheduleTenant is the caller's tenant, for a request naming a schedule id that
// must be well formed.
func scheduleTenant(ctx context.Context, id string) (string, error) {
	if err := schedules.CheckID(id); err != nil {
		return "", err
	}
	return auth.TenantOf(ctx)
}
