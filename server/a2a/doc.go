// Package a2a is the control plane's A2A face (docs/a2a.md): every static agent as an
// A2A v1.0 agent under /a2a/AGENT_ID, with an agent card, the JSON-RPC binding (the
// 1.0 method names and the 0.3 ones, each in its version's JSON), the HTTP+JSON
// binding and server-sent-event streams; the default agent's card is at
// /.well-known/agent-card.json.
//
// Guarantees:
//   - An A2A task is an agentplane task, reached only through the public API in
//     process with the caller's credentials: authentication, roles, tenants and
//     per-principal limits are the API's, and another tenant's task is
//     TaskNotFound, like a missing one.
//   - A message's id is its idempotency key: a retried SendMessage starts nothing new.
//   - A call waiting for a person is working, never input-required.
//   - Stream events carry the task log's sequence as their SSE id; SubscribeToTask with
//     Last-Event-ID resumes after it without gaps or duplicates.
//   - Push notifications go through the webhook outbox (server/webhooks): written in
//     the transaction of the change, delivered at least once, signed.
//   - The cards advertise exactly what works; request bodies and open streams are
//     bounded.
package a2a
