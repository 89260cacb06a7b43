// Package boltstore is the embedded store.Store: one bbolt file, no server to run.
//
// Update group-commits: queued Updates run in one transaction, committed once. A write
// is acknowledged, and its OnCommit hooks run (in commit order), only once it is
// durable: when bbolt's commit has fsynced it (Options.WAL false), or when the batch's
// record in the write-ahead log has been fdatasynced (Options.WAL true; bbolt then
// commits without fsync, and checkpoint.db plus the log are the store after a crash).
// A View never returns a write that is not yet durable.
//
// The design (commit path, checkpoints, recovery and the torn tail of the log, what
// each mode costs) is described in docs/store.md.
package boltstore
