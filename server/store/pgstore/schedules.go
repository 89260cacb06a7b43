package pgstore

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

// getSchedule reads one schedule with the query q (which may lock its row); ok is
// false when there is no row.
func (r *reader) getSchedule(q, tenant, scheduleID string) (*storagev1.ScheduleRecord, bool, error) {
	if err := store.CheckTenant(tenant); err != nil {
		return nil, false, err
	}
	if !schema.ValidComponent(scheduleID) {
		return nil, false, nil
	}
	v, ok, err := r.get(q, tenant, scheduleID)
	if err != nil || !ok {
		return nil, false, err
	}
	rec := &storagev1.ScheduleRecord{}
	return rec, true, unmarshal(v, rec, "schedule", scheduleID)
}

func (r *reader) GetSchedule(tenant, scheduleID string) (*storagev1.ScheduleRecord, error) {
	q := "SELECT rec FROM schedules WHERE tenant = $1 AND schedule_id = $2"
	if r.lock {
		q += " FOR UPDATE"
	}
	rec, ok, err := r.getSchedule(q, tenant, scheduleID)
	if err == nil && !ok {
		err = store.ErrScheduleNotFound(scheduleID)
	}
	return rec, err
}

func (r *reader) ScanSchedules(tenant, after string, fn func(*storagev1.ScheduleRecord) (bool, error)) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	for {
		// Id order as in bbolt: by length, then bytes (the key is a length byte and the id).
		vals, err := collect(r, `SELECT rec FROM schedules WHERE tenant = $1
			AND (octet_length(schedule_id), convert_to(schedule_id, 'UTF8')) > (octet_length($2::text), convert_to($2::text, 'UTF8'))
			ORDER BY octet_length(schedule_id), convert_to(schedule_id, 'UTF8') LIMIT $3`, []any{tenant, after, pageSize}, pgx.RowTo[[]byte])
		if err != nil {
			return err
		}
		for _, v := range vals {
			rec := &storagev1.ScheduleRecord{}
			if err := unmarshal(v, rec, "schedule", ""); err != nil {
				return err
			}
			if more, err := fn(rec); err != nil || !more {
				return err
			}
			after = rec.GetScheduleId()
		}
		if len(vals) < pageSize {
			return nil
		}
	}
}

func (r *reader) ScanDueSchedules(until time.Time, fn func(store.ScheduleDue) (bool, error)) error {
	stop := schema.ScheduleDueKey(until.Add(time.Nanosecond), "", "")
	after := []byte{}
	for {
		keys, err := collect(r, `SELECT due_key FROM schedules WHERE due_key IS NOT NULL AND due_key > $1 AND due_key < $2
			ORDER BY due_key LIMIT $3`, []any{after, stop, pageSize}, pgx.RowTo[[]byte])
		if err != nil {
			return err
		}
		for _, k := range keys {
			at, tenant, id, ok := schema.DecodeScheduleDueKey(k)
			if !ok {
				return fmt.Errorf("store: malformed schedule due key %x", k)
			}
			if more, err := fn(store.ScheduleDue{Tenant: tenant, ScheduleID: id, Wake: at}); err != nil || !more {
				return err
			}
			after = k
		}
		if len(keys) < pageSize {
			return nil
		}
	}
}

func (r *reader) ScheduleCount(tenant string) (int64, error) {
	if err := store.CheckTenant(tenant); err != nil {
		return 0, err
	}
	n, err := collect(r, "SELECT count(*) FROM schedules WHERE tenant = $1", []any{tenant}, pgx.RowTo[int64])
	if err != nil || len(n) != 1 {
		return 0, err
	}
	return n[0], nil
}

// TryLockSchedule locks the schedule's row unless another transaction holds it.
func (w *writer) TryLockSchedule(tenant, scheduleID string) (*storagev1.ScheduleRecord, error) {
	rec, ok, err := w.getSchedule("SELECT rec FROM schedules WHERE tenant = $1 AND schedule_id = $2 FOR UPDATE SKIP LOCKED", tenant, scheduleID)
	if err != nil || ok {
		return rec, err
	}
	// Absent, or held by another transaction: tell the two apart without waiting.
	if _, exists, err := w.getSchedule("SELECT rec FROM schedules WHERE tenant = $1 AND schedule_id = $2", tenant, scheduleID); err != nil || exists {
		return nil, err
	}
	return nil, store.ErrScheduleNotFound(scheduleID)
}

func (w *writer) PutSchedule(rec *storagev1.ScheduleRecord) error {
	old, err := store.ScheduleBeforePut(w, rec)
	if err != nil {
		return err
	}
	v, err := encode(rec)
	if err != nil {
		return err
	}
	due := store.ScheduleDueKey(rec)
	if old == nil {
		// A plain INSERT: of two transactions creating one id, the second fails on the
		// key and runs again alone, finding the first's row.
		_, err = w.exec("INSERT INTO schedules (tenant, schedule_id, due_key, rec) VALUES ($1, $2, $3, $4)",
			rec.GetTenant(), rec.GetScheduleId(), due, v)
		return err
	}
	_, err = w.exec("UPDATE schedules SET due_key = $3, rec = $4 WHERE tenant = $1 AND schedule_id = $2",
		rec.GetTenant(), rec.GetScheduleId(), due, v)
	return err
}

func (w *writer) DeleteSchedule(tenant, scheduleID string) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	if !schema.ValidComponent(scheduleID) {
		return store.ErrScheduleNotFound(scheduleID)
	}
	n, err := w.exec("DELETE FROM schedules WHERE tenant = $1 AND schedule_id = $2", tenant, scheduleID)
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrScheduleNotFound(scheduleID)
	}
	return nil
}

func (r *reader) ScheduleTenants(after string, fn func(string) (bool, error)) error {
	return r.tenants("schedules", "tenant", after, fn)
}
