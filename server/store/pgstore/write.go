package pgstore

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

// writer implements store.Writer within a SERIALIZABLE transaction.
type writer struct {
	reader
	onCommit []func()
	// known is the task (tenant and id) this writer last found or wrote, so that the
	// writes that follow it (spec, events) need not look it up again.
	known [2]string
}

func (w *writer) OnCommit(f func()) { w.onCommit = append(w.onCommit, f) }

func (w *writer) exec(q string, args ...any) (int64, error) {
	tag, err := w.tx.Exec(w.ctx, q, args...)
	if err != nil {
		return 0, w.note(unavailable(err))
	}
	return tag.RowsAffected(), nil
}

func encode(m proto.Message) ([]byte, error) {
	v, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("store: encoding %T: %w", m, err)
	}
	return v, nil
}

// Index keys derived from a task record (nil: not in the index), as in the bbolt store.

func queueKey(rec *storagev1.TaskRecord) []byte {
	if rec.GetQueueTime() == nil {
		return nil
	}
	return schema.QueueKey(rec.GetTenant(), store.QueueOf(rec), rec.GetQueueTime().AsTime(), rec.GetTaskId())
}

func leaseKey(rec *storagev1.TaskRecord) []byte {
	l := rec.GetLease()
	if l == nil || l.GetRevoked() || l.GetDeadline() == nil {
		return nil
	}
	return schema.TimeKey(rec.GetTenant(), l.GetDeadline().AsTime(), rec.GetTaskId())
}

func endedKey(rec *storagev1.TaskRecord) []byte {
	if rec.GetEndTime() == nil {
		return nil
	}
	return schema.TimeKey(rec.GetTenant(), rec.GetEndTime().AsTime(), rec.GetTaskId())
}

func (w *writer) PutTask(rec *storagev1.TaskRecord) error {
	tenant, id := rec.GetTenant(), rec.GetTaskId()
	if err := store.CheckTaskRecord(rec); err != nil {
		return err
	}
	old, err := w.GetTask(tenant, id)
	if err != nil && !store.IsNotFound(err) {
		return err
	}
	if old != nil {
		if err := store.CheckTaskUpdate(old, rec); err != nil {
			return err
		}
	} else if reqID := rec.GetRequestId(); reqID != "" {
		owner, err := w.TaskForRequest(tenant, reqID)
		if err != nil {
			return err
		}
		if owner != "" {
			return apierr.New(codes.AlreadyExists, apierr.ReasonRequestIDReused,
				"request_id %q already created task %s", reqID, owner)
		}
		if _, err := w.exec("INSERT INTO requests (tenant, request_id, task_id) VALUES ($1, $2, $3)", tenant, reqID, id); err != nil {
			return err
		}
	}
	v, err := encode(rec)
	if err != nil {
		return err
	}
	if _, err := w.exec(`INSERT INTO tasks (tenant, task_id, state, queue, create_key, queue_key, lease_key, ended_key, rec)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (tenant, task_id) DO UPDATE SET state = EXCLUDED.state, queue_key = EXCLUDED.queue_key,
			lease_key = EXCLUDED.lease_key, ended_key = EXCLUDED.ended_key, rec = EXCLUDED.rec`,
		tenant, id, int32(rec.GetState()), store.QueueOf(rec),
		schema.TaskByCreateKey(tenant, rec.GetCreateTime().AsTime(), id),
		queueKey(rec), leaseKey(rec), endedKey(rec), v); err != nil {
		return err
	}
	w.known = [2]string{tenant, id}
	return nil
}

func (w *writer) requireTask(tenant, taskID string) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	if !schema.ValidComponent(taskID) {
		return store.ErrTaskNotFound(taskID)
	}
	if w.known == [2]string{tenant, taskID} {
		return nil
	}
	_, ok, err := w.get("SELECT ''::bytea FROM tasks WHERE tenant = $1 AND task_id = $2", tenant, taskID)
	if err != nil {
		return err
	}
	if !ok {
		return store.ErrTaskNotFound(taskID)
	}
	w.known = [2]string{tenant, taskID}
	return nil
}

func (w *writer) PutTaskSpec(tenant, taskID string, spec *storagev1.TaskSpecRecord) error {
	if err := w.requireTask(tenant, taskID); err != nil {
		return err
	}
	v, err := encode(spec)
	if err != nil {
		return err
	}
	n, err := w.exec("INSERT INTO task_specs (tenant, task_id, spec) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", tenant, taskID, v)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("store: task %s already has a spec; specs are written once", taskID)
	}
	return nil
}

func (w *writer) AppendEvents(tenant, taskID string, events ...*storagev1.EventRecord) error {
	if err := w.requireTask(tenant, taskID); err != nil {
		return err
	}
	if len(events) == 0 {
		return nil
	}
	var last int64
	if err := w.tx.QueryRow(w.ctx, "SELECT coalesce(max(seq), 0) FROM events WHERE tenant = $1 AND task_id = $2", tenant, taskID).Scan(&last); err != nil {
		return w.note(unavailable(err))
	}
	seqs := make([]int64, len(events))
	vals := make([][]byte, len(events))
	for i, ev := range events {
		if ev.GetSequence() != last+1 {
			return fmt.Errorf("store: event sequence %d for task %s does not follow %d", ev.GetSequence(), taskID, last)
		}
		v, err := encode(ev)
		if err != nil {
			return err
		}
		seqs[i], vals[i] = ev.GetSequence(), v
		last++
	}
	_, err := w.exec("INSERT INTO events (tenant, task_id, seq, rec) SELECT $1, $2, unnest($3::bigint[]), unnest($4::bytea[])",
		tenant, taskID, seqs, vals)
	return err
}

func isPending(rec *storagev1.InterruptRecord) bool {
	return rec.GetInterrupt().GetState() == agentplanev1.InterruptState_INTERRUPT_STATE_PENDING &&
		rec.GetClosedReason() == ""
}

func (w *writer) PutInterrupt(rec *storagev1.InterruptRecord) error {
	in := rec.GetInterrupt()
	tenant, id, taskID := in.GetTenant(), in.GetInterruptId(), in.GetTaskId()
	if err := w.requireTask(tenant, taskID); err != nil {
		return err
	}
	if !schema.ValidComponent(id) {
		return fmt.Errorf("store: interrupt id %q is empty or longer than %d bytes", id, schema.MaxComponent)
	}
	if rec.GetCreateTime() == nil {
		return fmt.Errorf("store: interrupt %s has no create_time", id)
	}
	old, err := w.GetInterrupt(tenant, id)
	if err != nil && !store.IsNotFound(err) {
		return err
	}
	if old != nil && (old.GetInterrupt().GetTaskId() != taskID || !proto.Equal(old.GetCreateTime(), rec.GetCreateTime())) {
		return fmt.Errorf("store: interrupt %s: task_id and create_time are immutable", id)
	}
	var pending, deadline []byte
	if isPending(rec) {
		pending = schema.TimeKey(tenant, rec.GetCreateTime().AsTime(), id)
		if in.GetDeadline() != nil {
			deadline = schema.TimeKey(tenant, in.GetDeadline().AsTime(), id)
		}
	}
	v, err := encode(rec)
	if err != nil {
		return err
	}
	_, err = w.exec(`INSERT INTO interrupts (tenant, interrupt_id, task_id, id_key, pending_key, deadline_key, rec)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (tenant, interrupt_id) DO UPDATE SET pending_key = EXCLUDED.pending_key,
			deadline_key = EXCLUDED.deadline_key, rec = EXCLUDED.rec`,
		tenant, id, taskID, schema.InterruptKey(tenant, id), pending, deadline, v)
	return err
}

func (w *writer) PutVerdict(tenant string, rec *storagev1.VerdictRecord) error {
	taskID, seq := rec.GetVerdict().GetTaskId(), rec.GetVerdict().GetSequence()
	if err := w.requireTask(tenant, taskID); err != nil {
		return err
	}
	if seq < 1 {
		return fmt.Errorf("store: verdict of task %s has sequence %d; it must be the event's (>= 1)", taskID, seq)
	}
	v, err := encode(rec)
	if err != nil {
		return err
	}
	_, err = w.exec(`INSERT INTO verdicts (tenant, task_id, seq, rec) VALUES ($1, $2, $3, $4)
		ON CONFLICT (tenant, task_id, seq) DO UPDATE SET rec = EXCLUDED.rec`, tenant, taskID, seq, v)
	return err
}

func (w *writer) PutObligation(tenant, taskID string, rec *storagev1.ObligationRecord) error {
	if err := w.requireTask(tenant, taskID); err != nil {
		return err
	}
	if rec.GetOrdinal() < 1 {
		return fmt.Errorf("store: obligation of task %s has ordinal %d; ordinals start at 1", taskID, rec.GetOrdinal())
	}
	v, err := encode(rec)
	if err != nil {
		return err
	}
	_, err = w.exec(`INSERT INTO obligations (tenant, task_id, ordinal, rec) VALUES ($1, $2, $3, $4)
		ON CONFLICT (tenant, task_id, ordinal) DO UPDATE SET rec = EXCLUDED.rec`, tenant, taskID, rec.GetOrdinal(), v)
	return err
}

func (w *writer) DeleteTask(tenant, taskID string) (store.Deleted, error) {
	w.known = [2]string{}
	var d store.Deleted
	rec, err := w.GetTask(tenant, taskID)
	if err != nil {
		return d, err
	}
	for _, c := range []struct {
		table string
		n     *int64
	}{{"interrupts", &d.Interrupts}, {"events", &d.Events}, {"verdicts", &d.Verdicts}, {"obligations", &d.Obligations}, {"task_specs", new(int64)}} {
		if *c.n, err = w.exec("DELETE FROM "+c.table+" WHERE tenant = $1 AND task_id = $2", tenant, taskID); err != nil {
			return d, err
		}
	}
	if reqID := rec.GetRequestId(); reqID != "" {
		if _, err := w.exec("DELETE FROM requests WHERE tenant = $1 AND request_id = $2 AND task_id = $3", tenant, reqID, taskID); err != nil {
			return d, err
		}
	}
	_, err = w.exec("DELETE FROM tasks WHERE tenant = $1 AND task_id = $2", tenant, taskID)
	return d, err
}
