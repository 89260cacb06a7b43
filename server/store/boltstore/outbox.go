package boltstore

import (
	"bytes"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

// Index keys derived from an outbox record; nil means "not in the index".

func outboxDueKey(rec *storagev1.OutboxRecord) []byte {
	if rec == nil || rec.GetState() != storagev1.OutboxState_OUTBOX_STATE_PENDING {
		return nil
	}
	return schema.OutboxDueKey(rec.GetNextAttemptTime().AsTime(), rec.GetId())
}

func outboxDeadKey(rec *storagev1.OutboxRecord) []byte {
	if rec == nil || rec.GetState() != storagev1.OutboxState_OUTBOX_STATE_DEAD {
		return nil
	}
	return schema.OutboxKey(rec.GetId())
}

func (r reader) GetOutbox(id string) (*storagev1.OutboxRecord, error) {
	if !schema.ValidComponent(id) {
		return nil, store.ErrOutboxNotFound(id)
	}
	key := schema.OutboxKey(id)
	v := r.bucket(schema.Outbox).Get(key)
	if v == nil {
		return nil, store.ErrOutboxNotFound(id)
	}
	rec := &storagev1.OutboxRecord{}
	return rec, unmarshal(v, rec, "outbox record", key)
}

func (r reader) ScanOutbox(state storagev1.OutboxState, after string, fn func(*storagev1.OutboxRecord) (bool, error)) error {
	idx := r.bucket(schema.OutboxDead)
	if state == storagev1.OutboxState_OUTBOX_STATE_PENDING {
		// Pending ones are read from the records themselves, in id order.
		idx = nil
	}
	src := r.bucket(schema.Outbox)
	if idx != nil {
		src = idx
	}
	c := src.Cursor()
	k, _ := c.First()
	if after != "" {
		start := schema.OutboxKey(after)
		if k, _ = c.Seek(start); bytes.Equal(k, start) {
			k, _ = c.Next()
		}
	}
	for ; k != nil; k, _ = c.Next() {
		rec, err := r.GetOutbox(string(k))
		if err != nil {
			return fmt.Errorf("store: outbox index entry %q without its record: %w", k, err)
		}
		if rec.GetState() != state {
			continue
		}
		if more, err := fn(rec); err != nil || !more {
			return err
		}
	}
	return nil
}

func (r reader) OutboxDepth(tenant string) (int64, error) {
	if err := store.CheckTenant(tenant); err != nil {
		return 0, err
	}
	b := r.bucket(schema.Counters)
	return schema.DecodeCount(b.Get(schema.CounterKey(tenant, schema.CounterOutboxPending))) +
		schema.DecodeCount(b.Get(schema.CounterKey(tenant, schema.CounterOutboxDead))), nil
}

// OutboxDepth implements store.Reader with the counter changes this transaction has
// made so far, which are applied only at its commit.
func (w *writer) OutboxDepth(tenant string) (int64, error) {
	n, err := w.reader.OutboxDepth(tenant)
	if err != nil {
		return 0, err
	}
	return n + w.state.counts[string(schema.CounterKey(tenant, schema.CounterOutboxPending))] +
		w.state.counts[string(schema.CounterKey(tenant, schema.CounterOutboxDead))], nil
}

func outboxCounter(rec *storagev1.OutboxRecord) string {
	if rec.GetState() == storagev1.OutboxState_OUTBOX_STATE_DEAD {
		return schema.CounterOutboxDead
	}
	return schema.CounterOutboxPending
}

func (w *writer) PutOutbox(rec *storagev1.OutboxRecord) error {
	old, err := store.OutboxBeforePut(w, rec)
	if err != nil {
		return err
	}
	if err := w.moveOutbox(old, rec); err != nil {
		return err
	}
	return w.put(schema.Outbox, schema.OutboxKey(rec.GetId()), rec)
}

// moveOutbox keeps the outbox indexes and counters in step with a record (old or rec
// may be nil).
func (w *writer) moveOutbox(old, rec *storagev1.OutboxRecord) error {
	if _, err := w.moveIndex(schema.OutboxDue, outboxDueKey(old), outboxDueKey(rec)); err != nil {
		return err
	}
	if _, err := w.moveIndex(schema.OutboxDead, outboxDeadKey(old), outboxDeadKey(rec)); err != nil {
		return err
	}
	if old != nil && (rec == nil || outboxCounter(old) != outboxCounter(rec)) {
		if err := w.addCount(old.GetTenant(), outboxCounter(old), -1); err != nil {
			return err
		}
	}
	if rec != nil && (old == nil || outboxCounter(old) != outboxCounter(rec)) {
		return w.addCount(rec.GetTenant(), outboxCounter(rec), 1)
	}
	return nil
}

func (w *writer) DeleteOutbox(id string) error {
	old, err := w.GetOutbox(id)
	if err != nil {
		return err
	}
	if err := w.moveOutbox(old, nil); err != nil {
		return err
	}
	return w.del(schema.Outbox, schema.OutboxKey(id))
}

func (w *writer) ClaimOutbox(now time.Time, limit int) ([]*storagev1.OutboxRecord, error) {
	var out []*storagev1.OutboxRecord
	stop := schema.OutboxDueKey(now.Add(time.Nanosecond), "")
	c := w.bucket(schema.OutboxDue).Cursor()
	for k, _ := c.First(); k != nil && len(out) < limit && bytes.Compare(k, stop) < 0; k, _ = c.Next() {
		_, id, ok := schema.DecodeOutboxDueKey(k)
		if !ok {
			return nil, fmt.Errorf("store: malformed outbox due key %x", k)
		}
		rec, err := w.GetOutbox(id)
		if err != nil {
			return nil, fmt.Errorf("store: outbox due entry %q without its record: %w", id, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// outboxStats adds the outbox's counts and its oldest pending notification to st.
func outboxStats(r reader, st *store.Stats) error {
	c := r.bucket(schema.Outbox).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		rec := &storagev1.OutboxRecord{}
		if err := proto.Unmarshal(v, rec); err != nil {
			return fmt.Errorf("store: decoding outbox record %q: %w", k, err)
		}
		if rec.GetState() == storagev1.OutboxState_OUTBOX_STATE_PENDING {
			st.OutboxOldestPending = rec.GetCreateTime().AsTime()
			return nil
		}
	}
	return nil
}
