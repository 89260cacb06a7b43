package boltstore

import (
	"bytes"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

// reader implements store.Reader over a bbolt transaction.
type reader struct {
	tx *bolt.Tx
}

func (r reader) bucket(name []byte) *bolt.Bucket { return r.tx.Bucket(name) }

func unmarshal(v []byte, m proto.Message, what string, key []byte) error {
	if err := proto.Unmarshal(v, m); err != nil {
		return fmt.Errorf("store: decoding %s at key %x: %w", what, key, err)
	}
	return nil
}

func (r reader) GetTask(tenant, taskID string) (*storagev1.TaskRecord, error) {
	if err := store.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if !schema.ValidComponent(taskID) {
		return nil, store.ErrTaskNotFound(taskID)
	}
	key := schema.TaskKey(tenant, taskID)
	v := r.bucket(schema.Tasks).Get(key)
	if v == nil {
		return nil, store.ErrTaskNotFound(taskID)
	}
	rec := &storagev1.TaskRecord{}
	return rec, unmarshal(v, rec, "task", key)
}

// taskSpecValue is the encoded spec record of a task, and its key.
func (r reader) taskSpecValue(tenant, taskID string) (key, v []byte, err error) {
	if err := store.CheckTenant(tenant); err != nil {
		return nil, nil, err
	}
	if !schema.ValidComponent(taskID) {
		return nil, nil, store.ErrTaskNotFound(taskID)
	}
	key = schema.TaskKey(tenant, taskID)
	if v = r.bucket(schema.TaskSpecs).Get(key); v == nil {
		return nil, nil, store.ErrTaskNotFound(taskID)
	}
	return key, v, nil
}

func (r reader) GetTaskSpec(tenant, taskID string) (*storagev1.TaskSpecRecord, error) {
	key, v, err := r.taskSpecValue(tenant, taskID)
	if err != nil {
		return nil, err
	}
	spec := &storagev1.TaskSpecRecord{}
	return spec, unmarshal(v, spec, "task spec", key)
}

func (r reader) GetTaskSpecPartial(tenant, taskID string, withSubmitted bool) (*storagev1.TaskSpecRecord, error) {
	key, v, err := r.taskSpecValue(tenant, taskID)
	if err != nil {
		return nil, err
	}
	spec, err := store.UnmarshalTaskSpecPartial(v, withSubmitted)
	if err != nil {
		return nil, fmt.Errorf("store: decoding task spec at key %x: %w", key, err)
	}
	return spec, nil
}

func (r reader) TaskForRequest(tenant, requestID string) (string, error) {
	if err := store.CheckTenant(tenant); err != nil {
		return "", err
	}
	if !schema.ValidComponent(requestID) {
		return "", nil
	}
	key := schema.RequestKey(tenant, requestID)
	v := r.bucket(schema.Requests).Get(key)
	if v == nil {
		return "", nil
	}
	rec := &storagev1.RequestRecord{}
	if err := unmarshal(v, rec, "request", key); err != nil {
		return "", err
	}
	return rec.GetTaskId(), nil
}

func (r reader) ScanTasks(tenant string, tr store.TaskRange, fn func([]byte, *storagev1.TaskRecord) (bool, error)) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	prefix := schema.TenantPrefix(tenant)
	c := r.bucket(schema.TasksByCreate).Cursor()
	var k []byte
	switch {
	case tr.After != nil:
		if _, _, _, ok := schema.DecodeTaskByCreateKey(tr.After); !ok || !bytes.HasPrefix(tr.After, prefix) {
			return apierr.InvalidArgument(apierr.ReasonPageTokenInvalid, "page cursor does not belong to this listing")
		}
		k, _ = c.Seek(tr.After)
		if bytes.Equal(k, tr.After) {
			k, _ = c.Next()
		}
	case !tr.CreatedBefore.IsZero():
		k, _ = c.Seek(schema.TaskByCreateBound(tenant, tr.CreatedBefore.Add(-time.Nanosecond)))
	default:
		k, _ = c.Seek(prefix)
	}
	tasks := r.bucket(schema.Tasks)
	for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		_, created, taskID, ok := schema.DecodeTaskByCreateKey(k)
		if !ok {
			return fmt.Errorf("store: malformed listing key %x", k)
		}
		if !tr.CreatedAfter.IsZero() && created.Before(tr.CreatedAfter) {
			return nil // newest first: everything further is older still
		}
		if !tr.CreatedBefore.IsZero() && !created.Before(tr.CreatedBefore) {
			continue
		}
		key := schema.TaskKey(tenant, taskID)
		v := tasks.Get(key)
		if v == nil {
			return fmt.Errorf("store: listing index names task %s/%s, which does not exist", tenant, taskID)
		}
		var rec *storagev1.TaskRecord
		if store.TaskMayMatch(v, tr) {
			rec = &storagev1.TaskRecord{}
			if err := unmarshal(v, rec, "task", key); err != nil {
				return err
			}
		}
		if more, err := fn(bytes.Clone(k), rec); err != nil || !more {
			return err
		}
	}
	return nil
}

func (r reader) ScanEvents(tenant, taskID string, afterSeq int64, fn func(*storagev1.EventRecord) (bool, error)) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	if !schema.ValidComponent(taskID) {
		return nil
	}
	return scanSeq(r.bucket(schema.Events), tenant, taskID, afterSeq, "event", func() *storagev1.EventRecord {
		return &storagev1.EventRecord{}
	}, fn)
}

// scanSeq reads the SeqKey children of a parent after a number.
func scanSeq[T proto.Message](b *bolt.Bucket, tenant, parentID string, after int64, what string,
	newT func() T, fn func(T) (bool, error),
) error {
	prefix := schema.ChildPrefix(tenant, parentID)
	if after < 0 {
		after = 0
	}
	c := b.Cursor()
	for k, v := c.Seek(schema.SeqKey(tenant, parentID, after+1)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		m := newT()
		if err := unmarshal(v, m, what, k); err != nil {
			return err
		}
		if more, err := fn(m); err != nil || !more {
			return err
		}
	}
	return nil
}

func indexBucket(idx store.Index) ([]byte, error) {
	switch idx {
	case store.IndexQueue:
		return schema.RunQueue, nil
	case store.IndexLeaseDeadlines:
		return schema.LeaseDeadlines, nil
	case store.IndexEnded:
		return schema.Ended, nil
	case store.IndexPendingInterrupts:
		return schema.PendingInterrupts, nil
	case store.IndexInterruptDeadlines:
		return schema.InterruptDeadlines, nil
	case store.IndexInterruptEscalations:
		return schema.InterruptEscalations, nil
	}
	return nil, fmt.Errorf("store: unknown index %d", idx)
}

func (r reader) Tenants(idx store.Index, after string, fn func(string) (bool, error)) error {
	name, err := indexBucket(idx)
	if err != nil {
		return err
	}
	c := r.bucket(name).Cursor()
	var k []byte
	if after == "" {
		k, _ = c.First()
	} else {
		k, _ = seekPast(c, schema.TenantPrefix(after))
	}
	for k != nil {
		tenant, _, ok := schema.SplitTenant(k)
		if !ok {
			return fmt.Errorf("store: malformed %s key %x", idx, k)
		}
		if more, err := fn(tenant); err != nil || !more {
			return err
		}
		k, _ = seekPast(c, schema.TenantPrefix(tenant))
	}
	return nil
}

// seekPast positions c at the first key after every key starting with prefix.
func seekPast(c *bolt.Cursor, prefix []byte) ([]byte, []byte) {
	end := schema.PrefixEnd(prefix)
	if end == nil {
		return nil, nil
	}
	return c.Seek(end)
}

func (r reader) ScanIndex(idx store.Index, tenant string, ir store.IndexRange, fn func(store.IndexEntry) (bool, error)) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	if idx == store.IndexQueue {
		return fmt.Errorf("store: the run queue is read with ScanQueue")
	}
	name, err := indexBucket(idx)
	if err != nil {
		return err
	}
	var stop []byte
	if !ir.Until.IsZero() {
		stop = schema.TimeBound(tenant, ir.Until)
	}
	return scanTimed(r.bucket(name), schema.TenantPrefix(tenant), stop, ir.After, idx.String(), func(k []byte) (time.Time, string, bool) {
		_, at, id, ok := schema.DecodeTimeKey(k)
		return at, id, ok
	}, fn)
}

func (r reader) ScanQueue(tenant, queue string, ir store.IndexRange, fn func(store.IndexEntry) (bool, error)) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	if queue == "" {
		queue = store.DefaultQueue
	}
	if !schema.ValidQueueName(queue) {
		return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "queue %q is not a queue name", queue)
	}
	var stop []byte
	if !ir.Until.IsZero() {
		stop = schema.QueueBound(tenant, queue, ir.Until)
	}
	return scanTimed(r.bucket(schema.RunQueue), schema.QueuePrefix(tenant, queue), stop, ir.After, "run queue", func(k []byte) (time.Time, string, bool) {
		_, _, at, id, ok := schema.DecodeQueueKey(k)
		return at, id, ok
	}, fn)
}

// scanTimed reads the keys under prefix of a time-ordered index, after the key after
// (nil: from the first) and before stop (nil: no bound).
func scanTimed(b *bolt.Bucket, prefix, stop, after []byte, what string,
	decode func([]byte) (time.Time, string, bool), fn func(store.IndexEntry) (bool, error),
) error {
	c := b.Cursor()
	var k []byte
	if after != nil {
		if _, _, ok := decode(after); !ok || !bytes.HasPrefix(after, prefix) {
			return apierr.InvalidArgument(apierr.ReasonPageTokenInvalid, "page cursor does not belong to this listing")
		}
		k, _ = c.Seek(after)
		if bytes.Equal(k, after) {
			k, _ = c.Next()
		}
	} else {
		k, _ = c.Seek(prefix)
	}
	for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if stop != nil && bytes.Compare(k, stop) >= 0 {
			return nil
		}
		at, id, ok := decode(k)
		if !ok {
			return fmt.Errorf("store: malformed %s key %x", what, k)
		}
		if more, err := fn(store.IndexEntry{At: at, ID: id, Cursor: bytes.Clone(k)}); err != nil || !more {
			return err
		}
	}
	return nil
}

func (r reader) GetInterrupt(tenant, interruptID string) (*storagev1.InterruptRecord, error) {
	if err := store.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if !schema.ValidComponent(interruptID) {
		return nil, store.ErrInterruptNotFound(interruptID)
	}
	key := schema.InterruptKey(tenant, interruptID)
	v := r.bucket(schema.Interrupts).Get(key)
	if v == nil {
		return nil, store.ErrInterruptNotFound(interruptID)
	}
	rec := &storagev1.InterruptRecord{}
	return rec, unmarshal(v, rec, "interrupt", key)
}

func (r reader) ScanInterrupts(tenant, after string, fn func(*storagev1.InterruptRecord) (bool, error)) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	prefix := schema.TenantPrefix(tenant)
	c := r.bucket(schema.Interrupts).Cursor()
	k, v := c.Seek(prefix)
	if after != "" {
		start := schema.InterruptKey(tenant, after)
		if k, v = c.Seek(start); bytes.Equal(k, start) {
			k, v = c.Next()
		}
	}
	for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		rec := &storagev1.InterruptRecord{}
		if err := unmarshal(v, rec, "interrupt", k); err != nil {
			return err
		}
		if more, err := fn(rec); err != nil || !more {
			return err
		}
	}
	return nil
}

func (r reader) ScanTaskInterrupts(tenant, taskID string, fn func(*storagev1.InterruptRecord) (bool, error)) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	if !schema.ValidComponent(taskID) {
		return nil
	}
	prefix := schema.ChildPrefix(tenant, taskID)
	c := r.bucket(schema.InterruptsByTask).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		id, ok := schema.DecodeChildID(prefix, k)
		if !ok {
			return fmt.Errorf("store: malformed interrupt index key %x", k)
		}
		rec, err := r.GetInterrupt(tenant, id)
		if err != nil {
			return fmt.Errorf("store: task index names interrupt %s/%s: %w", tenant, id, err)
		}
		if more, err := fn(rec); err != nil || !more {
			return err
		}
	}
	return nil
}

func (r reader) ScanVerdicts(tenant, taskID string, afterSeq int64, fn func(*storagev1.VerdictRecord) (bool, error)) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	if !schema.ValidComponent(taskID) {
		return nil
	}
	return scanSeq(r.bucket(schema.Verdicts), tenant, taskID, afterSeq, "verdict", func() *storagev1.VerdictRecord {
		return &storagev1.VerdictRecord{}
	}, fn)
}

func (r reader) GetObligation(tenant, taskID string, ordinal int64) (*storagev1.ObligationRecord, error) {
	if err := store.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if !schema.ValidComponent(taskID) || ordinal < 1 {
		return nil, store.ErrObligationNotFound(taskID, ordinal)
	}
	key := schema.SeqKey(tenant, taskID, ordinal)
	v := r.bucket(schema.Obligations).Get(key)
	if v == nil {
		return nil, store.ErrObligationNotFound(taskID, ordinal)
	}
	rec := &storagev1.ObligationRecord{}
	return rec, unmarshal(v, rec, "obligation", key)
}

func (r reader) ScanObligations(tenant, taskID string, afterOrdinal int64, fn func(*storagev1.ObligationRecord) (bool, error)) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	if !schema.ValidComponent(taskID) {
		return nil
	}
	return scanSeq(r.bucket(schema.Obligations), tenant, taskID, afterOrdinal, "obligation", func() *storagev1.ObligationRecord {
		return &storagev1.ObligationRecord{}
	}, fn)
}
