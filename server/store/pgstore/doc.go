// Package pgstore is the PostgreSQL implementation of store.Store (docs/scaling.md).
//
// Concurrent Updates share READ COMMITTED transactions (group commit, commit.go) under
// row locks (see writer in write.go); a call whose own statement fails for a reason
// worth retrying runs again alone, which the Update contract allows (fn may run more
// than once). Views are REPEATABLE READ READ ONLY snapshots. Values are the same
// agentplane.storage.v1 messages the bbolt store keeps; the key columns hold the byte
// keys of package schema, so scans and page cursors match the bbolt store's. The layout
// is created and upgraded by embedded SQL migrations under an advisory lock.
//
// Several control planes may share one database (store.Shared, notify.go): each write
// transaction sends one NOTIFY, delivered at its commit, naming where a waiter should
// look (the tasks whose events grew, the queues, the interrupts), and a listener
// connection per process turns that into store.Changes and is the store's health.
package pgstore
