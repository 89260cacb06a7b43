package tasks

import (
	"context"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// History page sizes for ReadHistory.
const (
	defaultHistoryPage = 256
	maxHistoryPage     = 1000
)

// ReadHistory reads up to pageSize events (0: 256, at most 1000) of the task ref
// names, after afterSeq, for the runtime holding the lease; it also returns the task's
// newest sequence. It is fenced like a write but only reads: a stale or revoked lease
// is LEASE_LOST, an ended task TASK_TERMINAL, and an expired lease LEASE_LOST (its
// expiry is left to the next write or the maintenance loop).
func (m *Manager) ReadHistory(ctx context.Context, ref *agentplanev1.LeaseRef, afterSeq int64, pageSize int) ([]*agentplanev1.TaskEvent, int64, error) {
	switch {
	case afterSeq < 0:
		return nil, 0, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "after_sequence may not be negative")
	case pageSize < 0:
		return nil, 0, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "page_size may not be negative")
	case pageSize == 0:
		pageSize = defaultHistoryPage
	}
	pageSize = min(pageSize, maxHistoryPage)
	tenant, ok := LeaseTenant(ref.GetLeaseId())
	if !ok {
		return nil, 0, leaseLost("lease id %q was not issued by this control plane", ref.GetLeaseId())
	}
	now := m.clock.Now()
	var events []*agentplanev1.TaskEvent
	var last int64
	acked := false
	err := m.store.View(ctx, func(r store.Reader) error {
		events = events[:0]
		rec, err := readFenced(r, tenant, ref, now)
		if err != nil {
			return err
		}
		acked = rec.GetLease().GetAcknowledged()
		last = rec.GetLastSequence()
		return r.ScanEvents(tenant, ref.GetTaskId(), afterSeq, func(ev *storagev1.EventRecord) (bool, error) {
			events = append(events, toAPIEvent(ref.GetTaskId(), ev))
			return len(events) < pageSize, nil
		})
	})
	if err != nil {
		return nil, 0, err
	}
	if !acked {
		// A read under a lease acknowledges it (see expire); the first read pays a write.
		if err := m.acknowledge(ctx, ref); err != nil {
			return nil, 0, err
		}
	}
	return events, last, nil
}
