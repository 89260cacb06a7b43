// Package webhooks sends a tenant's events (interrupt.created, interrupt.resolved,
// interrupt.expired, task.ended) to the endpoints the configuration gives it
// (notifications.webhooks), signed per the Standard Webhooks convention.
//
// Guarantees: a notification is written to the store's outbox in the same transaction
// as the change it reports (WrapWriter), so a crash can neither lose one for a change
// that committed nor invent one for a change that did not. The sender delivers each
// at least once: it claims due notifications in a transaction (on PostgreSQL with FOR
// UPDATE SKIP LOCKED, so every replica may run a sender and each attempt is made by
// one), posts them, and records the outcome; a claim left by a crash expires and the
// notification is attempted again. Failures are retried with exponential backoff and
// jitter up to the endpoint's max_attempts, then kept as dead letters that an operator
// lists and retries (AdminService). Receivers dedupe on the webhook-id header, which
// is the same on every attempt.
package webhooks
