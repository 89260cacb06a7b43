package boltstore

import (
	"bytes"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

// writer implements store.Writer. dirty records whether this fn wrote anything, which
// decides whether its failure poisons the shared transaction.
type writer struct {
	reader
	state    *txState
	dirty    bool
	onCommit []func()
	// known is the task (tenant and id, as a TaskKey) this writer last found or wrote,
	// so that the writes that follow a task's (its spec, its events) need not look it
	// up again; absentRequest is the request key it last found unused. Both are
	// cleared by anything this writer does that could make them wrong; no other
	// writer runs until this one's function returns.
	known, absentRequest string
}

func (w *writer) OnCommit(f func()) { w.onCommit = append(w.onCommit, f) }

func (w *writer) put(bucket, key []byte, m proto.Message) error {
	v, err := proto.Marshal(m)
	if err != nil {
		return fmt.Errorf("store: encoding value for %s: %w", bucket, err)
	}
	return w.putRaw(bucket, key, v)
}

func (w *writer) putRaw(bucket, key, v []byte) error {
	w.dirty = true
	if err := w.bucket(bucket).Put(key, v); err != nil {
		return fmt.Errorf("store: put %s: %w", bucket, err)
	}
	w.state.logPut(bucket, key, v)
	return nil
}

func (w *writer) del(bucket, key []byte) error {
	w.dirty = true
	if err := w.bucket(bucket).Delete(key); err != nil {
		return fmt.Errorf("store: delete %s: %w", bucket, err)
	}
	w.state.logDelete(bucket, key)
	return nil
}

// moveIndex makes an index hold newKey instead of oldKey (either may be nil) and
// returns the change in entry count.
func (w *writer) moveIndex(bucket, oldKey, newKey []byte) (int64, error) {
	if bytes.Equal(oldKey, newKey) {
		return 0, nil
	}
	var delta int64
	if oldKey != nil {
		if err := w.del(bucket, oldKey); err != nil {
			return 0, err
		}
		delta--
	}
	if newKey != nil {
		if err := w.putRaw(bucket, newKey, nil); err != nil {
			return 0, err
		}
		delta++
	}
	return delta, nil
}

// addCount records a counter change, written once per transaction (txState.apply).
func (w *writer) addCount(tenant, name string, delta int64) error {
	if delta == 0 {
		return nil
	}
	w.dirty = true
	w.state.counts[string(schema.CounterKey(tenant, name))] += delta
	return nil
}

func stateCounter(s agentplanev1.TaskState) string {
	return schema.CounterTasksInState + strconv.Itoa(int(s))
}

// Index keys derived from a task record; nil means "not in the index".

func queueKey(rec *storagev1.TaskRecord) []byte {
	if rec == nil || rec.GetQueueTime() == nil {
		return nil
	}
	return schema.QueueKey(rec.GetTenant(), store.QueueOf(rec), store.QueueOrder(rec), rec.GetTaskId())
}

// moveQueue keeps the run queue and its depth counter in step with a task record.
func (w *writer) moveQueue(old, rec *storagev1.TaskRecord) error {
	delta, err := w.moveIndex(schema.RunQueue, queueKey(old), queueKey(rec))
	if err != nil || delta == 0 {
		return err
	}
	r := rec
	if r == nil {
		r = old
	}
	return w.addCount(r.GetTenant(), schema.CounterQueueDepth+store.QueueOf(r), delta)
}

func leaseKey(rec *storagev1.TaskRecord) []byte {
	l := rec.GetLease()
	if l == nil || l.GetRevoked() || l.GetDeadline() == nil {
		return nil
	}
	return schema.TimeKey(rec.GetTenant(), l.GetDeadline().AsTime(), rec.GetTaskId())
}

func endedKey(rec *storagev1.TaskRecord) []byte {
	if rec == nil || rec.GetEndTime() == nil {
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
	} else {
		if reqID := rec.GetRequestId(); reqID != "" {
			owner := ""
			if string(schema.RequestKey(tenant, reqID)) != w.absentRequest {
				if owner, err = w.TaskForRequest(tenant, reqID); err != nil {
					return err
				}
			}
			w.absentRequest = ""
			if owner != "" {
				return apierr.New(codes.AlreadyExists, apierr.ReasonRequestIDReused,
					"request_id %q already created task %s", reqID, owner)
			}
			if err := w.put(schema.Requests, schema.RequestKey(tenant, reqID), &storagev1.RequestRecord{TaskId: id}); err != nil {
				return err
			}
		}
		if err := w.putRaw(schema.TasksByCreate, schema.TaskByCreateKey(tenant, rec.GetCreateTime().AsTime(), id), nil); err != nil {
			return err
		}
	}
	if err := w.moveQueue(old, rec); err != nil {
		return err
	}
	leases, err := w.moveIndex(schema.LeaseDeadlines, leaseKey(old), leaseKey(rec))
	if err != nil {
		return err
	}
	if err := w.addCount(tenant, schema.CounterActiveLeases, leases); err != nil {
		return err
	}
	if _, err := w.moveIndex(schema.Ended, endedKey(old), endedKey(rec)); err != nil {
		return err
	}
	if old == nil || old.GetState() != rec.GetState() {
		if old != nil {
			if err := w.addCount(tenant, stateCounter(old.GetState()), -1); err != nil {
				return err
			}
		}
		if err := w.addCount(tenant, stateCounter(rec.GetState()), 1); err != nil {
			return err
		}
	}
	key := schema.TaskKey(tenant, id)
	if err := w.put(schema.Tasks, key, rec); err != nil {
		return err
	}
	w.known = string(key)
	return nil
}

func (w *writer) PutTaskSpec(tenant, taskID string, spec *storagev1.TaskSpecRecord) error {
	if err := w.requireTask(tenant, taskID); err != nil {
		return err
	}
	key := schema.TaskKey(tenant, taskID)
	if w.bucket(schema.TaskSpecs).Get(key) != nil {
		return fmt.Errorf("store: task %s already has a spec; specs are written once", taskID)
	}
	return w.put(schema.TaskSpecs, key, spec)
}

func (w *writer) requireTask(tenant, taskID string) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	if !schema.ValidComponent(taskID) {
		return store.ErrTaskNotFound(taskID)
	}
	key := schema.TaskKey(tenant, taskID)
	if string(key) == w.known {
		return nil
	}
	if w.bucket(schema.Tasks).Get(key) == nil {
		return store.ErrTaskNotFound(taskID)
	}
	w.known = string(key)
	return nil
}

// lastSeq is the highest SeqKey number under a parent, or 0.
func lastSeq(b *bolt.Bucket, tenant, parentID string) int64 {
	prefix := schema.ChildPrefix(tenant, parentID)
	c := b.Cursor()
	k, _ := seekPast(c, prefix)
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return 0
	}
	return schema.DecodeSeq(k)
}

func (w *writer) AppendEvents(tenant, taskID string, events ...*storagev1.EventRecord) error {
	if err := w.requireTask(tenant, taskID); err != nil {
		return err
	}
	if len(events) == 0 {
		return nil
	}
	b := w.bucket(schema.Events)
	last := lastSeq(b, tenant, taskID)
	for _, ev := range events {
		if ev.GetSequence() != last+1 {
			return fmt.Errorf("store: event sequence %d for task %s does not follow %d", ev.GetSequence(), taskID, last)
		}
		if err := w.put(schema.Events, schema.SeqKey(tenant, taskID, ev.GetSequence()), ev); err != nil {
			return err
		}
		last++
	}
	return w.addCount(tenant, schema.CounterEvents, int64(len(events)))
}

// Index keys derived from an interrupt record.

func pendingKey(tenant string, rec *storagev1.InterruptRecord) []byte {
	if !isPending(rec) {
		return nil
	}
	return schema.TimeKey(tenant, rec.GetCreateTime().AsTime(), rec.GetInterrupt().GetInterruptId())
}

func interruptDeadlineKey(tenant string, rec *storagev1.InterruptRecord) []byte {
	if !isPending(rec) || rec.GetInterrupt().GetDeadline() == nil {
		return nil
	}
	return schema.TimeKey(tenant, rec.GetInterrupt().GetDeadline().AsTime(), rec.GetInterrupt().GetInterruptId())
}

func interruptEscalationKey(tenant string, rec *storagev1.InterruptRecord) []byte {
	due, ok := store.EscalationDue(rec)
	if !ok {
		return nil
	}
	return schema.TimeKey(tenant, due, rec.GetInterrupt().GetInterruptId())
}

func isPending(rec *storagev1.InterruptRecord) bool {
	return rec != nil && rec.GetInterrupt().GetState() == agentplanev1.InterruptState_INTERRUPT_STATE_PENDING &&
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
	if old != nil {
		if old.GetInterrupt().GetTaskId() != taskID || !proto.Equal(old.GetCreateTime(), rec.GetCreateTime()) {
			return fmt.Errorf("store: interrupt %s: task_id and create_time are immutable", id)
		}
	} else if err := w.putRaw(schema.InterruptsByTask, schema.ChildKey(tenant, taskID, id), nil); err != nil {
		return err
	}
	pending, err := w.moveIndex(schema.PendingInterrupts, pendingKey(tenant, old), pendingKey(tenant, rec))
	if err != nil {
		return err
	}
	if err := w.addCount(tenant, schema.CounterPendingInterrupts, pending); err != nil {
		return err
	}
	if _, err := w.moveIndex(schema.InterruptDeadlines, interruptDeadlineKey(tenant, old), interruptDeadlineKey(tenant, rec)); err != nil {
		return err
	}
	if _, err := w.moveIndex(schema.InterruptEscalations, interruptEscalationKey(tenant, old), interruptEscalationKey(tenant, rec)); err != nil {
		return err
	}
	return w.put(schema.Interrupts, schema.InterruptKey(tenant, id), rec)
}

func (w *writer) PutVerdict(tenant string, rec *storagev1.VerdictRecord) error {
	taskID, seq := rec.GetVerdict().GetTaskId(), rec.GetVerdict().GetSequence()
	if err := w.requireTask(tenant, taskID); err != nil {
		return err
	}
	if seq < 1 {
		return fmt.Errorf("store: verdict of task %s has sequence %d; it must be the event's (>= 1)", taskID, seq)
	}
	return w.put(schema.Verdicts, schema.SeqKey(tenant, taskID, seq), rec)
}

func (w *writer) PutObligation(tenant, taskID string, rec *storagev1.ObligationRecord) error {
	if err := w.requireTask(tenant, taskID); err != nil {
		return err
	}
	if rec.GetOrdinal() < 1 {
		return fmt.Errorf("store: obligation of task %s has ordinal %d; ordinals start at 1", taskID, rec.GetOrdinal())
	}
	return w.put(schema.Obligations, schema.SeqKey(tenant, taskID, rec.GetOrdinal()), rec)
}

// deletePrefix removes every key of bucket starting with prefix and returns how many.
func (w *writer) deletePrefix(bucket, prefix []byte) (int64, error) {
	c := w.bucket(bucket).Cursor()
	var n int64
	// Re-seek after each delete rather than trusting Next after Delete.
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		w.dirty = true
		w.state.logDelete(bucket, k) // before Delete: k may point into the node it edits
		if err := c.Delete(); err != nil {
			return n, fmt.Errorf("store: delete %s: %w", bucket, err)
		}
		n++
	}
	return n, nil
}

func (w *writer) DeleteTask(tenant, taskID string) (store.Deleted, error) {
	w.known, w.absentRequest = "", ""
	var d store.Deleted
	rec, err := w.GetTask(tenant, taskID)
	if err != nil {
		return d, err
	}
	var ids []string
	if err := w.ScanTaskInterrupts(tenant, taskID, func(in *storagev1.InterruptRecord) (bool, error) {
		ids = append(ids, in.GetInterrupt().GetInterruptId())
		return true, nil
	}); err != nil {
		return d, err
	}
	for _, id := range ids {
		in, err := w.GetInterrupt(tenant, id)
		if err != nil {
			return d, err
		}
		pending, err := w.moveIndex(schema.PendingInterrupts, pendingKey(tenant, in), nil)
		if err != nil {
			return d, err
		}
		if err := w.addCount(tenant, schema.CounterPendingInterrupts, pending); err != nil {
			return d, err
		}
		if _, err := w.moveIndex(schema.InterruptDeadlines, interruptDeadlineKey(tenant, in), nil); err != nil {
			return d, err
		}
		if _, err := w.moveIndex(schema.InterruptEscalations, interruptEscalationKey(tenant, in), nil); err != nil {
			return d, err
		}
		if err := w.del(schema.Interrupts, schema.InterruptKey(tenant, id)); err != nil {
			return d, err
		}
		d.Interrupts++
	}
	if err := w.del(schema.TaskSpecs, schema.TaskKey(tenant, taskID)); err != nil {
		return d, err
	}
	child := schema.ChildPrefix(tenant, taskID)
	if _, err := w.deletePrefix(schema.InterruptsByTask, child); err != nil {
		return d, err
	}
	if d.Events, err = w.deletePrefix(schema.Events, child); err != nil {
		return d, err
	}
	if err := w.addCount(tenant, schema.CounterEvents, -d.Events); err != nil {
		return d, err
	}
	if d.Verdicts, err = w.deletePrefix(schema.Verdicts, child); err != nil {
		return d, err
	}
	if d.Obligations, err = w.deletePrefix(schema.Obligations, child); err != nil {
		return d, err
	}
	if reqID := rec.GetRequestId(); reqID != "" {
		if owner, err := w.TaskForRequest(tenant, reqID); err != nil {
			return d, err
		} else if owner == taskID {
			if err := w.del(schema.Requests, schema.RequestKey(tenant, reqID)); err != nil {
				return d, err
			}
		}
	}
	if err := w.del(schema.TasksByCreate, schema.TaskByCreateKey(tenant, rec.GetCreateTime().AsTime(), taskID)); err != nil {
		return d, err
	}
	if err := w.moveQueue(rec, nil); err != nil {
		return d, err
	}
	leases, err := w.moveIndex(schema.LeaseDeadlines, leaseKey(rec), nil)
	if err != nil {
		return d, err
	}
	if err := w.addCount(tenant, schema.CounterActiveLeases, leases); err != nil {
		return d, err
	}
	if _, err := w.moveIndex(schema.Ended, endedKey(rec), nil); err != nil {
		return d, err
	}
	if err := w.addCount(tenant, stateCounter(rec.GetState()), -1); err != nil {
		return d, err
	}
	return d, w.del(schema.Tasks, schema.TaskKey(tenant, taskID))
}

// TaskForRequest implements store.Reader, remembering a request key found unused so
// that a PutTask of a new task with it need not look again.
func (w *writer) TaskForRequest(tenant, requestID string) (string, error) {
	owner, err := w.reader.TaskForRequest(tenant, requestID)
	if err == nil && owner == "" && schema.ValidComponent(requestID) {
		w.absentRequest = string(schema.RequestKey(tenant, requestID))
	}
	return owner, err
}
