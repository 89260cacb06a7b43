// Package tasks is the task lifecycle and the runtime lease protocol, over a
// store.Store.
//
// A task moves SUBMITTED -> WORKING -> (INPUT_REQUIRED -> (SUBMITTED | WORKING))* ->
// COMPLETED | FAILED | CANCELED. It is WORKING exactly while a runtime holds a lease
// on it and SUBMITTED while it waits in its queue (new, continued, resumed or
// requeued after a lost lease). Every change is one store transaction that rewrites the task
// record and appends the events that describe the change, so the event log is the
// task's history and can be replayed exactly (Watch).
//
// Guarantees:
//
//   - One API call that writes is one transaction; when a method returns nil its
//     effect is durable, and when it returns an error nothing of it happened. Nothing
//     acknowledged lives only in memory: the run queue, leases and their deadlines are
//     store indexes, so a restart (or a crash at any instant) resumes exactly where
//     the last acknowledged call left off. Leases granted before a restart stay valid
//     until their deadline, so runtimes carry on across a control-plane restart.
//   - Event sequences are gap-free per task. Watch replays from the store and then
//     follows live, with no gap and no repeat, and ends after the terminal event. A
//     slow watcher never blocks writers or other watchers, nor does a fan-out that falls
//     behind the writers: a watcher holds at most Config.MaxWatchBuffer events, the
//     fan-out queue a bounded number, and a watcher whose events did not fit falls back
//     to reading the store from the last event it sent.
//   - Start is idempotent per tenant on the caller's request id.
//   - Another tenant's task is NOT_FOUND, exactly like a missing one.
//   - Runtime writes are fenced by lease id and epoch: a stale, expired or revoked
//     lease is FAILED_PRECONDITION with reason LEASE_LOST, and changes nothing (an
//     expired lease is returned to the queue in that same transaction).
//   - A runtime runs only what was decided: a reported tool call (ReportEvents) needs
//     the decision the gate recorded for its call id (an ALLOW, or a person's approve
//     or edit), with the same tool and arguments of the same canonical-JSON digest,
//     and spends it: a call never checked, pending, rejected, changed or reported
//     twice is FAILED_PRECONDITION (TOOL_CALL_NOT_APPROVED) and refuses the report.
//     InterruptRecord.consumed_epoch is the lease epoch that spent the decision.
//   - Delivery to runtimes is at least once: a lease that expires (runtime gone) returns
//     the task to the queue; after Config.MaxAttempts lost or retried leases in a row
//     the task fails with reason lease.attempts_exhausted.
//
// The spec a runtime runs is resolved once, at Start (StartParams.Resolved), and
// stored with the task, so a running task is unaffected by later changes to the
// deployment's static agent table and a lease needs no spec lookup.
//
// Op, Manager.UpdateTask and Manager.UpdateLeased are the extension points for the
// human-in-the-loop and verdict flows: they give one task, inside one transaction,
// with event appends, limits, state transitions and the lease fence already handled.
// OnTaskEnd tells them, after the commit, that a task ended and how its pending
// interrupts were resolved (this package imports none of them).
package tasks
