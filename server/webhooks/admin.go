package webhooks

import (
	"context"

	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// MaxPageSize bounds a page of dead letters.
const MaxPageSize = 1000

// retryChunk is how many dead letters one transaction of RetryDeadLetters moves.
const retryChunk = 500

const dead = storagev1.OutboxState_OUTBOX_STATE_DEAD

// ListDeadLetters reads up to limit dead letters (of tenant, or all), oldest first,
// after the id after; next is the last id returned when more may follow.
func (s *Service) ListDeadLetters(ctx context.Context, tenant, after string, limit int) (out []*storagev1.OutboxRecord, next string, err error) {
	err = s.st.View(ctx, func(r store.Reader) error {
		out = out[:0]
		return r.ScanOutbox(dead, after, func(rec *storagev1.OutboxRecord) (bool, error) {
			if tenant != "" && rec.GetTenant() != tenant {
				return true, nil
			}
			out = append(out, rec)
			return len(out) <= limit, nil
		})
	})
	if err != nil {
		return nil, "", err
	}
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].GetId()
	}
	return out, next, nil
}

// RetryDeadLetter puts one dead letter back in the outbox, due now, with its attempts
// reset. Anything else is NOT_FOUND (WEBHOOK_DELIVERY_NOT_FOUND).
func (s *Service) RetryDeadLetter(ctx context.Context, id string) error {
	err := s.st.Update(ctx, func(w store.Writer) error {
		rec, err := w.GetOutbox(id)
		if err != nil {
			return err
		}
		if rec.GetState() != dead {
			return apierr.NotFound(apierr.ReasonWebhookDeliveryNotFound, "%s is not a dead letter (it is waiting for delivery)", id)
		}
		return w.PutOutbox(s.revive(rec))
	})
	if err == nil {
		s.wakeSender()
	}
	return err
}

// RetryDeadLetters puts every dead letter (of tenant, or all) back in the outbox and
// returns how many.
func (s *Service) RetryDeadLetters(ctx context.Context, tenant string) (int64, error) {
	var total int64
	after := ""
	for {
		var n int64
		err := s.st.Update(ctx, func(w store.Writer) error {
			n = 0
			var recs []*storagev1.OutboxRecord
			if err := w.ScanOutbox(dead, after, func(rec *storagev1.OutboxRecord) (bool, error) {
				if tenant == "" || rec.GetTenant() == tenant {
					recs = append(recs, rec)
				}
				return len(recs) < retryChunk, nil
			}); err != nil {
				return err
			}
			for _, rec := range recs {
				if err := w.PutOutbox(s.revive(rec)); err != nil {
					return err
				}
			}
			n = int64(len(recs))
			return nil
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < retryChunk {
			break
		}
	}
	if total > 0 {
		s.wakeSender()
		s.log.Info("webhook dead letters retried", "tenant", tenant, "count", total)
	}
	return total, nil
}

func (s *Service) revive(rec *storagev1.OutboxRecord) *storagev1.OutboxRecord {
	rec.State = storagev1.OutboxState_OUTBOX_STATE_PENDING
	rec.Attempts, rec.Claim, rec.DeadTime = 0, "", nil
	rec.NextAttemptTime = timestampOf(s.now())
	return rec
}
