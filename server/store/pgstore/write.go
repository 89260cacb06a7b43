package pgstore

import (
	"bytes"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

// writer implements store.Writer for one call within a READ COMMITTED transaction
// that it may share with other calls (see commit.go).
//
// Isolation comes from row locks, held to the end of the transaction: a task's row
// is its lock. Before reading anything of a task (its record, log, spec, interrupts,
// verdicts, obligations), a writer locks its row (SELECT ... FOR UPDATE) and reads
// the latest committed version, and every write of a task's data happens under that
// lock, so two writers of one task run one after the other, each seeing all the
// other wrote: what SERIALIZABLE would give, without its false conflicts between
// unrelated tasks whose index entries share a page. What no lock can hold, a row that
// does not exist yet (a new task, a request id, an interrupt), is guarded by its
// unique key: of two concurrent inserts the second fails, and its caller runs again
// alone and finds the first's row. Scans of task indexes lock what they return and
// skip rows another writer holds (ScanQueue, and ScanIndex of leases and retention),
// each row re-checked against the scan's condition once locked.
//
// What a transaction has locked it knows: the task's record and its last event
// sequence, which the writes after keep up to date, so the calls of a batch and the
// writes of one call read each task once. Writes that need no answer wait and go to
// the server with the next statement that does, or with COMMIT.
type writer struct {
	reader
	t        *tx
	c        *call
	wrote    bool
	onCommit []func()
	// assumed: TaskForRequest answered a request id free without a read, so an error
	// the call returns may rest on that answer (see attempt).
	assumed bool
}

// taskState is what a transaction knows of a task whose row it holds.
type taskState struct {
	rec     []byte // the record as of this transaction
	lastSeq int64  // the last event's sequence
	created bool   // inserted by this transaction: nothing else of it exists yet
	spec    bool   // a spec is known to exist
}

// interruptState is what a transaction knows of an interrupt (of a task it holds).
type interruptState struct {
	taskID string
	rec    []byte // nil: there is none
}

func (w *writer) OnCommit(f func()) { w.onCommit = append(w.onCommit, f) }

// later queues a write; it goes to the server with the next statement that needs an
// answer.
func (w *writer) later(sql string, args ...any) {
	w.wrote = true
	w.t.later(w.c, sql, args...)
}

// insert queues a one-row insert into t, which may go to the server merged with the
// other rows of its table (merge.go).
func (w *writer) insert(t *insertTable, args ...any) {
	w.wrote = true
	w.t.pending = append(w.t.pending, stmt{sql: t.one, args: args, owner: w.c, ins: t})
}

// exec runs a write now and returns how many rows it touched.
func (w *writer) exec(sql string, args ...any) (int64, error) {
	w.wrote = true
	var tag pgconn.CommandTag
	err := w.t.run(w.c, query{sql: sql, args: args, tag: &tag})
	return tag.RowsAffected(), err
}

func encode(m proto.Message) ([]byte, error) {
	v, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("store: encoding %T: %w", m, err)
	}
	return v, nil
}

// task locks a task's row and returns what the transaction knows of it, or nil when
// there is no such task (an invalid id is none). The first time, it reads the record
// and the last event sequence in one round trip: the second statement runs after the
// first holds the lock, so it sees every event committed before.
func (w *writer) task(tenant, taskID string) (*taskState, error) {
	if err := store.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if !schema.ValidComponent(taskID) {
		return nil, nil
	}
	k := [2]string{tenant, taskID}
	if st := w.t.tasks[k]; st != nil {
		return st, nil
	}
	var rec []byte
	var last int64
	err := w.t.run(w.c,
		query{sql: "SELECT rec FROM tasks WHERE tenant = $1 AND task_id = $2 FOR UPDATE", args: []any{tenant, taskID},
			rows: func(rows pgx.Rows) error {
				if rows.Next() {
					return rows.Scan(&rec)
				}
				return nil
			}},
		query{sql: "SELECT coalesce(max(seq), 0) FROM events WHERE tenant = $1 AND task_id = $2", args: []any{tenant, taskID},
			rows: func(rows pgx.Rows) error {
				if rows.Next() {
					return rows.Scan(&last)
				}
				return nil
			}})
	if err != nil || rec == nil {
		return nil, err
	}
	st := &taskState{rec: rec, lastSeq: last}
	w.t.tasks[k] = st
	return st, nil
}

// requireTask is task for a write of the task's data: a missing task is NotFound.
func (w *writer) requireTask(tenant, taskID string) (*taskState, error) {
	st, err := w.task(tenant, taskID)
	if err == nil && st == nil {
		err = store.ErrTaskNotFound(taskID)
	}
	return st, err
}

func (w *writer) GetTask(tenant, taskID string) (*storagev1.TaskRecord, error) {
	st, err := w.requireTask(tenant, taskID)
	if err != nil {
		return nil, err
	}
	rec := &storagev1.TaskRecord{}
	return rec, unmarshal(st.rec, rec, "task", taskID)
}

// TaskForRequest answers what the transaction knows; a request id it has not read is
// taken to be free, unread, as PutTask takes it (the first read of a StartTask would
// otherwise cost a round trip per call in the batch). The answer is checked before
// COMMIT: by the request's insert, whose unique key fails it if the id is taken, or,
// for an id the transaction does not insert, by one read of all such ids (verifyRequests).
// Either failure runs the caller again alone, careful, and then it reads.
func (w *writer) TaskForRequest(tenant, requestID string) (string, error) {
	k := [2]string{tenant, requestID}
	if id, ok := w.t.requests[k]; ok {
		return id, nil
	}
	if !w.c.careful {
		if err := store.CheckTenant(tenant); err != nil {
			return "", err
		}
		if schema.ValidComponent(requestID) {
			w.t.assumed = append(w.t.assumed, assumption{key: k, by: w.c})
			w.assumed = true
		}
		return "", nil
	}
	id, err := w.reader.TaskForRequest(tenant, requestID)
	if err == nil {
		w.t.requests[k] = id
	}
	return id, err
}

// Index keys derived from a task record (nil: not in the index), as in the bbolt store.

func queueKey(rec *storagev1.TaskRecord) []byte {
	if rec.GetQueueTime() == nil {
		return nil
	}
	return schema.QueueKey(rec.GetTenant(), store.QueueOf(rec), store.QueueOrder(rec), rec.GetTaskId())
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
	// A task this transaction does not hold is taken to be new, unread: the insert
	// below fails on the task's key if it is not, and the call runs again alone,
	// reading first (careful). Writers update a task after reading it (GetTask), which
	// holds it; what is left is creating one, which then costs no round trip.
	st := w.t.tasks[[2]string{tenant, id}]
	if st == nil && w.c.careful {
		var err error
		if st, err = w.task(tenant, id); err != nil {
			return err
		}
	}
	var oldQueueKey []byte
	if st != nil {
		old := &storagev1.TaskRecord{}
		if err := unmarshal(st.rec, old, "task", id); err != nil {
			return err
		}
		if err := store.CheckTaskUpdate(old, rec); err != nil {
			return err
		}
		oldQueueKey = queueKey(old)
	} else if reqID := rec.GetRequestId(); reqID != "" {
		// Likewise a request id not read yet is taken to be free: its insert checks.
		owner, known := w.t.requests[[2]string{tenant, reqID}]
		if !known && w.c.careful {
			var err error
			if owner, err = w.TaskForRequest(tenant, reqID); err != nil {
				return err
			}
		}
		if owner != "" {
			return apierr.New(codes.AlreadyExists, apierr.ReasonRequestIDReused,
				"request_id %q already created task %s", reqID, owner)
		}
		w.insert(insertRequest, tenant, reqID, id)
		w.t.requests[[2]string{tenant, reqID}] = id
	}
	v, err := encode(rec)
	if err != nil {
		return err
	}
	// Queued, or queued again: the queue's long polls elsewhere look.
	queue, qk := store.QueueOf(rec), queueKey(rec)
	if qk != nil && !bytes.Equal(qk, oldQueueKey) {
		w.t.changes.add(change{kind: store.ChangeQueued, a: queue})
	}
	if st == nil {
		// A plain insert: a task of this id that exists, or that another transaction
		// inserted meanwhile, fails it on the key.
		w.insert(insertTask, tenant, id, int32(rec.GetState()), queue,
			schema.TaskByCreateKey(tenant, rec.GetCreateTime().AsTime(), id),
			qk, leaseKey(rec), endedKey(rec), v)
		w.t.tasks[[2]string{tenant, id}] = &taskState{rec: v, created: true}
		return nil
	}
	w.later("UPDATE tasks SET state = $3, queue_key = $4, lease_key = $5, ended_key = $6, rec = $7 WHERE tenant = $1 AND task_id = $2",
		tenant, id, int32(rec.GetState()), qk, leaseKey(rec), endedKey(rec), v)
	st.rec = v
	return nil
}

func (w *writer) PutTaskSpec(tenant, taskID string, spec *storagev1.TaskSpecRecord) error {
	st, err := w.requireTask(tenant, taskID)
	if err != nil {
		return err
	}
	errTwice := fmt.Errorf("store: task %s already has a spec; specs are written once", taskID)
	if st.spec {
		return errTwice
	}
	v, err := encode(spec)
	if err != nil {
		return err
	}
	if st.created {
		w.insert(insertSpec, tenant, taskID, v)
		st.spec = true
		return nil
	}
	n, err := w.exec("INSERT INTO task_specs (tenant, task_id, spec) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", tenant, taskID, v)
	if err != nil {
		return err
	}
	st.spec = true
	if n == 0 {
		return errTwice
	}
	return nil
}

func (w *writer) AppendEvents(tenant, taskID string, events ...*storagev1.EventRecord) error {
	st, err := w.requireTask(tenant, taskID)
	if err != nil {
		return err
	}
	if len(events) == 0 {
		return nil
	}
	last := st.lastSeq
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
	if len(events) == 1 {
		w.insert(insertEvent, tenant, taskID, seqs[0], vals[0])
	} else {
		w.later("INSERT INTO events (tenant, task_id, seq, rec) SELECT $1, $2, unnest($3::bigint[]), unnest($4::bytea[])",
			tenant, taskID, seqs, vals)
	}
	st.lastSeq = last
	w.t.changes.add(change{kind: store.ChangeEvents, a: tenant, b: taskID})
	return nil
}

// interruptKeys are an interrupt's keys in the pending, deadline and escalation
// indexes (nil: not in it; rec nil: in none).
func interruptKeys(rec *storagev1.InterruptRecord) (pending, deadline, escalation []byte) {
	in := rec.GetInterrupt()
	if !isPending(rec) {
		return nil, nil, nil
	}
	tenant, id := in.GetTenant(), in.GetInterruptId()
	pending = schema.TimeKey(tenant, rec.GetCreateTime().AsTime(), id)
	if in.GetDeadline() != nil {
		deadline = schema.TimeKey(tenant, in.GetDeadline().AsTime(), id)
	}
	if due, ok := store.EscalationDue(rec); ok {
		escalation = schema.TimeKey(tenant, due, id)
	}
	return pending, deadline, escalation
}

func isPending(rec *storagev1.InterruptRecord) bool {
	return rec.GetInterrupt().GetState() == agentplanev1.InterruptState_INTERRUPT_STATE_PENDING &&
		rec.GetClosedReason() == ""
}

// GetInterrupt reads an interrupt under its task's lock: a first read finds its task,
// and when the transaction does not hold that task yet, it locks it and reads again.
func (w *writer) GetInterrupt(tenant, interruptID string) (*storagev1.InterruptRecord, error) {
	if err := store.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if !schema.ValidComponent(interruptID) {
		return nil, store.ErrInterruptNotFound(interruptID)
	}
	k := [2]string{tenant, interruptID}
	is := w.t.interrupts[k]
	for is == nil {
		var taskID string
		var v []byte
		if err := w.q.query("SELECT task_id, rec FROM interrupts WHERE tenant = $1 AND interrupt_id = $2", []any{tenant, interruptID},
			func(rows pgx.Rows) error {
				if rows.Next() {
					return rows.Scan(&taskID, &v)
				}
				return nil
			}); err != nil {
			return nil, err
		}
		if v != nil {
			if _, held := w.t.tasks[[2]string{tenant, taskID}]; !held {
				if _, err := w.task(tenant, taskID); err != nil {
					return nil, err
				}
				continue // read it again under the lock
			}
		}
		is = &interruptState{taskID: taskID, rec: v}
		w.t.interrupts[k] = is
	}
	if is.rec == nil {
		return nil, store.ErrInterruptNotFound(interruptID)
	}
	rec := &storagev1.InterruptRecord{}
	return rec, unmarshal(is.rec, rec, "interrupt", interruptID)
}

func (w *writer) PutInterrupt(rec *storagev1.InterruptRecord) error {
	in := rec.GetInterrupt()
	tenant, id, taskID := in.GetTenant(), in.GetInterruptId(), in.GetTaskId()
	if _, err := w.requireTask(tenant, taskID); err != nil {
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
	v, err := encode(rec)
	if err != nil {
		return err
	}
	pending, deadline, escalation := interruptKeys(rec)
	oldPending, oldDeadline, oldEscalation := interruptKeys(old)
	if oldPending != nil && pending == nil {
		w.t.changes.add(change{kind: store.ChangeDecided, a: tenant, b: id})
	}
	// A new or moved deadline or escalation step wakes the other replicas' timer
	// loops (as the triggers of versions 3 and 6 did).
	if (deadline != nil && !bytes.Equal(deadline, oldDeadline)) || (escalation != nil && !bytes.Equal(escalation, oldEscalation)) {
		w.t.changes.add(change{kind: store.ChangeDeadline})
	}
	if old == nil {
		w.later(`INSERT INTO interrupts (tenant, interrupt_id, task_id, id_key, pending_key, deadline_key, escalation_key, rec)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			tenant, id, taskID, schema.InterruptKey(tenant, id), pending, deadline, escalation, v)
	} else {
		w.later("UPDATE interrupts SET pending_key = $3, deadline_key = $4, escalation_key = $5, rec = $6 WHERE tenant = $1 AND interrupt_id = $2",
			tenant, id, pending, deadline, escalation, v)
	}
	w.t.interrupts[[2]string{tenant, id}] = &interruptState{taskID: taskID, rec: v}
	return nil
}

func (w *writer) PutVerdict(tenant string, rec *storagev1.VerdictRecord) error {
	taskID, seq := rec.GetVerdict().GetTaskId(), rec.GetVerdict().GetSequence()
	if _, err := w.requireTask(tenant, taskID); err != nil {
		return err
	}
	if seq < 1 {
		return fmt.Errorf("store: verdict of task %s has sequence %d; it must be the event's (>= 1)", taskID, seq)
	}
	v, err := encode(rec)
	if err != nil {
		return err
	}
	w.later(`INSERT INTO verdicts (tenant, task_id, seq, rec) VALUES ($1, $2, $3, $4)
		ON CONFLICT (tenant, task_id, seq) DO UPDATE SET rec = EXCLUDED.rec`, tenant, taskID, seq, v)
	return nil
}

func (w *writer) PutObligation(tenant, taskID string, rec *storagev1.ObligationRecord) error {
	if _, err := w.requireTask(tenant, taskID); err != nil {
		return err
	}
	if rec.GetOrdinal() < 1 {
		return fmt.Errorf("store: obligation of task %s has ordinal %d; ordinals start at 1", taskID, rec.GetOrdinal())
	}
	v, err := encode(rec)
	if err != nil {
		return err
	}
	w.later(`INSERT INTO obligations (tenant, task_id, ordinal, rec) VALUES ($1, $2, $3, $4)
		ON CONFLICT (tenant, task_id, ordinal) DO UPDATE SET rec = EXCLUDED.rec`, tenant, taskID, rec.GetOrdinal(), v)
	return nil
}

// The reads of a task's data lock the task first (see writer).

func (w *writer) GetTaskSpec(tenant, taskID string) (*storagev1.TaskSpecRecord, error) {
	if _, err := w.task(tenant, taskID); err != nil {
		return nil, err
	}
	return w.reader.GetTaskSpec(tenant, taskID)
}

func (w *writer) GetTaskSpecPartial(tenant, taskID string, withSubmitted bool) (*storagev1.TaskSpecRecord, error) {
	if _, err := w.task(tenant, taskID); err != nil {
		return nil, err
	}
	return w.reader.GetTaskSpecPartial(tenant, taskID, withSubmitted)
}

func (w *writer) ScanEvents(tenant, taskID string, afterSeq int64, fn func(*storagev1.EventRecord) (bool, error)) error {
	if _, err := w.task(tenant, taskID); err != nil {
		return err
	}
	return w.reader.ScanEvents(tenant, taskID, afterSeq, fn)
}

func (w *writer) ScanVerdicts(tenant, taskID string, afterSeq int64, fn func(*storagev1.VerdictRecord) (bool, error)) error {
	if _, err := w.task(tenant, taskID); err != nil {
		return err
	}
	return w.reader.ScanVerdicts(tenant, taskID, afterSeq, fn)
}

func (w *writer) ScanObligations(tenant, taskID string, afterOrdinal int64, fn func(*storagev1.ObligationRecord) (bool, error)) error {
	if _, err := w.task(tenant, taskID); err != nil {
		return err
	}
	return w.reader.ScanObligations(tenant, taskID, afterOrdinal, fn)
}

func (w *writer) GetObligation(tenant, taskID string, ordinal int64) (*storagev1.ObligationRecord, error) {
	if _, err := w.task(tenant, taskID); err != nil {
		return nil, err
	}
	return w.reader.GetObligation(tenant, taskID, ordinal)
}

func (w *writer) ScanTaskInterrupts(tenant, taskID string, fn func(*storagev1.InterruptRecord) (bool, error)) error {
	if _, err := w.task(tenant, taskID); err != nil {
		return err
	}
	return w.reader.ScanTaskInterrupts(tenant, taskID, fn)
}

func (w *writer) DeleteTask(tenant, taskID string) (store.Deleted, error) {
	var d store.Deleted
	rec, err := w.GetTask(tenant, taskID)
	if err != nil {
		return d, err
	}
	w.wrote = true
	var tags [7]pgconn.CommandTag
	qs := make([]query, 0, len(tags))
	for i, table := range []string{"interrupts", "events", "verdicts", "obligations", "task_specs", "tasks"} {
		qs = append(qs, query{sql: "DELETE FROM " + table + " WHERE tenant = $1 AND task_id = $2", args: []any{tenant, taskID}, tag: &tags[i]})
	}
	if reqID := rec.GetRequestId(); reqID != "" {
		qs = append(qs, query{sql: "DELETE FROM requests WHERE tenant = $1 AND request_id = $2 AND task_id = $3", args: []any{tenant, reqID, taskID}, tag: &tags[6]})
		delete(w.t.requests, [2]string{tenant, reqID})
	}
	if err := w.t.run(w.c, qs...); err != nil {
		return d, err
	}
	d.Interrupts, d.Events, d.Verdicts, d.Obligations = tags[0].RowsAffected(), tags[1].RowsAffected(), tags[2].RowsAffected(), tags[3].RowsAffected()
	delete(w.t.tasks, [2]string{tenant, taskID})
	for k, is := range w.t.interrupts {
		if k[0] == tenant && is.taskID == taskID {
			delete(w.t.interrupts, k)
		}
	}
	return d, nil
}
