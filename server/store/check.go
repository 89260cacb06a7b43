package store

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/server/apierr"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

// CheckTenant refuses a tenant id that cannot be a key component. Every
// implementation checks the tenant of each read and write with it.
func CheckTenant(tenant string) error {
	if !schema.ValidComponent(tenant) {
		return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "tenant id must be 1 to %d bytes", schema.MaxComponent)
	}
	return nil
}

// CheckTaskRecord is what every implementation's Writer.PutTask checks of rec before it
// looks the task up: the keys it will be stored under are valid.
func CheckTaskRecord(rec *storagev1.TaskRecord) error {
	id := rec.GetTaskId()
	if err := CheckTenant(rec.GetTenant()); err != nil {
		return err
	}
	if !schema.ValidComponent(id) {
		return fmt.Errorf("store: task id %q is empty or longer than %d bytes", id, schema.MaxComponent)
	}
	if rec.GetCreateTime() == nil {
		return fmt.Errorf("store: task %s has no create_time", id)
	}
	if reqID := rec.GetRequestId(); reqID != "" && !schema.ValidComponent(reqID) {
		return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "request_id is longer than %d bytes", schema.MaxComponent)
	}
	if q := rec.GetQueue(); q != "" && !schema.ValidQueueName(q) {
		return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "queue %q is not a queue name", q)
	}
	return nil
}

// CheckTaskUpdate refuses rec as the new version of old (the stored record) when it
// changes what the indexes are keyed by: create_time, request_id and queue.
func CheckTaskUpdate(old, rec *storagev1.TaskRecord) error {
	if !proto.Equal(old.GetCreateTime(), rec.GetCreateTime()) || old.GetRequestId() != rec.GetRequestId() ||
		QueueOf(old) != QueueOf(rec) {
		return fmt.Errorf("store: task %s: create_time, request_id and queue are immutable", rec.GetTaskId())
	}
	return nil
}

// CheckOutboxRecord is what every implementation's Writer.PutOutbox checks of rec: the
// keys it is stored under are valid, and a pending record says when it is due.
func CheckOutboxRecord(rec *storagev1.OutboxRecord) error {
	id := rec.GetId()
	if err := CheckTenant(rec.GetTenant()); err != nil {
		return err
	}
	if !schema.ValidComponent(id) {
		return fmt.Errorf("store: outbox id %q is empty or longer than %d bytes", id, schema.MaxComponent)
	}
	if rec.GetCreateTime() == nil || rec.GetEndpoint() == "" {
		return fmt.Errorf("store: outbox record %s has no create_time or endpoint", id)
	}
	switch rec.GetState() {
	case storagev1.OutboxState_OUTBOX_STATE_PENDING:
		if rec.GetNextAttemptTime() == nil {
			return fmt.Errorf("store: pending outbox record %s has no next_attempt_time", id)
		}
	case storagev1.OutboxState_OUTBOX_STATE_DEAD:
	default:
		return fmt.Errorf("store: outbox record %s has state %v", id, rec.GetState())
	}
	return nil
}

// CheckOutboxUpdate refuses rec as the new version of old when it changes an
// immutable field: tenant, endpoint, create_time.
func CheckOutboxUpdate(old, rec *storagev1.OutboxRecord) error {
	if old.GetTenant() != rec.GetTenant() || old.GetEndpoint() != rec.GetEndpoint() ||
		!proto.Equal(old.GetCreateTime(), rec.GetCreateTime()) {
		return fmt.Errorf("store: outbox record %s: tenant, endpoint and create_time are immutable", rec.GetId())
	}
	return nil
}

// OutboxBeforePut is what every implementation's Writer.PutOutbox does before it
// writes: check rec, read the stored version (nil when new) and check the change.
func OutboxBeforePut(r Reader, rec *storagev1.OutboxRecord) (*storagev1.OutboxRecord, error) {
	if err := CheckOutboxRecord(rec); err != nil {
		return nil, err
	}
	old, err := r.GetOutbox(rec.GetId())
	if err != nil && !IsNotFound(err) {
		return nil, err
	}
	if old != nil {
		if err := CheckOutboxUpdate(old, rec); err != nil {
			return nil, err
		}
	}
	return old, nil
}

// CheckScheduleRecord is what every implementation's Writer.PutSchedule checks of rec:
// the keys it is stored under are valid, and it has a revision and a create_time.
func CheckScheduleRecord(rec *storagev1.ScheduleRecord) error {
	if err := CheckTenant(rec.GetTenant()); err != nil {
		return err
	}
	if id := rec.GetScheduleId(); !schema.ValidComponent(id) {
		return fmt.Errorf("store: schedule id %q is empty or longer than %d bytes", id, schema.MaxComponent)
	}
	if rec.GetRevision() < 1 || rec.GetCreateTime() == nil {
		return fmt.Errorf("store: schedule %s has no revision or create_time", rec.GetScheduleId())
	}
	return nil
}

// ScheduleBeforePut is what every implementation's Writer.PutSchedule does before it
// writes: check rec, read the stored version (nil when rec creates it) and check the
// change.
func ScheduleBeforePut(r Reader, rec *storagev1.ScheduleRecord) (*storagev1.ScheduleRecord, error) {
	if err := CheckScheduleRecord(rec); err != nil {
		return nil, err
	}
	old, err := r.GetSchedule(rec.GetTenant(), rec.GetScheduleId())
	if err != nil && !IsNotFound(err) {
		return nil, err
	}
	switch {
	case rec.GetRevision() == 1 && old != nil:
		return nil, ErrScheduleExists(rec.GetScheduleId())
	case rec.GetRevision() > 1 && old == nil:
		return nil, ErrScheduleNotFound(rec.GetScheduleId())
	case old != nil && !proto.Equal(old.GetCreateTime(), rec.GetCreateTime()):
		return nil, fmt.Errorf("store: schedule %s: create_time is immutable", rec.GetScheduleId())
	}
	return old, nil
}

// ScheduleDueKey is the due-index key of a schedule record, or nil when it is not due
// (no wake_time).
func ScheduleDueKey(rec *storagev1.ScheduleRecord) []byte {
	if rec == nil || rec.GetWakeTime() == nil {
		return nil
	}
	return schema.ScheduleDueKey(rec.GetWakeTime().AsTime(), rec.GetTenant(), rec.GetScheduleId())
}
