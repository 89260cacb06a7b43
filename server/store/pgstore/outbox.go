package pgstore

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

func (r *reader) GetOutbox(id string) (*storagev1.OutboxRecord, error) {
	if !schema.ValidComponent(id) {
		return nil, store.ErrOutboxNotFound(id)
	}
	v, ok, err := r.get("SELECT rec FROM outbox WHERE id = $1", id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, store.ErrOutboxNotFound(id)
	}
	rec := &storagev1.OutboxRecord{}
	return rec, unmarshal(v, rec, "outbox record", id)
}

// outboxRows reads the rec column of a query.
func (r *reader) outboxRows(q string, args ...any) ([]*storagev1.OutboxRecord, error) {
	vals, err := collect(r, q, args, pgx.RowTo[[]byte])
	if err != nil {
		return nil, err
	}
	out := make([]*storagev1.OutboxRecord, 0, len(vals))
	for _, v := range vals {
		rec := &storagev1.OutboxRecord{}
		if err := unmarshal(v, rec, "outbox record", ""); err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

func (r *reader) ScanOutbox(state storagev1.OutboxState, after string, fn func(*storagev1.OutboxRecord) (bool, error)) error {
	dead := state == storagev1.OutboxState_OUTBOX_STATE_DEAD
	for {
		page, err := r.outboxRows("SELECT rec FROM outbox WHERE dead = $1 AND id > $2 ORDER BY id LIMIT $3", dead, after, pageSize)
		if err != nil {
			return err
		}
		for _, rec := range page {
			if rec.GetState() != state {
				continue
			}
			if more, err := fn(rec); err != nil || !more {
				return err
			}
		}
		if len(page) < pageSize {
			return nil
		}
		after = page[len(page)-1].GetId()
	}
}

func (r *reader) OutboxDepth(tenant string) (int64, error) {
	if err := store.CheckTenant(tenant); err != nil {
		return 0, err
	}
	n, err := collect(r, "SELECT count(*) FROM outbox WHERE tenant = $1", []any{tenant}, pgx.RowTo[int64])
	if err != nil || len(n) != 1 {
		return 0, err
	}
	return n[0], nil
}

func (w *writer) PutOutbox(rec *storagev1.OutboxRecord) error {
	if _, err := store.OutboxBeforePut(w, rec); err != nil {
		return err
	}
	var due []byte
	if rec.GetState() == storagev1.OutboxState_OUTBOX_STATE_PENDING {
		due = schema.OutboxDueKey(rec.GetNextAttemptTime().AsTime(), rec.GetId())
	}
	v, err := encode(rec)
	if err != nil {
		return err
	}
	_, err = w.exec(`INSERT INTO outbox (id, tenant, due_key, dead, created, rec) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (id) DO UPDATE SET due_key = EXCLUDED.due_key, dead = EXCLUDED.dead, rec = EXCLUDED.rec`,
		rec.GetId(), rec.GetTenant(), due, rec.GetState() == storagev1.OutboxState_OUTBOX_STATE_DEAD,
		rec.GetCreateTime().AsTime().UnixNano(), v)
	return err
}

func (w *writer) DeleteOutbox(id string) error {
	if !schema.ValidComponent(id) {
		return store.ErrOutboxNotFound(id)
	}
	n, err := w.exec("DELETE FROM outbox WHERE id = $1", id)
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrOutboxNotFound(id)
	}
	return nil
}

// ClaimOutbox locks the due rows it returns and skips the ones another transaction
// holds, so that replicas claiming at once take different notifications.
func (w *writer) ClaimOutbox(now time.Time, limit int) ([]*storagev1.OutboxRecord, error) {
	stop := schema.OutboxDueKey(now.Add(time.Nanosecond), "")
	return w.outboxRows(`SELECT rec FROM outbox WHERE due_key IS NOT NULL AND due_key < $1
		ORDER BY due_key LIMIT $2 FOR UPDATE SKIP LOCKED`, stop, limit)
}

// outboxStats adds the outbox's counts and its oldest pending notification to st.
func outboxStats(r *reader, st *store.Stats) error {
	var oldest *int64
	if err := r.q.query(`SELECT count(*) FILTER (WHERE NOT dead), count(*) FILTER (WHERE dead),
		min(created) FILTER (WHERE NOT dead) FROM outbox`, nil, func(rows pgx.Rows) error {
		if !rows.Next() {
			return rows.Err()
		}
		return rows.Scan(&st.OutboxPending, &st.OutboxDead, &oldest)
	}); err != nil {
		return err
	}
	if oldest != nil {
		st.OutboxOldestPending = time.Unix(0, *oldest).UTC()
	}
	return nil
}
