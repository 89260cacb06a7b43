// Package worker is the Go runtime SDK of agentplane: the loop a runtime process runs
// to take tasks from the control plane and hand them to its own code.
//
// A Worker long-polls RuntimeService.LeaseTasks for up to Options.Capacity tasks at a
// time, from the run queues in Options.Queues (only the default queue when none), and
// runs each leased task in its own goroutine, calling Handler.Run with a
// *Task. Before the handler runs, the worker heartbeats once: that acknowledges the
// lease, and the control plane counts an attempt only for an acknowledged lease (one
// whose LeaseTasks response was lost costs the task nothing). While the handler runs,
// the worker heartbeats the lease in the background, at a fraction of the time left
// before the lease deadline. The task's context is
// canceled when
//
//   - a heartbeat says the task was canceled (context.Cause is ErrCanceled),
//   - the lease is lost: a write or heartbeat is refused with reason LEASE_LOST, or no
//     heartbeat succeeded before the deadline (ErrLeaseLost), or
//   - the worker is stopping and its drain deadline passed (ErrStopping).
//
// The Task's methods are fenced: every write names the lease it was granted under, so
// the control plane refuses them once another runtime holds the task. Task.History
// reads the task's log under the lease (RuntimeService.ReadTaskHistory), for a handler
// that rebuilds its state on a resumed lease.
//
// # The handler contract
//
// A handler ends its task with exactly one of Complete, Fail, Pause (chat turn end)
// or Suspend (durable wait; ToolCall does it and returns ErrSuspended). Then:
//
//   - Returning an error without ending the task fails it: FailTask with the reason
//     and retry flag of a *Failure in the chain, or reason "runtime.error" and
//     Options.RetryOnError otherwise. A panic is treated the same way.
//   - Returning nil without ending the task writes nothing. The worker stops
//     heartbeating, so the lease expires and the control plane queues the task again
//     (counting an attempt, since the lease was acknowledged). This is almost always a handler bug and is logged.
//   - After cancellation or a lost lease the worker writes nothing: the task is no
//     longer this runtime's to end.
//   - When the worker stops (Stop, RunUntilSignal) and a task is still running past
//     the drain deadline (Options.DrainTimeout, 20s unless set, or Stop's context), the
//     worker cancels it and hands it back, so another runtime can take it without
//     waiting for the lease to expire: a task stopped while it waited for a decision
//     (AwaitDecision) is suspended (SuspendTask: it waits for the decision without a
//     lease and without counting an attempt), any other is returned to the queue with
//     FailTask(retry=true).
//
// # Replay and steps
//
// Every lease runs the handler from the start: after a durable wait, a pause, a
// hand-back or a crash. Tool calls are safe to replay through the gate (below). For the
// rest of what a handler does before it may lose its lease (a message, a call to
// another system), Step runs a function once per task and records its result in the
// task's log; a later lease gets the recorded result back instead of running it
// again.
//
// # Gated tool calls
//
// Task.ToolCall asks CheckToolCall before a tool runs. On an interrupt it either waits
// for the decision on AwaitDecision while heartbeats keep the lease (Interactive), or
// gives the lease up with SuspendTask and returns ErrSuspended (Durable). In durable
// mode the next lease of the task carries the decision in Lease.resolved_interrupts;
// calling ToolCall again with the same call id returns that decision without asking
// the gate again, so a handler that replays its work from the start resumes where it
// stopped. The worker never runs a tool itself: when the call is allowed, the Gate
// holds the exact arguments to run with (approved or edited by a reviewer).
//
// # Transport errors
//
// LeaseTasks, Heartbeat and AwaitDecision are retried with exponential backoff on
// transient errors (IsTransient): an agentplane error that carries a RetryInfo (its
// reason is declared retryable: SERVER_UNAVAILABLE, STORE_UNAVAILABLE,
// LIMIT_CONCURRENCY, DEADLINE_EXCEEDED), or a transport error without an agentplane
// ErrorInfo (UNAVAILABLE and the like). The Task's calls (ReportEvents, CheckToolCall,
// Complete, ...) are made again with the same backoff when they fail with UNAVAILABLE,
// DEADLINE_EXCEEDED or a retryable reason (STORE_UNAVAILABLE while the database
// restarts), for as long as the lease can still be renewed: until its deadline, which
// the heartbeats move while they get through. Each write carries a request id chosen
// once, so the control plane answers a repeat from the first call instead of applying
// it twice (CheckToolCall is idempotent per call id). A call still failing at the
// deadline stops the task (ErrLeaseLost): the worker writes nothing more and the
// control plane queues the task again when the lease expires, so an outage fails no
// task. Other errors go to the handler. Any other LeaseTasks error (UNAUTHENTICATED, PERMISSION_DENIED,
// INVALID_ARGUMENT, LIMIT_EXCEEDED, internal) stops the worker: Run drains the running
// tasks and returns it.
package worker
