package store

import "context"

// ChangeKind says what a Change is about.
type ChangeKind int

// Change kinds.
const (
	// ChangeAll: anything may have changed (notifications may have been missed while
	// the channel that carries them was down); every waiter should look again.
	ChangeAll ChangeKind = iota + 1
	// ChangeEvents: events were appended to task TaskID of Tenant.
	ChangeEvents
	// ChangeQueued: a task was queued (or queued again) in run queue Queue.
	ChangeQueued
	// ChangeDecided: interrupt InterruptID of Tenant stopped being pending (resolved,
	// or closed with its task).
	ChangeDecided
	// ChangeDeadline: a pending interrupt was given a deadline.
	ChangeDeadline
	// ChangeMessage: another process broadcast Data about task TaskID of Tenant
	// (Shared.Broadcast): something not stored, such as message deltas.
	ChangeMessage
)

// MaxBroadcast is the largest Data Shared.Broadcast carries.
const MaxBroadcast = 5000

// Change tells a process about a write another process committed to a store they
// share. It carries no record, only where to look: a waiter that receives one reads
// the store, so a change that is lost or repeated costs a delay or a read, never a
// record. (A ChangeMessage carries what was never stored.)
type Change struct {
	Kind               ChangeKind
	Tenant, TaskID     string
	Queue, InterruptID string
	// Data is what a ChangeMessage carries.
	Data []byte
}

// Shared is implemented by a store that several control-plane processes use at once
// (PostgreSQL). What one process keeps waiting in memory (watches, long polls,
// AwaitDecision, the deadline loop) learns through it of writes the others commit;
// this process's own commits reach its waiters through Writer.OnCommit and are not
// reported again.
type Shared interface {
	// OnChange adds f to the functions called for every change committed by another
	// process, and with ChangeAll whenever changes may have been missed. f runs on the
	// store's listener goroutine: it must be quick and must not block.
	OnChange(f func(Change))

	// Broadcast hands data (at most MaxBroadcast bytes) about a task to the other
	// processes as a ChangeMessage, at once and outside any transaction. Delivery is
	// best effort: a process that is not listening at that moment misses it.
	Broadcast(ctx context.Context, tenant, taskID string, data []byte) error
}
