// Package verdicts holds reviewers' verdicts and the obligations ledger kept per task.
//
// An evaluator node decides by calling the verdict tool the control plane grants it,
// not in prose. Check validates a verdict (the closed verdict set, confidence in
// [0, 1] under rule D11-R12, a rationale unless the verdict is pass, resolutions that
// say how, withdrawals that say why). Apply applies it to the task's ledger: raised
// obligations get server-assigned ids (O1, O2, ... per task); a resolution naming an
// id that is not open is dropped and named back with the open ids, and the rest of
// the verdict still counts. Apply is pure: it never modifies the ledger it is given,
// so the caller can persist the outcome in one transaction or not at all.
//
// Recorder is the durable side: RecordVerdict under the runtime's lease, storing the
// verdict, the ledger entries and the VerdictRecorded event in one transaction through
// the task domain (which also lists verdicts and obligations).
package verdicts
