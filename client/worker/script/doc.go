// Package script is a scripted runtime: a worker.Handler that plays a fixed list of
// steps from a YAML file (messages, notes, tool calls through the gate, chat turn
// ends, verdicts, completion or failure) for every task it leases. ctl's
// `runtime run --script` is built on it; it serves demos, end-to-end tests, and
// runtime authors who want to read how the protocol is used. docs/runtime-script.md
// describes the format.
//
// A parsed script is checked whole before it runs: one kind per step, required
// fields, closed vocabularies, and a last step that ends the task; errors name the
// file, line and step.
//
// A task is leased again after a durable wait or a chat pause. The runner is
// stateless across leases: before it gives a lease up it writes a checkpoint note
// (attribute script.resume_at) to the task's log, and on a resumed lease it reads the
// history up to the lease's history cursor to find the last checkpoint. A resumed
// gated tool call finds its decision in the lease by its call id (step-N unless the
// script names it).
package script
