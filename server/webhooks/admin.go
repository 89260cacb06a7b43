package webhooks

import (
	"context"

	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// retryChunk is how many dead letters one transaction of RetryDeadLetters moves.
const retryChunk = 500

const dead = storagev1.OutboxState_OUTBOX_STATE_DEAD

// ScanBudgetPerItem bounds the dead letters one page examines per item it may return,
// so that a tenant filter matching few of them cannot make one call read the whole
// dead-letter index; a short page with a next cursor then continues the scan.
const ScanBudgetPerItem = 20

// ListDeadLetters reads up to limit (at least 1) dead letters (of tenant, or all),
// oldest first, after the id after. next is the id to continue after when more may
// follow, and "" on the last page. A page examines at most limit*ScanBudgetPerItem
// dead letters, so with a tenant it may be short, even empty, with a next cursor.
func (s *Service) ListDeadLetters(ctx context.Context, tenant, after string, limit int) (out []*storagev1.OutboxRecord, next string, err error) {
	limit = max(limit, 1)
	budget := limit * ScanBudgetPerItem
	err = s.st.View(ctx, func(r store.Reader) error {
		out, next = out[:0], ""
		examined := 0
		return r.ScanOutbox(dead, after, func(rec *storagev1.OutboxRecord) (bool, error) {
			if tenant != "" && rec.GetTenant() != tenant {
				if examined++; examined >= budget {
					next = rec.GetId()
					return false, nil
				}
				return true, nil
			}
			if len(out) == limit { // a full page and one more: the next page starts after it
				next = out[limit-1].GetId()
				return false, nil
			}
			out = append(out, rec)
			if examined++; examined >= budget && len(out) < limit {
				next = rec.GetId()
				return false, nil
			}
			return true, nil
		})
	})
	if err != nil {
		return nil, "", err
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
