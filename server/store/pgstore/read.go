package pgstore

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

// reader implements store.Reader over a transaction. Scans read pages of rows and close
// them before calling fn, so that fn may read through the same transaction.
type reader struct {
	ctx context.Context
	q   querier
	// lock makes the scans of task indexes (ScanQueue, the lease and retention
	// indexes) lock the rows they return and skip those another transaction holds
	// (FOR UPDATE SKIP LOCKED): set for writers (see writer).
	lock bool
}

// querier runs one query and hands its rows to rows, which must not keep them.
// Database errors come back as unavailable (when they are connection failures).
type querier interface {
	query(sql string, args []any, rows func(pgx.Rows) error) error
}

// viewQuerier reads through a read-only transaction.
type viewQuerier struct {
	ctx context.Context
	tx  pgx.Tx
}

func (q viewQuerier) query(sql string, args []any, each func(pgx.Rows) error) error {
	rows, err := q.tx.Query(q.ctx, sql, args...)
	if err != nil {
		return unavailable(err)
	}
	ferr := each(rows)
	rows.Close()
	if err := rows.Err(); err != nil {
		return unavailable(err)
	}
	return ferr
}

// collect runs a query and decodes every row with row.
func collect[T any](r *reader, sql string, args []any, row pgx.RowToFunc[T]) ([]T, error) {
	var out []T
	err := r.q.query(sql, args, func(rows pgx.Rows) error {
		var err error
		out, err = pgx.CollectRows(rows, row)
		return err
	})
	return out, err
}

// pageSize is how many rows a scan reads at once.
const pageSize = 256

// scanByTenant reads every row (tenant, col, rec) of table, across tenants, a page at
// a time in key order, until fn returns false or an error.
func (r *reader) scanByTenant(table, col string, fn func(tenant, name string, rec []byte) (bool, error)) error {
	q := fmt.Sprintf(`SELECT tenant, %[2]s, rec FROM %[1]s WHERE (tenant, %[2]s) > ($1, $2)
		ORDER BY tenant, %[2]s LIMIT $3`, table, col)
	afterTenant, afterName := "", ""
	for {
		type row struct {
			Tenant, Name string
			Rec          []byte
		}
		page, err := collect(r, q, []any{afterTenant, afterName, pageSize}, pgx.RowToStructByPos[row])
		if err != nil {
			return err
		}
		for _, p := range page {
			if more, err := fn(p.Tenant, p.Name, p.Rec); err != nil || !more {
				return err
			}
		}
		if len(page) < pageSize {
			return nil
		}
		afterTenant, afterName = page[len(page)-1].Tenant, page[len(page)-1].Name
	}
}

func unmarshal(v []byte, m proto.Message, what, id string) error {
	if err := proto.Unmarshal(v, m); err != nil {
		return fmt.Errorf("store: decoding %s %s: %w", what, id, err)
	}
	return nil
}

// get reads one value; ok is false when there is no row.
func (r *reader) get(q string, args ...any) (v []byte, ok bool, err error) {
	err = r.q.query(q, args, func(rows pgx.Rows) error {
		if !rows.Next() {
			return nil
		}
		ok = true
		return rows.Scan(&v)
	})
	return v, ok, err
}

func (r *reader) GetTask(tenant, taskID string) (*storagev1.TaskRecord, error) {
	if err := store.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if !schema.ValidComponent(taskID) {
		return nil, store.ErrTaskNotFound(taskID)
	}
	v, ok, err := r.get("SELECT rec FROM tasks WHERE tenant = $1 AND task_id = $2", tenant, taskID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, store.ErrTaskNotFound(taskID)
	}
	rec := &storagev1.TaskRecord{}
	return rec, unmarshal(v, rec, "task", taskID)
}

func (r *reader) taskSpec(tenant, taskID string) ([]byte, error) {
	if err := store.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if !schema.ValidComponent(taskID) {
		return nil, store.ErrTaskNotFound(taskID)
	}
	v, ok, err := r.get("SELECT spec FROM task_specs WHERE tenant = $1 AND task_id = $2", tenant, taskID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, store.ErrTaskNotFound(taskID)
	}
	return v, nil
}

func (r *reader) GetTaskSpec(tenant, taskID string) (*storagev1.TaskSpecRecord, error) {
	v, err := r.taskSpec(tenant, taskID)
	if err != nil {
		return nil, err
	}
	spec := &storagev1.TaskSpecRecord{}
	return spec, unmarshal(v, spec, "task spec", taskID)
}

func (r *reader) GetTaskSpecPartial(tenant, taskID string, withSubmitted bool) (*storagev1.TaskSpecRecord, error) {
	v, err := r.taskSpec(tenant, taskID)
	if err != nil {
		return nil, err
	}
	spec, err := store.UnmarshalTaskSpecPartial(v, withSubmitted)
	if err != nil {
		return nil, fmt.Errorf("store: decoding task spec %s: %w", taskID, err)
	}
	return spec, nil
}

func (r *reader) TaskForRequest(tenant, requestID string) (string, error) {
	if err := store.CheckTenant(tenant); err != nil {
		return "", err
	}
	if !schema.ValidComponent(requestID) {
		return "", nil
	}
	v, _, err := r.get("SELECT convert_to(task_id, 'UTF8') FROM requests WHERE tenant = $1 AND request_id = $2", tenant, requestID)
	return string(v), err
}

// scanKeys pages through a key-ordered query. q selects (key bytea, ...) rows where
// key is within [$1 (or > $1 when exclusive), $2) and ends with "ORDER BY key LIMIT n";
// row decodes one row. It calls fn for each row until fn stops or the rows run out.
func scanKeys[T any](r *reader, q string, from []byte, exclusive bool, to []byte, limit int,
	row func(pgx.CollectableRow) (T, []byte, error), fn func(T) (bool, error), extra ...any,
) error {
	op := ">="
	if exclusive {
		op = ">"
	}
	if to == nil { // past every key: no key is this long
		to = bytes.Repeat([]byte{0xff}, 2*schema.MaxComponent+32)
	}
	query := fmt.Sprintf(q, op)
	for {
		n := limit
		if n <= 0 {
			n = pageSize
		}
		type item struct {
			v   T
			key []byte
		}
		items, err := collect(r, query, append([]any{from, to, n}, extra...), func(cr pgx.CollectableRow) (item, error) {
			v, key, err := row(cr)
			return item{v, key}, err
		})
		if err != nil {
			return err
		}
		for _, it := range items {
			if more, err := fn(it.v); err != nil || !more {
				return err
			}
		}
		if len(items) < n {
			return nil
		}
		from, op = items[len(items)-1].key, ">"
		query = fmt.Sprintf(q, op)
		if limit > 0 && limit < 64 {
			limit *= 2
		}
	}
}

func (r *reader) ScanTasks(tenant string, tr store.TaskRange, fn func([]byte, *storagev1.TaskRecord) (bool, error)) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	prefix := schema.TenantPrefix(tenant)
	from, exclusive := prefix, false
	switch {
	case tr.After != nil:
		if _, _, _, ok := schema.DecodeTaskByCreateKey(tr.After); !ok || !bytes.HasPrefix(tr.After, prefix) {
			return apierr.InvalidArgument(apierr.ReasonPageTokenInvalid, "page cursor does not belong to this listing")
		}
		from, exclusive = tr.After, true
	case !tr.CreatedBefore.IsZero():
		from = schema.TaskByCreateBound(tenant, tr.CreatedBefore.Add(-time.Nanosecond))
	}
	type task struct {
		key []byte
		rec *storagev1.TaskRecord
	}
	return scanKeys(r, "SELECT create_key, task_id, rec FROM tasks WHERE create_key %s $1 AND create_key < $2 ORDER BY create_key LIMIT $3",
		from, exclusive, schema.PrefixEnd(prefix), 0,
		func(row pgx.CollectableRow) (task, []byte, error) {
			var t task
			var id string
			var v []byte
			if err := row.Scan(&t.key, &id, &v); err != nil {
				return t, nil, err
			}
			t.rec = &storagev1.TaskRecord{}
			return t, t.key, unmarshal(v, t.rec, "task", id)
		},
		func(t task) (bool, error) {
			_, created, _, ok := schema.DecodeTaskByCreateKey(t.key)
			if !ok {
				return false, fmt.Errorf("store: malformed listing key %x", t.key)
			}
			if !tr.CreatedAfter.IsZero() && created.Before(tr.CreatedAfter) {
				return false, nil // newest first: everything further is older still
			}
			if !tr.CreatedBefore.IsZero() && !created.Before(tr.CreatedBefore) {
				return true, nil
			}
			return fn(t.key, t.rec)
		})
}

// seqScan pages through a task's children ordered by a number column.
func seqScan[M proto.Message](r *reader, table, col, tenant, taskID string, after int64, what string,
	newM func() M, fn func(M) (bool, error),
) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	if !schema.ValidComponent(taskID) {
		return nil
	}
	q := fmt.Sprintf("SELECT %[2]s, rec FROM %[1]s WHERE tenant = $1 AND task_id = $2 AND %[2]s > $3 ORDER BY %[2]s LIMIT $4", table, col)
	for {
		type item struct {
			Seq int64
			V   []byte
		}
		items, err := collect(r, q, []any{tenant, taskID, after, pageSize}, pgx.RowToStructByPos[item])
		if err != nil {
			return err
		}
		for _, it := range items {
			m := newM()
			if err := unmarshal(it.V, m, what, fmt.Sprintf("%s/%d", taskID, it.Seq)); err != nil {
				return err
			}
			if more, err := fn(m); err != nil || !more {
				return err
			}
		}
		if len(items) < pageSize {
			return nil
		}
		after = items[len(items)-1].Seq
	}
}

func (r *reader) ScanEvents(tenant, taskID string, afterSeq int64, fn func(*storagev1.EventRecord) (bool, error)) error {
	return seqScan(r, "events", "seq", tenant, taskID, afterSeq, "event", func() *storagev1.EventRecord { return &storagev1.EventRecord{} }, fn)
}

func (r *reader) ScanVerdicts(tenant, taskID string, afterSeq int64, fn func(*storagev1.VerdictRecord) (bool, error)) error {
	return seqScan(r, "verdicts", "seq", tenant, taskID, afterSeq, "verdict", func() *storagev1.VerdictRecord { return &storagev1.VerdictRecord{} }, fn)
}

func (r *reader) ScanObligations(tenant, taskID string, afterOrdinal int64, fn func(*storagev1.ObligationRecord) (bool, error)) error {
	return seqScan(r, "obligations", "ordinal", tenant, taskID, afterOrdinal, "obligation", func() *storagev1.ObligationRecord { return &storagev1.ObligationRecord{} }, fn)
}

func (r *reader) GetObligation(tenant, taskID string, ordinal int64) (*storagev1.ObligationRecord, error) {
	if err := store.CheckTenant(tenant); err != nil {
		return nil, err
	}
	v, ok, err := r.get("SELECT rec FROM obligations WHERE tenant = $1 AND task_id = $2 AND ordinal = $3", tenant, taskID, ordinal)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, store.ErrObligationNotFound(taskID, ordinal)
	}
	rec := &storagev1.ObligationRecord{}
	return rec, unmarshal(v, rec, "obligation", taskID)
}

// indexColumn is the table and key column of a time index.
func indexColumn(idx store.Index) (table, col string, err error) {
	switch idx {
	case store.IndexQueue:
		return "tasks", "queue_key", nil
	case store.IndexLeaseDeadlines:
		return "tasks", "lease_key", nil
	case store.IndexEnded:
		return "tasks", "ended_key", nil
	case store.IndexPendingInterrupts:
		return "interrupts", "pending_key", nil
	case store.IndexInterruptDeadlines:
		return "interrupts", "deadline_key", nil
	case store.IndexInterruptEscalations:
		return "interrupts", "escalation_key", nil
	}
	return "", "", fmt.Errorf("store: unknown index %d", idx)
}

func (r *reader) Tenants(idx store.Index, after string, fn func(string) (bool, error)) error {
	table, col, err := indexColumn(idx)
	if err != nil {
		return err
	}
	return r.tenants(table, col, after, fn)
}

// tenants lists the tenants with a row in table where col is set, after after.
func (r *reader) tenants(table, col string, after string, fn func(string) (bool, error)) error {
	// Key order of tenants: shorter first, then by bytes (schema.TenantPrefix).
	q := fmt.Sprintf(`SELECT tenant FROM (SELECT DISTINCT tenant FROM %s WHERE %s IS NOT NULL) t
		WHERE (octet_length(tenant), convert_to(tenant, 'UTF8')) > (octet_length($1::text), convert_to($1::text, 'UTF8'))
		ORDER BY octet_length(tenant), convert_to(tenant, 'UTF8') LIMIT $2`, table, col)
	for {
		names, err := collect(r, q, []any{after, pageSize}, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, t := range names {
			if more, err := fn(t); err != nil || !more {
				return err
			}
		}
		if len(names) < pageSize {
			return nil
		}
		after = names[len(names)-1]
	}
}

func (r *reader) ScanIndex(idx store.Index, tenant string, ir store.IndexRange, fn func(store.IndexEntry) (bool, error)) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	if idx == store.IndexQueue {
		return fmt.Errorf("store: the run queue is read with ScanQueue")
	}
	table, col, err := indexColumn(idx)
	if err != nil {
		return err
	}
	prefix := schema.TenantPrefix(tenant)
	stop := schema.PrefixEnd(prefix)
	if !ir.Until.IsZero() {
		stop = schema.TimeBound(tenant, ir.Until)
	}
	q := fmt.Sprintf("SELECT %[2]s FROM %[1]s WHERE %[2]s %%s $1 AND %[2]s < $2 ORDER BY %[2]s LIMIT $3", table, col)
	limit := 0
	if r.lock && table == "tasks" {
		// A writer acts on the tasks it finds (an overdue lease expires): lock them,
		// re-checked against their latest version, and skip those another writer holds.
		q += lockSkip
		limit = 1
	}
	return r.scanTimed(q, prefix, stop, ir.After, limit, idx.String(), func(k []byte) (time.Time, string, bool) {
		_, at, id, ok := schema.DecodeTimeKey(k)
		return at, id, ok
	}, fn)
}

func (r *reader) ScanQueue(tenant, queue string, ir store.IndexRange, fn func(store.IndexEntry) (bool, error)) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	if queue == "" {
		queue = store.DefaultQueue
	}
	if !schema.ValidQueueName(queue) {
		return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "queue %q is not a queue name", queue)
	}
	prefix := schema.QueuePrefix(tenant, queue)
	stop := schema.PrefixEnd(prefix)
	if !ir.Until.IsZero() {
		stop = schema.QueueBound(tenant, queue, ir.Until)
	}
	q := "SELECT queue_key FROM tasks WHERE queue_key %s $1 AND queue_key < $2 ORDER BY queue_key LIMIT $3"
	limit := 0
	if r.lock {
		// A writer reads the queue to lease from it: lock what it reads and skip what
		// another writer holds, a few rows at a time so as not to hold many.
		q += lockSkip
		limit = 1
	}
	return r.scanTimed(q, prefix, stop, ir.After, limit, "run queue", func(k []byte) (time.Time, string, bool) {
		_, _, at, id, ok := schema.DecodeQueueKey(k)
		return at, id, ok
	}, fn)
}

// lockSkip locks the task rows a writer's scan returns, a few at a time at first so as
// not to hold many, and skips those another transaction holds. Each row is re-checked
// against the scan's condition in its latest version once locked.
const lockSkip = " FOR UPDATE SKIP LOCKED"

// scanTimed reads the keys of a time-ordered index under prefix, after the key after
// (nil: from the first) and before stop.
func (r *reader) scanTimed(q string, prefix, stop, after []byte, limit int, what string,
	decode func([]byte) (time.Time, string, bool), fn func(store.IndexEntry) (bool, error),
) error {
	from, exclusive := prefix, false
	if after != nil {
		if _, _, ok := decode(after); !ok || !bytes.HasPrefix(after, prefix) {
			return apierr.InvalidArgument(apierr.ReasonPageTokenInvalid, "page cursor does not belong to this listing")
		}
		from, exclusive = after, true
	}
	return scanKeys(r, q, from, exclusive, stop, limit,
		func(row pgx.CollectableRow) ([]byte, []byte, error) {
			var k []byte
			err := row.Scan(&k)
			return k, k, err
		},
		func(k []byte) (bool, error) {
			at, id, ok := decode(k)
			if !ok {
				return false, fmt.Errorf("store: malformed %s key %x", what, k)
			}
			return fn(store.IndexEntry{At: at, ID: id, Cursor: k})
		})
}

func (r *reader) GetInterrupt(tenant, interruptID string) (*storagev1.InterruptRecord, error) {
	if err := store.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if !schema.ValidComponent(interruptID) {
		return nil, store.ErrInterruptNotFound(interruptID)
	}
	v, ok, err := r.get("SELECT rec FROM interrupts WHERE tenant = $1 AND interrupt_id = $2", tenant, interruptID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, store.ErrInterruptNotFound(interruptID)
	}
	rec := &storagev1.InterruptRecord{}
	return rec, unmarshal(v, rec, "interrupt", interruptID)
}

func interruptRow(row pgx.CollectableRow) (*storagev1.InterruptRecord, []byte, error) {
	var k, v []byte
	if err := row.Scan(&k, &v); err != nil {
		return nil, nil, err
	}
	rec := &storagev1.InterruptRecord{}
	return rec, k, unmarshal(v, rec, "interrupt", fmt.Sprintf("%x", k))
}

func (r *reader) ScanInterrupts(tenant, after string, fn func(*storagev1.InterruptRecord) (bool, error)) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	prefix := schema.TenantPrefix(tenant)
	from, exclusive := prefix, false
	if after != "" {
		if len(after) > schema.MaxComponent {
			return apierr.InvalidArgument(apierr.ReasonPageTokenInvalid, "page cursor does not belong to this listing")
		}
		from, exclusive = schema.InterruptKey(tenant, after), true
	}
	return scanKeys(r, "SELECT id_key, rec FROM interrupts WHERE id_key %s $1 AND id_key < $2 ORDER BY id_key LIMIT $3",
		from, exclusive, schema.PrefixEnd(prefix), 0, interruptRow, fn)
}

func (r *reader) ScanTaskInterrupts(tenant, taskID string, fn func(*storagev1.InterruptRecord) (bool, error)) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	if !schema.ValidComponent(taskID) {
		return nil
	}
	prefix := schema.TenantPrefix(tenant)
	q := "SELECT id_key, rec FROM interrupts WHERE id_key %s $1 AND id_key < $2 AND tenant = $4 AND task_id = $5 ORDER BY id_key LIMIT $3"
	return scanKeys(r, q, prefix, false, schema.PrefixEnd(prefix), 0, interruptRow, fn, tenant, taskID)
}
