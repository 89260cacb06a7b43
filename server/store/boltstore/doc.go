// Package boltstore is the embedded store.Store: one bbolt file, no server to run.
//
// Durability (default mode): every Update is one bbolt read-write transaction, and
// bbolt fsyncs the data and then the meta page before Commit returns, so an
// acknowledged Update survives a crash at any instant and an unacknowledged one leaves
// no trace (bbolt's copy-on-write pages and double meta page make a torn commit
// invisible). Nothing the store
// acknowledges lives only in memory: the run queue, leases and interrupt deadlines are
// indexes in the file.
//
// Group commit: bbolt allows one writer at a time and pays two fsyncs per commit, so
// committing each Update on its own caps throughput at one commit per fsync pair.
// Update therefore queues its function; whichever caller finds no commit in progress
// becomes the leader, takes everything queued (up to MaxBatch), runs the functions one
// after the other in one transaction, commits once, hands leadership to the next
// queued caller, and wakes the callers it carried once the batch is durable (see
// below). A lone caller commits at once in its own goroutine (no hand-off, so it is as
// fast as a plain db.Update). Under load a batch is what queued during the previous
// commit; and since n callers in a closed loop would otherwise settle into two halves
// that take turns, a leader that sees more Updates in flight than queued waits for
// them, briefly: until they have queued, or half the recent commit time, or MaxLinger,
// whichever comes first (and only while recent batches carried several callers). A
// function
// that fails without writing fails alone; one that fails after writing rolls the
// transaction back and the rest of the batch is rerun without it (like bbolt's Batch,
// but the failing function is not rerun).
//
// Write-ahead log mode (Options.WAL, off by default): bbolt's two fsyncs per commit
// (data pages, then the meta page) become one, and it leaves the commit path. A
// batch's mutations, as bbolt saw them at the bucket level (index and counter upkeep
// included), are written as one CRC32C-checksummed record to the log segment in wal/
// while its transaction is still open; then the transaction commits with NoSync (into
// the page cache) and leadership passes on. The old leader then fdatasyncs the
// segment (one fdatasync at a time, each covering every record written when it
// starts) while the next batch already runs; the batch's callers are acknowledged, and its OnCommit hooks run (in
// commit order, see durability), only once the fdatasync returned. A batch is in the
// file a moment before it is durable, so a View waits for the batches it may have
// seen to be durable before it returns (at most the fdatasync in flight): no caller
// or reader ever learns of a write a crash could take back. A failed fdatasync fails
// its batch's callers and puts the store in the failed state (recover.go): every call
// is refused until the store has recovered from the checkpoint and the log. Segments are filled with zeros ahead of their records (walChunk), so
// an append overwrites blocks the file already has and its fdatasync need not journal
// a new file size. The store file is therefore not trusted after an unclean
// shutdown (an OS crash may have persisted a meta page without its data pages).
// Durability comes from checkpoint.db, a consistent copy of the file taken from a read
// transaction (written to a temporary file, fsynced, renamed, directory fsynced), plus
// the log since: under the commit lock the open segment is synced, the read
// transaction begins and the log moves to a new segment, so the segments before it
// are exactly what the copy holds and are deleted once it is in place. Checkpoints
// run every CheckpointBytes of log (or an eighth of the store's size, if more), every
// CheckpointInterval if the log holds at least 1/64 of the store (a copy of a large
// store for a few writes is not worth it), at the
// first open in the mode (before any write), after a recovery, and at Close, which
// then syncs the file and writes a clean-shutdown marker.
// Open with the marker trusts the file and discards the log; without it, it copies the
// checkpoint over the file, replays every segment (a damaged record is skipped only as
// the last thing the log holds, followed by nothing but zeros, where a crash
// mid-append leaves it; anywhere else Open refuses with the offending file and
// offset), syncs, checkpoints and serves. Replay is idempotent (records hold values,
// not increments), so a crash during any of these steps is recovered by the next
// Open. A failed log write, or a commit that fails after its record was written,
// also puts the store in the failed state; a write that failed this way may be found
// after the recovery (if its record was synced), as with any write whose outcome the
// caller never learned. A wal.lock file guards the directory, since
// recovery rewrites the store file before bbolt locks it.
//
// Opening takes bbolt's file lock with a timeout, so a second process on the same file
// fails fast with a clear message instead of hanging, and checks the schema version.
package boltstore
