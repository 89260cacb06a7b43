// Package workertest is an in-memory fake of the control plane's runtime protocol, for
// testing runtimes built on client/worker without a control plane: it serves
// RuntimeService (ReadTaskHistory over what runtimes reported and the verdicts they
// recorded), and just enough of TaskService and HitlService for load generators
// (StartTask queues a lease, CancelTask drops a queued one; ResolveInterrupt delivers a
// decision), on a loopback port.
//
// It models the protocol's contract, not the server's implementation: a queue of
// leases granted only to runtimes serving their run queue, fenced writes refused with LEASE_LOST once a lease is lost or released,
// heartbeats that extend the lease and report cancellation, a gate answered by a test
// function, and decisions delivered on AwaitDecision when the test resolves an
// interrupt. Faults are injected by the test (failing polls and heartbeats, dropped
// decision streams). Every recorded call wakes WaitFor, so tests wait on conditions
// instead of sleeping.
package workertest
