// Package pgstore is the PostgreSQL implementation of store.Store (docs/scaling.md).
//
// Every Update is one SERIALIZABLE transaction, retried from the start when PostgreSQL
// reports a serialization failure or deadlock, which the Update contract allows (fn may
// run more than once). Views are REPEATABLE READ READ ONLY snapshots. Values are the
// same agentplane.storage.v1 messages the bbolt store keeps; the key columns hold the
// byte keys of package schema, so scans and page cursors match the bbolt store's.
// The layout is created and upgraded by embedded SQL migrations under an advisory lock.
//
// Several control planes may share one database (store.Shared, notify.go): triggers
// NOTIFY at commit where a waiter should look (a task's events, a queue, an
// interrupt), and a listener connection per process turns that into store.Changes and
// is the store's health.
package pgstore
