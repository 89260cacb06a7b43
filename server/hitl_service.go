package server

import (
	"context"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/hitl/links"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
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

// RevokeApprovalLink revokes one approval link pair of the tenant by its id. The id
// carries the link's expiry under a tag of the link key and the tenant, so an id of
// another tenant, a forged or mistyped one is NOT_FOUND without a lookup, and the
// record is kept only until the link would have expired anyway.
func (x *hitlService) RevokeApprovalLink(ctx context.Context, req *agentplanev1.RevokeApprovalLinkRequest) (*agentplanev1.RevokeApprovalLinkResponse, error) {
	tenant, err := auth.TenantOf(ctx)
	if err != nil {
		return nil, err
	}
	id := req.GetLinkId()
	if id == "" || len(id) > links.MaxID {
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "link_id: want the id of an approval link (1 to %d bytes)", links.MaxID)
	}
	is := x.s.domain.links
	if is == nil {
		return nil, apierr.NotFound(apierr.ReasonApprovalLinkNotFound, "no approval link has id %q (this deployment sends none)", id)
	}
	exp, ok := links.CheckID(is.Key, tenant, id)
	if !ok {
		return nil, apierr.NotFound(apierr.ReasonApprovalLinkNotFound, "no approval link of this tenant has id %q", id)
	}
	now := time.Now()
	resp := &agentplanev1.RevokeApprovalLinkResponse{LinkId: id, ExpireTime: timestamppb.New(exp), Expired: !now.Before(exp)}
	if resp.Expired {
		return resp, nil // it works no more: nothing to keep
	}
	by := principalOf(ctx).Subject
	if err := x.s.domain.store.Update(ctx, func(w store.Writer) error {
		old, err := w.GetLinkRevocation(tenant, id)
		if err != nil || old != nil {
			return err // revoked already: the first revocation stands
		}
		return w.PutLinkRevocation(&storagev1.LinkRevocationRecord{Tenant: tenant, LinkId: id, ExpireTime: timestamppb.New(exp),
			RevokeTime: timestamppb.New(now), RevokedBy: by})
	}); err != nil {
		return nil, err
	}
	x.s.log.Info("approval link revoked", "tenant", tenant, "link", id, "principal", by, "expires", exp)
	return resp, nil
}
