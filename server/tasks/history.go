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
	var events []*agentplanev1.TaskEvent
	var last int64
	err := m.ViewLeased(ctx, ref, func(r store.Reader, rec *storagev1.TaskRecord) error {
		events = events[:0]
		last = rec.GetLastSequence()
		return r.ScanEvents(rec.GetTenant(), ref.GetTaskId(), afterSeq, func(ev *storagev1.EventRecord) (bool, error) {
			events = append(events, toAPIEvent(ref.GetTaskId(), ev))
			return len(events) < pageSize, nil
		})
	})
	if err != nil {
		return nil, 0, err
	}
	return events, last, nil
}

// ViewLeased runs fn in a read-only transaction on the task ref names, for a read made
// under that lease: fenced like a write (a stale or revoked lease is LEASE_LOST, an
// ended task TASK_TERMINAL, an expired lease LEASE_LOST, its expiry left to the next
// write or the maintenance loop). A lease not yet acknowledged is acknowledged after
// fn succeeds: only the first read under a lease pays a write. fn may run more than
// once.
func (m *Manager) ViewLeased(ctx context.Context, ref *agentplanev1.LeaseRef, fn func(store.Reader, *storagev1.TaskRecord) error) error {
	tenant, ok := LeaseTenant(ref.GetLeaseId())
	if !ok {
		return leaseLost("lease id %q was not issued by this control plane", ref.GetLeaseId())
	}
	now := m.clock.Now()
	acked := false
	err := m.store.View(ctx, func(r store.Reader) error {
		rec, err := readFenced(r, tenant, ref, now)
		if err != nil {
			return err
		}
		acked = rec.GetLease().GetAcknowledged()
		return fn(r, rec)
	})
	if err != nil || acked {
		return err
	}
	// A read under a lease acknowledges it (see expire).
	return m.acknowledge(ctx, ref)
}
