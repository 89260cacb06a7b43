// Package budget counts the model usage runtimes report against the deployment's
// token and cost budgets (config budgets.rules, docs/budgets.md), warns once per
// period at a threshold, and refuses new tasks of a budget that is spent.
//
// Counting is exact: Charge runs inside the store transaction that logs the message
// carrying the usage (store.Writer.AddBudgetUsage), so a count is durable exactly
// when the message is, a crash loses neither or both, and replicas sharing one
// PostgreSQL database add one after the other. Periods are calendar days or months in
// UTC; a count rolls over to zero on the first usage of a new period, and a count of
// a past period reads as zero.
package budget
