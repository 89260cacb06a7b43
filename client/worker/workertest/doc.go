// Package workertest is an in-memory fake of the control plane's runtime protocol, for
// testing runtimes built on client/worker without a control plane: it serves
// RuntimeService, the TaskService calls a runtime makes (WatchTask over what runtimes
// reported, ListObligations), and just enough of the rest for load generators
// (StartTask queues a lease; ResolveInterrupt delivers a decision), on a loopback port.
//
// It models the protocol's contract, not the server's implementation: a queue of
// leases, fenced writes refused with lease.lost once a lease is lost or released,
// heartbeats that extend the lease and report cancellation, a gate answered by a test
// function, and decisions delivered on AwaitDecision when the test resolves an
// interrupt. Faults are injected by the test (failing polls and heartbeats, dropped
// decision streams). Every recorded call wakes WaitFor, so tests wait on conditions
// instead of sleeping.
package workertest
