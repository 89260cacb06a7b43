// Package approvals is the durable side of human-in-the-loop: interrupts stored with
// their task, decided by people or by deadlines, and delivered to runtimes.
//
// Every change is one transaction through the task domain (tasks.Op), so the
// interrupt, the task's state and the events that describe the change commit
// together or not at all, fenced by the runtime's lease where a runtime asks:
//
//   - CheckToolCall: the gate's answer (hitl.Gate) is logged and stored under an id
//     derived from the task and the call id: a gated call raises an interrupt and the
//     task waits in INPUT_REQUIRED; an answer given at once (ALLOW, or a rejection
//     when no one can approve) is stored resolved, and is not an interrupt anyone
//     lists, resolves or awaits. A retried check finds the first answer. The task
//     domain checks the runtime's report of the call against the stored decision.
//   - ResolveInterrupt: single-use decisions bound to the principal and the argument
//     digests; a second one is INTERRUPT_ALREADY_RESOLVED.
//   - AwaitDecision (interactive delivery): a registry of waiters is told after the
//     resolving commit, so a waiting runtime gets the decision without polling, and
//     after the commit that ends the task (tasks.Manager.OnTaskEnd), so it stops.
//   - SuspendTask (durable delivery): the lease is given up; the decision queues the
//     task again and the next lease carries it (Lease.resolved_interrupts).
//   - Deadlines: a loop (Start/Stop) applies the deployment default when a deadline
//     passes, and every read applies overdue deadlines first.
//   - ListInterrupts / GetInterrupt: the tenant's inbox, oldest first, paged with
//     sealed tokens; another tenant's interrupt is NOT_FOUND like an absent one.
//
// Everything a runtime or reviewer relies on is in the store, so pending interrupts
// survive a restart of the control plane and stay resolvable; only the waiter
// registry is in memory, and a runtime re-attaches to it by awaiting again.
package approvals
