package schema

import (
	"bytes"
	"encoding/binary"
	"time"
)

// Version is the layout version this binary reads and writes. Bump it with any change
// to bucket names, key encodings or the meaning of stored values, and teach the store
// to upgrade the version before it (boltstore's upgrade).
//
// Version 2 keys the run queue by queue name (bucket RunQueue, QueueKey) where version
// 1 had one queue per tenant (bucket QueueV1, TimeKey). Version 3 adds the webhook
// outbox (buckets Outbox, OutboxDue, OutboxDead). Version 4 adds schedules (buckets
// Schedules, SchedulesDue). Version 5 adds the budget counts (bucket Budgets). Version 6
// adds the approval audit log (bucket Audit) and the escalation index (bucket
// InterruptEscalations). Version 7 adds the flow-control state (bucket Flow).
// Version 8 adds the revocations of single approval links (bucket LinkRevocations).
const Version = 8

// OldestUpgradable is the oldest version a store opens (and upgrades) from.
const OldestUpgradable = 1

// MaxComponent is the longest string component a key may hold.
const MaxComponent = 255

// Buckets. Each holds one kind of record or one derived index.
var (
	// Meta holds the schema header under MetaSchemaKey.
	Meta = []byte("meta")
	// Tasks maps TaskKey to a TaskRecord.
	Tasks = []byte("tasks")
	// TaskSpecs maps TaskKey to the task's TaskSpecRecord (written once).
	TaskSpecs = []byte("task_specs")
	// TasksByCreate is the listing index: TaskByCreateKey, empty value.
	TasksByCreate = []byte("tasks_by_create")
	// Requests is the idempotency index: RequestKey to a RequestRecord.
	Requests = []byte("requests")
	// Events maps EventKey to an EventRecord.
	Events = []byte("events")
	// RunQueue is the run queue: QueueKey(tenant, queue, queue time, task id), empty
	// value, so that leasing from one queue is a range scan.
	RunQueue = []byte("run_queue")
	// QueueV1 is version 1's run queue (TimeKey, one queue per tenant); only the
	// upgrade reads it.
	QueueV1 = []byte("queue")
	// LeaseDeadlines indexes active leases: TimeKey(deadline), empty value.
	LeaseDeadlines = []byte("lease_deadlines")
	// Ended indexes terminal tasks for retention: TimeKey(end time), empty value.
	Ended = []byte("tasks_by_end")
	// Interrupts maps InterruptKey to an InterruptRecord.
	Interrupts = []byte("interrupts")
	// PendingInterrupts is the inbox: TimeKey(creation time), empty value.
	PendingInterrupts = []byte("interrupts_pending")
	// InterruptDeadlines indexes pending interrupts with a deadline: TimeKey(deadline).
	InterruptDeadlines = []byte("interrupt_deadlines")
	// InterruptsByTask lists a task's interrupts: ChildKey(task, interrupt id).
	InterruptsByTask = []byte("interrupts_by_task")
	// Verdicts maps SeqKey(task, event sequence) to a VerdictRecord.
	Verdicts = []byte("verdicts")
	// Obligations maps SeqKey(task, ordinal) to an ObligationRecord.
	Obligations = []byte("obligations")
	// Counters maps CounterKey to an 8-byte big-endian signed count.
	Counters = []byte("counters")
	// Outbox maps OutboxKey(id) to an OutboxRecord: webhook notifications not yet
	// delivered, and dead letters.
	Outbox = []byte("outbox")
	// OutboxDue indexes pending notifications: OutboxDueKey(next attempt, id), empty
	// value.
	OutboxDue = []byte("outbox_due")
	// OutboxDead indexes dead letters: OutboxKey(id), empty value.
	OutboxDead = []byte("outbox_dead")
	// Schedules maps ScheduleKey(tenant, id) to a ScheduleRecord.
	Schedules = []byte("schedules")
	// SchedulesDue indexes schedules by when the scheduler looks at them next:
	// ScheduleDueKey(wake time, tenant, id), empty value, across tenants.
	SchedulesDue = []byte("schedules_due")
	// Budgets maps BudgetKey(tenant, budget) to a BudgetUsageRecord.
	Budgets = []byte("budgets")
	// Audit maps AuditKey(tenant, audit id) to an AuditRecordEntry: the approval audit
	// log, append-only.
	Audit = []byte("audit")
	// InterruptEscalations indexes pending interrupts under an approval rule by their
	// next escalation step (store.EscalationDue): TimeKey(due), empty value.
	InterruptEscalations = []byte("interrupt_escalations")
	// Flow maps FlowKey(tenant, name) to a FlowRecord: the slots of a concurrency key
	// or a token bucket (docs/api.md#flow-control).
	Flow = []byte("flow")
	// LinkRevocations maps LinkRevocationKey(tenant, link id) to a
	// LinkRevocationRecord (docs/hitl.md#signed-links).
	LinkRevocations = []byte("link_revocations")
)

// AuditBuckets are the buckets version 6 added; the upgrade from 5 (or earlier) creates them
// (empty: no interrupt of an older version is under an approval rule).
var AuditBuckets = [][]byte{Audit, InterruptEscalations}

// AuditKey is the key of an audit record: the tenant, then its id (which sorts by time).
func AuditKey(tenant, id string) []byte {
	return append(TenantPrefix(tenant), id...)
}

// FlowBuckets are the buckets version 7 added; the upgrade from 6 (or earlier) creates them.
var FlowBuckets = [][]byte{Flow}

// LinkBuckets are the buckets version 8 added; the upgrade from 7 (or earlier) creates them.
var LinkBuckets = [][]byte{LinkRevocations}

// LinkRevocationKey is the key of the revocation of a tenant's approval link id (1 to
// MaxComponent bytes).
func LinkRevocationKey(tenant, id string) []byte { return appendString(TenantPrefix(tenant), id) }

// OutboxBuckets are the buckets version 3 added; the upgrade from 2 creates them.
var OutboxBuckets = [][]byte{Outbox, OutboxDue, OutboxDead}

// ScheduleBuckets are the buckets version 4 added; the upgrade from 3 creates them.
var ScheduleBuckets = [][]byte{Schedules, SchedulesDue}

// Buckets lists every bucket, created together with the store.
var Buckets = [][]byte{
	Meta, Tasks, TaskSpecs, TasksByCreate, Requests, Events, RunQueue, LeaseDeadlines, Ended,
	Interrupts, PendingInterrupts, InterruptDeadlines, InterruptsByTask,
	Verdicts, Obligations, Counters, Outbox, OutboxDue, OutboxDead, Schedules, SchedulesDue, Budgets, Audit,
	InterruptEscalations, Flow, LinkRevocations,
}

// BudgetBuckets are the buckets version 5 added; the upgrade from 4 (or earlier)
// creates them.
var BudgetBuckets = [][]byte{Budgets}

// BudgetKey is the key of a tenant's count for one budget.
func BudgetKey(tenant, budget string) []byte {
	return appendString(TenantPrefix(tenant), budget)
}

// MetaSchemaKey holds the SchemaInfo in Meta.
var MetaSchemaKey = []byte("schema")

// Counter names (the second component of a CounterKey).
const (
	CounterEvents            = "events"
	CounterActiveLeases      = "leases.active"
	CounterPendingInterrupts = "interrupts.pending"
	// CounterQueueDepth is followed by a queue name: the tasks waiting in it.
	CounterQueueDepth = "queue.depth."
	// CounterTasksInState is followed by the TaskState number.
	CounterTasksInState = "tasks.state."
	// CounterOutboxPending and CounterOutboxDead count a tenant's notifications
	// waiting for delivery and its dead letters.
	CounterOutboxPending = "outbox.pending"
	CounterOutboxDead    = "outbox.dead"
	// CounterSchedules counts a tenant's schedules.
	CounterSchedules = "schedules"
)

// ScheduleKey is the key of a schedule: tenant, then id, so a tenant's schedules list
// in id order.
func ScheduleKey(tenant, id string) []byte {
	return appendString(TenantPrefix(tenant), id)
}

// ScheduleDueKey orders schedules across tenants by wake time, then tenant and id.
func ScheduleDueKey(wake time.Time, tenant, id string) []byte {
	b := appendUint(make([]byte, 0, 8+2+len(tenant)+len(id)), Nanos(wake))
	return appendString(appendString(b, tenant), id)
}

// DecodeScheduleDueKey splits a ScheduleDueKey.
func DecodeScheduleDueKey(key []byte) (wake time.Time, tenant, id string, ok bool) {
	if len(key) < 8 {
		return time.Time{}, "", "", false
	}
	n := binary.BigEndian.Uint64(key)
	tenant, rest, ok := cutString(key[8:])
	if !ok {
		return time.Time{}, "", "", false
	}
	id, rest, ok = cutString(rest)
	if !ok || len(rest) != 0 {
		return time.Time{}, "", "", false
	}
	return time.Unix(0, int64(n)).UTC(), tenant, id, true
}

// OutboxKey is the key of a notification: its id, which sorts by creation time.
func OutboxKey(id string) []byte { return []byte(id) }

// OutboxDueKey orders pending notifications by when they are due, then id.
func OutboxDueKey(due time.Time, id string) []byte {
	return append(appendUint(make([]byte, 0, 8+len(id)), Nanos(due)), id...)
}

// DecodeOutboxDueKey splits an OutboxDueKey.
func DecodeOutboxDueKey(key []byte) (due time.Time, id string, ok bool) {
	if len(key) <= 8 {
		return time.Time{}, "", false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(key))).UTC(), string(key[8:]), true
}

// ValidComponent reports whether s fits in a key component.
func ValidComponent(s string) bool { return s != "" && len(s) <= MaxComponent }

func appendString(b []byte, s string) []byte {
	b = append(b, byte(len(s)))
	return append(b, s...)
}

func appendUint(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// Nanos is the key form of a time: Unix nanoseconds, clamped at zero so that byte order
// is time order.
func Nanos(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	n := t.UnixNano()
	if n < 0 {
		return 0
	}
	return uint64(n)
}

// TenantPrefix is the prefix of every key of tenant.
func TenantPrefix(tenant string) []byte {
	// Room for what keys add after the tenant (a time, an id), so that building
	// a key allocates once.
	return appendString(make([]byte, 0, 1+len(tenant)+keyRoom), tenant)
}

// keyRoom is what TenantPrefix leaves room for: a time (8 bytes), then an id of up
// to 32 bytes with its length byte, and a sequence (8 bytes).
const keyRoom = 8 + 1 + 32 + 8

// TaskKey is the key of a task record.
func TaskKey(tenant, taskID string) []byte {
	return appendString(TenantPrefix(tenant), taskID)
}

// TaskByCreateKey orders a tenant's tasks newest first: the creation time is inverted.
func TaskByCreateKey(tenant string, created time.Time, taskID string) []byte {
	return appendString(appendUint(TenantPrefix(tenant), ^Nanos(created)), taskID)
}

// TaskByCreateBound is the first TasksByCreate key of tenant for tasks created at or
// before t (newest-first order starts there).
func TaskByCreateBound(tenant string, t time.Time) []byte {
	return appendUint(TenantPrefix(tenant), ^Nanos(t))
}

// RequestKey is the idempotency key of (tenant, request id).
func RequestKey(tenant, requestID string) []byte {
	return appendString(TenantPrefix(tenant), requestID)
}

// ChildPrefix is the prefix of the keys under one parent (a task's events, verdicts,
// obligations, interrupts).
func ChildPrefix(tenant, parentID string) []byte {
	return appendString(TenantPrefix(tenant), parentID)
}

// SeqKey orders a parent's children by a number: events and verdicts by sequence,
// obligations by ordinal.
func SeqKey(tenant, parentID string, seq int64) []byte {
	return appendUint(ChildPrefix(tenant, parentID), uint64(seq))
}

// ChildKey names one child by id under a parent (a task's interrupts).
func ChildKey(tenant, parentID, childID string) []byte {
	return appendString(ChildPrefix(tenant, parentID), childID)
}

// InterruptKey is the key of an interrupt record.
func InterruptKey(tenant, interruptID string) []byte {
	return appendString(TenantPrefix(tenant), interruptID)
}

// TimeKey is the key of a time index (queue, lease deadlines, retention, inbox,
// interrupt deadlines): tenant, time, id, oldest first.
func TimeKey(tenant string, t time.Time, id string) []byte {
	return appendString(appendUint(TenantPrefix(tenant), Nanos(t)), id)
}

// DefaultQueue is the run queue of tasks started without one, and the only queue of a
// runtime that names none.
const DefaultQueue = "default"

// MaxQueueName is the longest queue name.
const MaxQueueName = 64

// ValidQueueName reports whether q is a queue name: 1 to MaxQueueName bytes of ASCII
// letters, digits, '.', '_' and '-', starting with a letter or digit.
func ValidQueueName(q string) bool {
	if q == "" || len(q) > MaxQueueName {
		return false
	}
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// QueuePrefix is the prefix of the RunQueue keys of one tenant's queue.
func QueuePrefix(tenant, queue string) []byte {
	return appendString(TenantPrefix(tenant), queue)
}

// QueueKey is the key of a queued task: tenant, queue, queue time, task id; oldest
// first within a queue.
func QueueKey(tenant, queue string, t time.Time, taskID string) []byte {
	return appendString(appendUint(QueuePrefix(tenant, queue), Nanos(t)), taskID)
}

// QueueBound is the first QueueKey of tenant's queue after every key at or before t.
func QueueBound(tenant, queue string, t time.Time) []byte {
	return appendUint(QueuePrefix(tenant, queue), Nanos(t)+1)
}

// DecodeQueueKey splits a QueueKey.
func DecodeQueueKey(key []byte) (tenant, queue string, t time.Time, taskID string, ok bool) {
	tenant, rest, ok := cutString(key)
	if !ok {
		return "", "", time.Time{}, "", false
	}
	queue, rest, ok = cutString(rest)
	if !ok || len(rest) < 8 {
		return "", "", time.Time{}, "", false
	}
	n := binary.BigEndian.Uint64(rest)
	taskID, rest, ok = cutString(rest[8:])
	if !ok || len(rest) != 0 {
		return "", "", time.Time{}, "", false
	}
	return tenant, queue, time.Unix(0, int64(n)).UTC(), taskID, true
}

// TimeBound is the first TimeKey of tenant after every key at or before t.
func TimeBound(tenant string, t time.Time) []byte {
	return appendUint(TenantPrefix(tenant), Nanos(t)+1)
}

// CounterKey is the key of one of tenant's counters.
func CounterKey(tenant, name string) []byte {
	return append(TenantPrefix(tenant), name...)
}

// FlowKey is the key of a tenant's flow-control record name (1 to MaxComponent
// bytes).
func FlowKey(tenant, name string) []byte { return appendString(TenantPrefix(tenant), name) }

// DecodeFlowKey splits a FlowKey.
func DecodeFlowKey(key []byte) (tenant, name string, ok bool) {
	tenant, rest, ok := cutString(key)
	if !ok {
		return "", "", false
	}
	name, rest, ok = cutString(rest)
	return tenant, name, ok && len(rest) == 0
}

// PriorityStep is how far one step of a task's priority moves it in its queue: a
// task of priority p is ordered as if it had been queued p × PriorityStep earlier, so
// that within a queue a higher priority goes first unless the lower one has waited
// PriorityStep (about six weeks) longer.
const PriorityStep = 1000 * time.Hour

// MinPriority and MaxPriority bound a task's priority.
const (
	MinPriority = -5
	MaxPriority = 5
)

// QueueOrder is the time a queued task is ordered by in its queue: its queue time
// moved by its priority (see PriorityStep). Priority 0 keeps the queue time itself.
func QueueOrder(queueTime time.Time, priority int32) time.Time {
	p := max(min(priority, MaxPriority), MinPriority)
	return queueTime.Add(-time.Duration(p) * PriorityStep)
}

// SplitTenant returns the tenant of key and what follows it.
func SplitTenant(key []byte) (tenant string, rest []byte, ok bool) {
	s, rest, ok := cutString(key)
	return s, rest, ok
}

// DecodeTimeKey splits a TimeKey.
func DecodeTimeKey(key []byte) (tenant string, t time.Time, id string, ok bool) {
	tenant, rest, ok := cutString(key)
	if !ok || len(rest) < 8 {
		return "", time.Time{}, "", false
	}
	n := binary.BigEndian.Uint64(rest)
	id, rest, ok = cutString(rest[8:])
	if !ok || len(rest) != 0 {
		return "", time.Time{}, "", false
	}
	return tenant, time.Unix(0, int64(n)).UTC(), id, true
}

// DecodeTaskByCreateKey splits a TaskByCreateKey.
func DecodeTaskByCreateKey(key []byte) (tenant string, created time.Time, taskID string, ok bool) {
	tenant, rest, ok := cutString(key)
	if !ok || len(rest) < 8 {
		return "", time.Time{}, "", false
	}
	n := ^binary.BigEndian.Uint64(rest)
	taskID, rest, ok = cutString(rest[8:])
	if !ok || len(rest) != 0 {
		return "", time.Time{}, "", false
	}
	return tenant, time.Unix(0, int64(n)).UTC(), taskID, true
}

// DecodeSeq returns the number at the end of a SeqKey.
func DecodeSeq(key []byte) int64 {
	if len(key) < 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(key[len(key)-8:]))
}

// DecodeChildID returns the id at the end of a ChildKey with the given prefix.
func DecodeChildID(prefix, key []byte) (string, bool) {
	if !bytes.HasPrefix(key, prefix) {
		return "", false
	}
	id, rest, ok := cutString(key[len(prefix):])
	return id, ok && len(rest) == 0
}

// PrefixEnd is the smallest key greater than every key starting with prefix, or nil
// when there is none (prefix is all 0xff).
func PrefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func cutString(b []byte) (string, []byte, bool) {
	if len(b) < 1 || len(b) < 1+int(b[0]) {
		return "", nil, false
	}
	n := int(b[0])
	return string(b[1 : 1+n]), b[1+n:], true
}

// EncodeCount is the value form of a counter.
func EncodeCount(n int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }

// DecodeCount reads a counter value; a missing or malformed one is zero.
func DecodeCount(v []byte) int64 {
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}
