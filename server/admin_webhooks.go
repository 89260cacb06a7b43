package server

import (
	"context"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/pagetoken"
)

// ListWebhookDeadLetters lists the webhook notifications given up, oldest first, paged
// like every List RPC: pagetoken's page sizes and tokens sealed with the store's key,
// bound to the tenant filter.
func (x *adminService) ListWebhookDeadLetters(ctx context.Context, req *agentplanev1.ListWebhookDeadLettersRequest) (*agentplanev1.ListWebhookDeadLettersResponse, error) {
	size, err := pagetoken.PageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	codec := pagetoken.New(x.s.domain.store.TokenKey())
	scope := pagetoken.Scope("webhook_dead_letters", req.GetTenant())
	after, err := codec.Open(scope, req.GetPageToken())
	if err != nil {
		return nil, err
	}
	recs, next, err := x.s.domain.webhooks.ListDeadLetters(ctx, req.GetTenant(), string(after), size)
	if err != nil {
		return nil, err
	}
	resp := &agentplanev1.ListWebhookDeadLettersResponse{NextPageToken: codec.Seal(scope, []byte(next))}
	for _, r := range recs {
		resp.DeadLetters = append(resp.DeadLetters, deadLetter(r))
	}
	return resp, nil
}

func deadLetter(r *storagev1.OutboxRecord) *agentplanev1.WebhookDeadLetter {
	return &agentplanev1.WebhookDeadLetter{
		Id: r.GetId(), Tenant: r.GetTenant(), Endpoint: r.GetEndpoint(), EventType: r.GetEventType(),
		CreateTime: r.GetCreateTime(), Attempts: r.GetAttempts(), LastError: r.GetLastError(), DeadTime: r.GetDeadTime(),
	}
}

// RetryWebhookDeadLetter puts one dead letter, or all of them, back in the outbox.
func (x *adminService) RetryWebhookDeadLetter(ctx context.Context, req *agentplanev1.RetryWebhookDeadLetterRequest) (*agentplanev1.RetryWebhookDeadLetterResponse, error) {
	hooks := x.s.domain.webhooks
	if req.GetAll() {
		if req.GetId() != "" {
			return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "give either id or all, not both")
		}
		n, err := hooks.RetryDeadLetters(ctx, req.GetTenant())
		if err != nil {
			return nil, err
		}
		return &agentplanev1.RetryWebhookDeadLetterResponse{Retried: n}, nil
	}
	if req.GetId() == "" {
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "id is required (or all: true)").
			WithMetadata(apierr.MetaRequiredField, "id")
	}
	if err := hooks.RetryDeadLetter(ctx, req.GetId()); err != nil {
		return nil, err
	}
	x.s.log.Info("webhook dead letter retried", "id", req.GetId())
	return &agentplanev1.RetryWebhookDeadLetterResponse{Retried: 1}, nil
}
