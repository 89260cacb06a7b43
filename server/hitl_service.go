package server

import (
	"context"

	"google.golang.org/grpc/metadata"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/hitl"
)

// ListInterrupts is the tenant's inbox.
func (x *hitlService) ListInterrupts(ctx context.Context, req *agentplanev1.ListInterruptsRequest) (*agentplanev1.ListInterruptsResponse, error) {
	tenant, err := auth.TenantOf(ctx)
	if err != nil {
		return nil, err
	}
	return x.s.domain.approvals.ListInterrupts(ctx, tenant, req)
}

// GetInterrupt returns one interrupt.
func (x *hitlService) GetInterrupt(ctx context.Context, req *agentplanev1.GetInterruptRequest) (*agentplanev1.GetInterruptResponse, error) {
	tenant, err := auth.TenantOf(ctx)
	if err != nil {
		return nil, err
	}
	in, err := x.s.domain.approvals.GetInterrupt(ctx, tenant, req.GetInterruptId())
	if err != nil {
		return nil, err
	}
	return &agentplanev1.GetInterruptResponse{Interrupt: in}, nil
}

// ResolveInterrupt records a reviewer's decision.
func (x *hitlService) ResolveInterrupt(ctx context.Context, req *agentplanev1.ResolveInterruptRequest) (*agentplanev1.ResolveInterruptResponse, error) {
	tenant, err := auth.TenantOf(ctx)
	if err != nil {
		return nil, err
	}
	ctx = hitl.WithChannel(ctx, clientChannel(ctx))
	in, err := x.s.domain.approvals.ResolveInterrupt(ctx, tenant, principalOf(ctx).Subject, req)
	if err != nil {
		return nil, err
	}
	return &agentplanev1.ResolveInterruptResponse{Interrupt: in}, nil
}

// ListAuditRecords lists the tenant's approval audit log.
func (x *hitlService) ListAuditRecords(ctx context.Context, req *agentplanev1.ListAuditRecordsRequest) (*agentplanev1.ListAuditRecordsResponse, error) {
	tenant, err := auth.TenantOf(ctx)
	if err != nil {
		return nil, err
	}
	return x.s.domain.approvals.ListAuditRecords(ctx, tenant, req)
}

// clientChannel is the channel a caller's x-agentplane-channel header names (ctl,
// console), the API otherwise.
func clientChannel(ctx context.Context) hitl.Channel {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(hitl.ChannelHeader); len(v) == 1 {
		return hitl.ParseClientChannel(v[0])
	}
	return hitl.ChannelAPI
}
