// Package store is the durable state of the control plane: tasks and their event logs,
// the run queue and leases, interrupts, verdicts and the obligations ledger.
//
// Store is an interface so that a deployment can swap the embedded bbolt file
// (package boltstore) for a shared database behind stateless control-plane replicas.
// The contract every implementation keeps, and that package storetest checks:
//
//   - Every Update is one serializable transaction: all of its writes become durable
//     together (fsynced before Update returns nil) or none do. A crash at any instant
//     loses nothing acknowledged and leaves nothing half-written.
//   - Concurrent Updates may share a commit (group commit) but never see each other's
//     uncommitted writes unless they run after them in the same serial order, and a
//     failing Update does not fail the others.
//   - The indexes (listing, idempotency, run queue, lease deadlines, retention, the
//     interrupt inbox and deadlines) are derived by the store from the records it is
//     given, in the same transaction, so they can never disagree with the records.
//   - A task's event log is gap-free: the store refuses an append that does not
//     continue it.
//   - Every key starts with the tenant. A lookup in one tenant never returns another
//     tenant's data; a scan never crosses into another tenant's range.
//
// Values are agentplane.storage.v1 messages (server/store/proto, generated into
// server/store/gen; not part of the published API), never the public API messages
// themselves, so disk and wire can evolve apart.
//
// Errors: a missing record is an *apierr.Error with code NotFound and the resource's
// reason (TASK_NOT_FOUND, INTERRUPT_NOT_FOUND); a closed store is Unavailable; a store
// written by an older schema version is upgraded when opened, and one written by an
// unknown version fails to open with reason STORE_SCHEMA_MISMATCH.
// Anything else (I/O, corruption, a programming error such as an out-of-order event) is
// a plain error, which the API boundary reports as Internal.
package store
