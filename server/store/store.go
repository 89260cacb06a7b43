package store

import (
	"context"
	"io"
	"time"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

// Store is the durable store. All methods are safe for concurrent use.
type Store interface {
	// View runs fn in a read-only transaction over a consistent snapshot: fn sees every
	// Update that returned before View was called and nothing of one that had not begun
	// committing. Views run concurrently with each other and with Updates. fn must not
	// keep the Reader, nor anything it returned by reference, beyond its return; records
	// it returns are fresh copies that fn may keep and modify.
	View(ctx context.Context, fn func(Reader) error) error

	// Update runs fn in a read-write transaction. When Update returns nil, every write fn
	// made is durable (fsynced); when it returns an error, none of them happened. The
	// error is fn's own error, ctx's error if ctx ended before fn ran, or a commit
	// failure.
	//
	// Updates from concurrent callers are applied one after the other in some serial
	// order and may share one commit. Because of that:
	//   - fn may be run more than once (when a batch-mate fails after writing, the batch
	//     is retried without it), so fn must derive everything from the Writer and from
	//     values fixed before Update was called (ids, timestamps), and must have no side
	//     effect other than through the Writer; work that must follow a successful commit
	//     goes to Writer.OnCommit.
	//   - fn should check its preconditions before it writes: a fn that returns an error
	//     without having written costs nothing to the Updates it shares a commit with.
	// fn must not keep the Writer beyond its return.
	Update(ctx context.Context, fn func(Writer) error) error

	// Features says what this store is and which of its optional routes work. It is
	// fixed for the life of the store and costs nothing to call.
	Features() Features

	// Snapshot opens a consistent, point-in-time copy of the whole store for a hot
	// backup. It does not block writers. The caller must Close it. A store whose
	// Features say no HotBackup refuses with FailedPrecondition
	// (STORE_BACKUP_UNSUPPORTED).
	Snapshot(ctx context.Context) (Snapshot, error)

	// Stats reports sizes and counters, summed over tenants.
	Stats(ctx context.Context) (Stats, error)

	// TokenKey is a random secret created with the store, stable across restarts and
	// carried by backups, for sealing page tokens (package pagetoken).
	TokenKey() []byte

	// Close waits for running transactions and closes the store. Later calls fail with
	// Unavailable.
	Close() error
}

// Reader reads within a transaction. Scans call fn for each item in order until fn
// returns false or an error (which the scan returns). fn must not write through the
// same transaction while a scan is running; collect what to change and write after.
type Reader interface {
	// GetTask returns a task record, or NotFound (TASK_NOT_FOUND) when the tenant has no
	// such task.
	GetTask(tenant, taskID string) (*storagev1.TaskRecord, error)

	// GetTaskSpec returns what a task was started with, or NotFound (TASK_NOT_FOUND).
	GetTaskSpec(tenant, taskID string) (*storagev1.TaskSpecRecord, error)

	// GetTaskSpecPartial is GetTaskSpec without the resolved spec and, unless
	// withSubmitted, without the submitted inline spec (agent, graph; agent_id is
	// kept): what a client's view of the task shows. The fields left out are skipped
	// undecoded, so their size costs nothing.
	GetTaskSpecPartial(tenant, taskID string, withSubmitted bool) (*storagev1.TaskSpecRecord, error)

	// TaskForRequest returns the id of the task created under (tenant, request id), or
	// "" when there is none.
	TaskForRequest(tenant, requestID string) (string, error)

	// ScanTasks lists a tenant's tasks newest first (by creation time, then by id),
	// starting after r.After and restricted to r's creation-time range; rec is nil for a
	// task r's filters exclude that the store stepped over undecoded. The cursor given
	// to fn resumes the scan right after that task when passed back as r.After; a cursor
	// that does not belong to tenant is InvalidArgument (PAGE_TOKEN_INVALID).
	ScanTasks(tenant string, r TaskRange, fn func(cursor []byte, rec *storagev1.TaskRecord) (bool, error)) error

	// ScanEvents reads a task's log in sequence order from afterSeq+1.
	ScanEvents(tenant, taskID string, afterSeq int64, fn func(*storagev1.EventRecord) (bool, error)) error

	// Tenants lists the tenants that have at least one entry in idx, in key order,
	// starting after the tenant named after ("" from the first).
	Tenants(idx Index, after string, fn func(tenant string) (bool, error)) error

	// ScanIndex reads one tenant's entries of a time index, oldest first, starting after
	// r.After and stopping after the entries at r.Until (zero: no bound). The run queue
	// is read with ScanQueue instead.
	ScanIndex(idx Index, tenant string, r IndexRange, fn func(IndexEntry) (bool, error)) error

	// ScanQueue reads one run queue of a tenant (TaskRecord.queue, "" being
	// DefaultQueue), oldest queue_time first, starting after r.After and stopping after
	// the entries at r.Until (zero: no bound). It is a range scan of that queue alone.
	ScanQueue(tenant, queue string, r IndexRange, fn func(IndexEntry) (bool, error)) error

	// GetInterrupt returns an interrupt record, or NotFound (INTERRUPT_NOT_FOUND).
	GetInterrupt(tenant, interruptID string) (*storagev1.InterruptRecord, error)

	// ScanInterrupts reads a tenant's interrupts, pending or not, in id order (ids of
	// equal length; a shorter id sorts first), starting after the interrupt id after (""
	// from the first). The control plane's ids have one length and sort by creation
	// time. The inbox of pending ones is the IndexPendingInterrupts time index.
	ScanInterrupts(tenant, after string, fn func(*storagev1.InterruptRecord) (bool, error)) error

	// ScanTaskInterrupts reads every interrupt of a task (pending or not), in id order.
	ScanTaskInterrupts(tenant, taskID string, fn func(*storagev1.InterruptRecord) (bool, error)) error

	// ScanVerdicts reads a task's verdicts in event-sequence order, after afterSeq.
	ScanVerdicts(tenant, taskID string, afterSeq int64, fn func(*storagev1.VerdictRecord) (bool, error)) error

	// GetObligation returns one ledger entry by ordinal, or NotFound
	// (OBLIGATION_NOT_FOUND).
	GetObligation(tenant, taskID string, ordinal int64) (*storagev1.ObligationRecord, error)

	// ScanObligations reads a task's ledger in ordinal order, after afterOrdinal.
	ScanObligations(tenant, taskID string, afterOrdinal int64, fn func(*storagev1.ObligationRecord) (bool, error)) error

	// GetOutbox returns a notification of the outbox, or NotFound
	// (WEBHOOK_DELIVERY_NOT_FOUND).
	GetOutbox(id string) (*storagev1.OutboxRecord, error)

	// ScanOutbox reads the outbox's notifications in state, across tenants, in id order
	// (ids of equal length sort by creation time), starting after the id after (""
	// from the first).
	ScanOutbox(state storagev1.OutboxState, after string, fn func(*storagev1.OutboxRecord) (bool, error)) error

	// OutboxDepth counts a tenant's notifications in the outbox, pending and dead: what
	// the outbox's per-tenant bound is checked against.
	OutboxDepth(tenant string) (int64, error)

	// ScanAudit reads a tenant's approval audit log in id order (ids of equal length
	// sort by creation time: see AuditIDPrefix), starting after the id after ("" from
	// the first). Audit records are kept when their task is deleted.
	ScanAudit(tenant, after string, fn func(*storagev1.AuditRecordEntry) (bool, error)) error
	// GetFlow returns a tenant's flow-control record (a concurrency key's slots, a
	// token bucket) named name, or nil when there is none. A writer's read locks it
	// (on PostgreSQL, the row; one that does not exist yet is guarded by its key, so
	// that of two transactions creating it one runs again), so that replicas sharing
	// a store count one set of slots and one bucket.
	GetFlow(tenant, name string) (*storagev1.FlowRecord, error)
	// ScanFlows reads every flow-control record, across tenants, in the store's key
	// order (not the same in every store), until fn returns false or an error (a store
	// move copies them).
	ScanFlows(fn func(tenant, name string, rec *storagev1.FlowRecord) (bool, error)) error

	// GetLinkRevocation returns the revocation of a tenant's approval link id, or nil
	// when it is not revoked (or its record was dropped after the link expired).
	GetLinkRevocation(tenant, linkID string) (*storagev1.LinkRevocationRecord, error)
	// ScanLinkRevocations reads every link revocation, across tenants, by tenant and
	// link id, until fn returns false or an error (a store move copies them).
	ScanLinkRevocations(fn func(*storagev1.LinkRevocationRecord) (bool, error)) error

	// GetSchedule returns a schedule, or NotFound (SCHEDULE_NOT_FOUND) when the tenant
	// has none of that id. A Writer's GetSchedule locks the schedule (on PostgreSQL,
	// its row, FOR UPDATE) until the end of the transaction, waiting for another
	// transaction that holds it.
	GetSchedule(tenant, scheduleID string) (*storagev1.ScheduleRecord, error)

	// ScanSchedules reads a tenant's schedules in id order (ids of equal length; a
	// shorter id sorts first), starting after the id after ("" from the first).
	ScanSchedules(tenant, after string, fn func(*storagev1.ScheduleRecord) (bool, error)) error

	// ScanDueSchedules reads the schedules whose wake_time is at or before until,
	// across tenants, earliest first (then by tenant and id).
	ScanDueSchedules(until time.Time, fn func(ScheduleDue) (bool, error)) error

	// ScheduleTenants lists the tenants that have at least one schedule, in key order,
	// starting after the tenant named after ("" from the first).
	ScheduleTenants(after string, fn func(tenant string) (bool, error)) error

	// ScheduleCount counts a tenant's schedules: what schedules.max_per_tenant is
	// checked against.
	ScheduleCount(tenant string) (int64, error)

	// GetBudgetUsage returns what a budget has counted for tenant, or nil when it has
	// counted nothing (an invalid budget name is nothing). The record may be of an
	// earlier period than the current one: its reader decides what that means.
	GetBudgetUsage(tenant, budget string) (*storagev1.BudgetUsageRecord, error)

	// ScanBudgetUsage reads every budget count, across tenants, in an order of the
	// store's choosing (each tenant's together).
	ScanBudgetUsage(fn func(*storagev1.BudgetUsageRecord) (bool, error)) error
}

// ScheduleDue is one entry of the schedules' due index.
type ScheduleDue struct {
	Tenant, ScheduleID string
	// Wake is the record's wake_time.
	Wake time.Time
}

// Writer writes within a transaction. Writes are visible to later reads in the same
// transaction.
type Writer interface {
	Reader

	// PutTask creates or replaces a task record and brings every index derived from it up
	// to date: listing (create_time), idempotency (request_id), the run queue (queue,
	// queue_time) and its depth, lease deadlines (an active, unrevoked lease's
	// deadline), retention (end_time) and the per-state counters. tenant, task_id,
	// create_time, request_id and queue may not change once written. A request_id
	// already used by another task of the tenant is AlreadyExists
	// (TASK_REQUEST_ID_REUSED); a queue that is not a queue name is InvalidArgument.
	PutTask(rec *storagev1.TaskRecord) error

	// PutTaskSpec stores what an existing task was started with. It is written once: a
	// second PutTaskSpec for the same task is refused.
	PutTaskSpec(tenant, taskID string, spec *storagev1.TaskSpecRecord) error

	// AppendEvents appends events to an existing task's log. Their sequences must
	// continue the stored log without a gap (last stored + 1, + 2, ...); anything else
	// is refused, so the log stays gap-free whatever the caller does. The caller keeps
	// TaskRecord.last_sequence in step.
	AppendEvents(tenant, taskID string, events ...*storagev1.EventRecord) error

	// PutInterrupt creates or replaces an interrupt and brings its indexes up to date:
	// the tenant's pending inbox (state PENDING and not closed, by create_time), the
	// deadline index (pending with a deadline), the escalation index (pending with an
	// escalation step to run, EscalationDue) and the task's list. Its task must exist.
	PutInterrupt(rec *storagev1.InterruptRecord) error

	// PutVerdict stores a verdict under its task and verdict.sequence. Its task must exist.
	PutVerdict(tenant string, rec *storagev1.VerdictRecord) error

	// PutObligation creates or replaces a ledger entry under its task and ordinal (>= 1).
	// Its task must exist.
	PutObligation(tenant, taskID string, rec *storagev1.ObligationRecord) error

	// PutOutbox creates or replaces a notification of the outbox and brings its indexes
	// up to date: the due index (PENDING, by next_attempt_time), the dead letters
	// (DEAD) and the per-tenant depth. id, tenant, endpoint and create_time may not
	// change once written.
	PutOutbox(rec *storagev1.OutboxRecord) error

	// PutFlow creates or replaces a flow-control record (see GetFlow); name is 1 to
	// 255 bytes. A nil rec deletes it.
	PutFlow(tenant, name string, rec *storagev1.FlowRecord) error

	// PutLinkRevocation records the revocation of an approval link (tenant and link_id
	// of 1 to 255 bytes, an expire_time), replacing an earlier one, and drops up to
	// MaxLinkRevocationPrune of the tenant's revocations whose links expired before
	// rec's revoke_time: that keeps the records bounded by the links of one TTL.
	PutLinkRevocation(rec *storagev1.LinkRevocationRecord) error

	// DeleteOutbox removes a notification (delivered, or dropped); a missing one is
	// NotFound (WEBHOOK_DELIVERY_NOT_FOUND).
	DeleteOutbox(id string) error

	// ClaimOutbox returns up to limit PENDING notifications due at or before now,
	// earliest due first, for this transaction to claim by writing them back with a
	// later next_attempt_time. Concurrent transactions claim disjoint sets: on
	// PostgreSQL the rows are locked (FOR UPDATE SKIP LOCKED), so another replica skips
	// them rather than waiting; the bbolt store has one writer at a time.
	ClaimOutbox(now time.Time, limit int) ([]*storagev1.OutboxRecord, error)

	// PutAudit appends a record to its tenant's audit log under record.audit_id (at
	// most schema.MaxComponent bytes). The log is append-only: an id already written
	// is AlreadyExists.
	PutAudit(rec *storagev1.AuditRecordEntry) error

	// PutSchedule creates (revision 1) or replaces (a later revision) a schedule and
	// brings the due index (wake_time, when set) and the tenant's count up to date.
	// Creating one whose id the tenant has is AlreadyExists (SCHEDULE_ALREADY_EXISTS);
	// replacing a missing one is NotFound (SCHEDULE_NOT_FOUND). tenant, schedule_id
	// and create_time may not change.
	PutSchedule(rec *storagev1.ScheduleRecord) error

	// DeleteSchedule removes a schedule and its index entries; a missing one is
	// NotFound (SCHEDULE_NOT_FOUND).
	DeleteSchedule(tenant, scheduleID string) error

	// TryLockSchedule is GetSchedule for the scheduler: when another transaction holds
	// the schedule (PostgreSQL), it does not wait but returns (nil, nil), so that
	// replicas firing at once take different schedules. A missing schedule is NotFound.
	// The bbolt store has one writer at a time and never returns (nil, nil).
	TryLockSchedule(tenant, scheduleID string) (*storagev1.ScheduleRecord, error)

	// DeleteTask removes a task with everything it owns: its spec, events, interrupts, verdicts,
	// obligations and every index entry. A missing task is NotFound.
	DeleteTask(tenant, taskID string) (Deleted, error)

	// AddBudgetUsage adds d's tokens and cost to the count of budget d.budget for
	// tenant d.tenant, sets its warned flag when d.warned, stamps it with
	// d.update_time, and returns the count after the change (see MergeBudgetUsage for
	// how periods roll). The count is read and written under a lock held to the end of
	// the transaction (on PostgreSQL its row is locked; the bbolt store has one writer),
	// so concurrent transactions, on any replica, add one after the other and none is
	// lost. tenant and budget must be key components (1 to 255 bytes).
	AddBudgetUsage(d *storagev1.BudgetUsageRecord) (*storagev1.BudgetUsageRecord, error)

	// OnCommit registers f to run after the transaction is durable, in commit order
	// across transactions, before Update returns. f must be quick and must not block
	// (publish to a channel without waiting, signal a condition). It is dropped if the
	// transaction does not commit, and is not kept from an earlier run of a retried fn.
	OnCommit(f func())
}

// DefaultQueue is the run queue of a task started without one ("" in a TaskRecord
// means it too), and the only queue of a runtime that names none.
const DefaultQueue = schema.DefaultQueue

// QueueOf is the run queue of a task record.
func QueueOf(rec *storagev1.TaskRecord) string {
	if q := rec.GetQueue(); q != "" {
		return q
	}
	return DefaultQueue
}

// QueueOrder is the time a queued task is ordered by in its queue index: its fair
// time when its queue shares leases between keys, else its queue time, moved by its
// priority (schema.QueueOrder).
func QueueOrder(rec *storagev1.TaskRecord) time.Time {
	t := rec.GetQueueTime()
	if f := rec.GetFairTime(); f != nil {
		t = f
	}
	return schema.QueueOrder(t.AsTime(), rec.GetPriority())
}

// Index names a time index.
type Index int

// Time indexes, each ordered per tenant by a time, oldest first.
const (
	// IndexQueue is the run queue, by queue name then TaskRecord.queue_time; ids are
	// task ids. Tenants lists the tenants with a queued task; ScanQueue reads one queue.
	IndexQueue Index = iota + 1
	// IndexLeaseDeadlines holds active leases by deadline; ids are task ids.
	IndexLeaseDeadlines
	// IndexEnded holds terminal tasks by end_time; ids are task ids.
	IndexEnded
	// IndexPendingInterrupts is the inbox by InterruptRecord.create_time; ids are
	// interrupt ids.
	IndexPendingInterrupts
	// IndexInterruptDeadlines holds pending interrupts by deadline; ids are interrupt ids.
	IndexInterruptDeadlines
	// IndexInterruptEscalations holds pending interrupts under an approval rule by the
	// time of their next escalation step not yet run (EscalationDue); ids are interrupt
	// ids.
	IndexInterruptEscalations
)

// String names the index.
func (i Index) String() string {
	switch i {
	case IndexQueue:
		return "queue"
	case IndexLeaseDeadlines:
		return "lease_deadlines"
	case IndexEnded:
		return "ended"
	case IndexPendingInterrupts:
		return "pending_interrupts"
	case IndexInterruptDeadlines:
		return "interrupt_deadlines"
	case IndexInterruptEscalations:
		return "interrupt_escalations"
	}
	return "unknown"
}

// TaskRange bounds ScanTasks.
type TaskRange struct {
	// After is a cursor from an earlier scan; the scan resumes after it.
	After []byte
	// CreatedAfter keeps tasks created at or after it (zero: no bound).
	CreatedAfter time.Time
	// CreatedBefore keeps tasks created before it (zero: no bound).
	CreatedBefore time.Time
	// States, Labels and Queue are a listing's filters (a task in one of States,
	// carrying every label of Labels, of run queue Queue; empty: no filter), as a hint:
	// a store may step over a task they exclude without decoding it, calling fn with a
	// nil record (its cursor still resumes after it), or may ignore them and pass every
	// task. fn must filter what it gets itself. See TaskMayMatch.
	States []agentplanev1.TaskState
	Labels map[string]string
	Queue  string
}

// IndexRange bounds ScanIndex.
type IndexRange struct {
	// After is an IndexEntry.Cursor from an earlier scan; the scan resumes after it.
	After []byte
	// Until stops the scan after the entries at this time (zero: no bound).
	Until time.Time
}

// IndexEntry is one entry of a time index.
type IndexEntry struct {
	// At is the entry's time.
	At time.Time
	// ID is the task or interrupt id.
	ID string
	// Cursor resumes a scan after this entry.
	Cursor []byte
}

// Deleted counts what DeleteTask removed.
type Deleted struct {
	Events, Interrupts, Verdicts, Obligations int64
}

// Snapshot is a consistent copy of the store, open until Close.
type Snapshot interface {
	// Size is the number of bytes WriteTo writes.
	Size() int64
	// WriteTo writes the copy: for bbolt, a database file that Open accepts.
	WriteTo(w io.Writer) (int64, error)
	// Close releases the snapshot.
	Close() error
}

// Backend names of the implementations.
const (
	BackendBolt     = "bbolt"
	BackendPostgres = "postgres"
)

// Features is what a store is and supports: the answer the control plane's
// capabilities and stats give for the store, so that each says yes exactly when the
// route works on this store.
type Features struct {
	// Backend names the implementation: BackendBolt or BackendPostgres.
	Backend string
	// HotBackup is whether Snapshot works.
	HotBackup bool
	// WriteAheadLog is whether the store keeps a write-ahead log: Stats' LogBytes,
	// Checkpoints and CheckpointTime are its figures (zero without one).
	WriteAheadLog bool
}

// Stats describes the store.
type Stats struct {
	// Path is where the data lives (a file for bbolt).
	Path string
	// SizeBytes is the size of the data on disk.
	SizeBytes int64
	// SchemaVersion is the layout version in use.
	SchemaVersion int
	// TasksByState counts tasks per state.
	TasksByState map[agentplanev1.TaskState]int64
	// Events counts stored events.
	Events int64
	// PendingInterrupts counts interrupts in the inbox.
	PendingInterrupts int64
	// QueueDepth counts the tasks waiting in each run queue, by queue name; a queue
	// with none is absent.
	QueueDepth map[string]int64
	// ActiveLeases counts leases that fence writes.
	ActiveLeases int64
	// OutboxPending and OutboxDead count the notifications waiting for delivery and
	// the dead letters; OutboxOldestPending is the creation time of the oldest pending
	// one (zero when there is none).
	OutboxPending, OutboxDead int64
	OutboxOldestPending       time.Time
	// Commits counts transactions committed since open; Updates counts the Update calls
	// they carried (Updates/Commits is the mean group-commit batch).
	Commits, Updates int64
	// LogBytes is what the write-ahead log holds since the last checkpoint;
	// Checkpoints counts checkpoints since open and CheckpointTime their total
	// duration. Zero for a backend or mode without a log.
	LogBytes, Checkpoints int64
	CheckpointTime        time.Duration
}
