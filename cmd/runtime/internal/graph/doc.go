// Package graph runs GraphSpec tasks (docs/vocabulary.md) on the agent package's single-node
// model loop (agent.Session): the entry supervisor runs first; every edge is a tool
// offered to the node it leaves (handoff__<to>, ask__<to>, evaluate__<to>); calling
// it runs the target node (or nested graph) to its answer, which comes back as the
// tool's result. Evaluators answer with the verdict tool the control plane grants
// them; the runtime records each verdict with RecordVerdict into the task's
// obligations ledger and hands it back to the producer, so a needs_revision answer
// loops until pass, bounded by per_agent_iterations.
//
// Limits are enforced from what the log records: steps are model calls, tokens are the
// usage recorded on every assistant message, wall-clock runs from the task's creation
// (a nested graph's from its dispatch). A budget that runs out fails the task with
// runtime.budget_exhausted; max_steps with runtime.max_steps unless the graph
// terminates on max_steps_reached.
//
// The log is the only state. Node invocations nest like calls: the events between an
// edge tool's call and its result are the target's. A resumed lease rebuilds that tree
// from the history and re-enters it: finished invocations are never run again, an
// edge call reported without a result resumes its target from its own events, and a
// verdict already recorded is read back rather than recorded twice.
package graph
