// Package boltstore is the embedded store.Store: one bbolt file, no server to run.
//
// Durability: every Update is one bbolt read-write transaction, and bbolt fsyncs the
// data and then the meta page before Commit returns, so an acknowledged Update survives
// a crash at any instant and an unacknowledged one leaves no trace (bbolt's copy-on-write
// pages and double meta page make a torn commit invisible). Nothing the store
// acknowledges lives only in memory: the run queue, leases and interrupt deadlines are
// indexes in the file.
//
// Group commit: bbolt allows one writer at a time and pays two fsyncs per commit, so
// committing each Update on its own caps throughput at one commit per fsync pair.
// Update therefore queues its function; whichever caller finds no commit in progress
// becomes the leader, takes everything queued (up to MaxBatch), runs the functions one
// after the other in one transaction, commits once, wakes the callers it carried and
// hands leadership to the next queued caller. A lone caller commits at once in its own
// goroutine (no hand-off, so it is as fast as a plain db.Update). Under load a batch is
// what queued during the previous commit; and since n callers in a closed loop would
// otherwise settle into two halves that take turns, a leader that sees more Updates in
// flight than queued waits for them, briefly: until they have queued, or half the
// recent commit time, or MaxLinger, whichever comes first. A function
// that fails without writing fails alone; one that fails after writing rolls the
// transaction back and the rest of the batch is rerun without it (like bbolt's Batch,
// but the failing function is not rerun).
//
// Opening takes bbolt's file lock with a timeout, so a second process on the same file
// fails fast with a clear message instead of hanging, and checks the schema version.
package boltstore
