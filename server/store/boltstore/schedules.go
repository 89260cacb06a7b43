package boltstore

import (
	"bytes"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

func (r reader) GetSchedule(tenant, scheduleID string) (*storagev1.ScheduleRecord, error) {
	if err := store.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if !schema.ValidComponent(scheduleID) {
		return nil, store.ErrScheduleNotFound(scheduleID)
	}
	key := schema.ScheduleKey(tenant, scheduleID)
	v := r.bucket(schema.Schedules).Get(key)
	if v == nil {
		return nil, store.ErrScheduleNotFound(scheduleID)
	}
	rec := &storagev1.ScheduleRecord{}
	return rec, unmarshal(v, rec, "schedule", key)
}

func (r reader) ScanSchedules(tenant, after string, fn func(*storagev1.ScheduleRecord) (bool, error)) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	prefix := schema.TenantPrefix(tenant)
	c := r.bucket(schema.Schedules).Cursor()
	k, v := c.Seek(prefix)
	if after != "" {
		start := schema.ScheduleKey(tenant, after)
		if k, v = c.Seek(start); bytes.Equal(k, start) {
			k, v = c.Next()
		}
	}
	for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		rec := &storagev1.ScheduleRecord{}
		if err := unmarshal(v, rec, "schedule", k); err != nil {
			return err
		}
		if more, err := fn(rec); err != nil || !more {
			return err
		}
	}
	return nil
}

func (r reader) ScanDueSchedules(until time.Time, fn func(store.ScheduleDue) (bool, error)) error {
	stop := schema.ScheduleDueKey(until.Add(time.Nanosecond), "", "")
	c := r.bucket(schema.SchedulesDue).Cursor()
	for k, _ := c.First(); k != nil && bytes.Compare(k, stop) < 0; k, _ = c.Next() {
		at, tenant, id, ok := schema.DecodeScheduleDueKey(k)
		if !ok {
			return fmt.Errorf("store: malformed schedule due key %x", k)
		}
		if more, err := fn(store.ScheduleDue{Tenant: tenant, ScheduleID: id, Wake: at}); err != nil || !more {
			return err
		}
	}
	return nil
}

func (r reader) ScheduleCount(tenant string) (int64, error) {
	if err := store.CheckTenant(tenant); err != nil {
		return 0, err
	}
	return schema.DecodeCount(r.bucket(schema.Counters).Get(schema.CounterKey(tenant, schema.CounterSchedules))), nil
}

// ScheduleCount implements store.Reader with the counter changes this transaction has
// made so far, which are applied only at its commit.
func (w *writer) ScheduleCount(tenant string) (int64, error) {
	n, err := w.reader.ScheduleCount(tenant)
	if err != nil {
		return 0, err
	}
	return n + w.state.counts[string(schema.CounterKey(tenant, schema.CounterSchedules))], nil
}

// TryLockSchedule is GetSchedule: bbolt has one writer at a time.
func (w *writer) TryLockSchedule(tenant, scheduleID string) (*storagev1.ScheduleRecord, error) {
	return w.GetSchedule(tenant, scheduleID)
}

func (w *writer) PutSchedule(rec *storagev1.ScheduleRecord) error {
	old, err := store.ScheduleBeforePut(w, rec)
	if err != nil {
		return err
	}
	if _, err := w.moveIndex(schema.SchedulesDue, store.ScheduleDueKey(old), store.ScheduleDueKey(rec)); err != nil {
		return err
	}
	if old == nil {
		if err := w.addCount(rec.GetTenant(), schema.CounterSchedules, 1); err != nil {
			return err
		}
	}
	return w.put(schema.Schedules, schema.ScheduleKey(rec.GetTenant(), rec.GetScheduleId()), rec)
}

func (w *writer) DeleteSchedule(tenant, scheduleID string) error {
	old, err := w.GetSchedule(tenant, scheduleID)
	if err != nil {
		return err
	}
	if _, err := w.moveIndex(schema.SchedulesDue, store.ScheduleDueKey(old), nil); err != nil {
		return err
	}
	if err := w.addCount(tenant, schema.CounterSchedules, -1); err != nil {
		return err
	}
	return w.del(schema.Schedules, schema.ScheduleKey(tenant, scheduleID))
}

func (r reader) ScheduleTenants(after string, fn func(string) (bool, error)) error {
	c := r.bucket(schema.Schedules).Cursor()
	k, _ := c.First()
	if after != "" {
		k, _ = seekPast(c, schema.TenantPrefix(after))
	}
	for k != nil {
		tenant, _, ok := schema.SplitTenant(k)
		if !ok {
			return fmt.Errorf("store: malformed schedule key %x", k)
		}
		if more, err := fn(tenant); err != nil || !more {
			return err
		}
		k, _ = seekPast(c, schema.TenantPrefix(tenant))
	}
	return nil
}
