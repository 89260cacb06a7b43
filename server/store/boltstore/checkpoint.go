package boltstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Files of the write-ahead log mode, in the store file's directory.
const (
	walDirName      = "wal"
	checkpointName  = "checkpoint.db"
	cleanMarkerName = "clean-shutdown"
	walLockName     = "wal.lock"
	walRemovedName  = "wal.removed"
)

// walState is the write-ahead log mode's part of a Store; nil when the mode is off.
type walState struct {
	dir   string // the store file's directory
	log   wal
	every time.Duration
	bytes int64
	batch walBatch
	lock  *os.File
	// recovered says the store file was rebuilt from the checkpoint (an unclean
	// shutdown); the log's segments are then still needed, on top of the checkpoint.
	recovered  bool
	checkpoint sync.Mutex // one checkpoint at a time
	kick       chan struct{}
	stop       chan struct{}
	done       chan struct{}
	stopOnce   sync.Once
	// failed is set (under Store.commitMu) when an append or the commit after it
	// fails: the log's tail and the file may then disagree, so the store refuses
	// further writes. A failed fdatasync is durability.err.
	failed error
	// fileMu is held by an fdatasync of the open segment (one at a time) and by a
	// checkpoint starting a new segment.
	fileMu sync.Mutex
	// logged is where the complete records of the open segment end (stored after each
	// append, under commitMu); synced is where those an fdatasync confirmed end (under
	// fileMu). A failed store cuts the segment at synced before it recovers.
	logged atomic.Int64
	synced int64
	// checkpoints and checkpointNanos count the checkpoints since open and the time
	// they took, for Stats.
	checkpoints, checkpointNanos atomic.Int64
	// beforeSync, set by tests only, runs before each fdatasync of the log and may
	// fail it.
	beforeSync func() error
}

func (ws *walState) path(name string) string { return filepath.Join(ws.dir, name) }

func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// prepareWAL runs before bbolt opens the file. If a log exists and the last shutdown
// was not clean, the store file is not trusted: it is replaced by the checkpoint, and
// replay (after the open) brings it forward. It returns the lock (nil if neither the
// mode nor a log is present) and the segments still to replay.
func prepareWAL(path string, opts Options) (ws *walState, replay []uint64, err error) {
	dir := filepath.Dir(path)
	ws = &walState{dir: dir, log: wal{dir: filepath.Join(dir, walDirName)}}
	haveLog, err := exists(ws.log.dir)
	if err != nil || (!haveLog && !opts.WAL) {
		return nil, nil, err
	}
	if ws.lock, err = lockFile(ws.path(walLockName), path, opts.OpenTimeout); err != nil {
		return nil, nil, err
	}
	lock := ws.lock // the returns below that fail set ws to nil
	defer func() {
		if err != nil {
			_ = lock.Close()
		}
	}()
	// What a crash left of switching the log off (see removeLog): never read again.
	if err := os.RemoveAll(ws.path(walRemovedName)); err != nil {
		return nil, nil, err
	}
	if !haveLog {
		return ws, nil, nil
	}
	clean, err := exists(ws.path(cleanMarkerName))
	if err != nil || clean {
		return ws, nil, err
	}
	ckpt, err := os.Open(ws.path(checkpointName))
	if err != nil {
		return nil, nil, fmt.Errorf("store %s: write-ahead log present after an unclean shutdown but no checkpoint to replay it on: %w", path, err)
	}
	defer ckpt.Close()
	if err := copyFile(path, ckpt); err != nil {
		return nil, nil, fmt.Errorf("store %s: restoring checkpoint: %w", path, err)
	}
	if replay, err = listSegments(ws.log.dir); err != nil {
		return nil, nil, err
	}
	ws.recovered = true
	return ws, replay, nil
}

// startWAL runs after bbolt opened (and the schema check): it replays what prepareWAL
// found, then either switches the log off for good (opts.WAL false: the file is synced
// and the log's files removed) or starts a new segment and turns bbolt's fsyncs off.
func (s *Store) startWAL(ws *walState, replay []uint64, opts Options) error {
	replayed, end, err := replayLog(s.db, ws.log.dir, replay)
	if err != nil {
		return fmt.Errorf("store %s: replaying write-ahead log: %w", s.path, err)
	}
	if err := s.db.Sync(); err != nil {
		return err
	}
	if end != nil && end.size > end.off {
		if err := end.truncate(); err != nil {
			return fmt.Errorf("store %s: truncating the write-ahead log after its last record: %w", s.path, err)
		}
		if end.torn {
			s.log.Warn("store: the write-ahead log ended in a torn append (writes never acknowledged); truncated it there",
				"segment", end.path, "offset", end.off, "bytes_dropped", end.size-end.off)
		}
	}
	upgraded, err := s.upgrade()
	if err != nil {
		return err
	}
	if upgraded {
		// The upgrade wrote outside the log: a new checkpoint must hold it, and with it
		// whatever was just replayed, so the replayed segments are not kept.
		ws.recovered = false
	}
	if !opts.WAL {
		if err := ws.removeLog(); err != nil {
			return fmt.Errorf("store %s: removing the write-ahead log: %w", s.path, err)
		}
		return ws.lock.Close()
	}
	marker := ws.path(cleanMarkerName)
	clean, err := exists(marker)
	if err != nil {
		return err
	}
	haveCheckpoint, err := exists(ws.path(checkpointName))
	if err != nil {
		return err
	}
	// A clean shutdown's checkpoint is the store as it is. A recovery's is the store
	// before the segments just replayed, which are kept for the next checkpoint to fold
	// in, so that recovering costs one copy of the store (the checkpoint into place), not
	// two. Any other start (the first in the mode) needs a checkpoint before the log
	// starts, since the file is trusted no more from here on; so does a start that upgraded
	// the schema.
	if upgraded || (!ws.recovered && !(clean && haveCheckpoint)) {
		if err := s.db.View(ws.writeCheckpoint); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(ws.log.dir, 0o700); err != nil {
		return err
	}
	if err := syncDir(ws.dir); err != nil {
		return err
	}
	seqs, err := listSegments(ws.log.dir)
	if err != nil {
		return err
	}
	next := uint64(1)
	switch {
	case ws.recovered && end != nil:
		// The segments after the last one with records hold nothing: drop them.
		next = end.seq + 1
	case ws.recovered:
		next = 1
	case len(seqs) > 0:
		next = seqs[len(seqs)-1] + 1
	}
	if ws.recovered {
		for _, n := range seqs {
			if n >= next {
				if err := fsRemove(filepath.Join(ws.log.dir, segmentName(n))); err != nil {
					return err
				}
			}
		}
		ws.log.size = replayed
	}
	if err := ws.log.openSegment(next); err != nil {
		return err
	}
	if !ws.recovered {
		if err := ws.log.removeBefore(next); err != nil {
			return err
		}
	}
	if err := fsRemove(marker); ignoreMissing(err) != nil {
		return err
	}
	if err := syncDir(ws.dir); err != nil {
		return err
	}
	ws.every, ws.bytes = opts.CheckpointInterval, opts.CheckpointBytes
	ws.kick, ws.stop, ws.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	s.db.NoSync = true
	s.wal = ws
	go s.checkpointLoop()
	return nil
}

// removeLog switches the log mode off for good, once the store file holds everything
// and is synced. The order is what a crash at any point needs: first the marker
// (durably: with the log gone, no later Open would remove it, and a marker says the
// checkpoint is the store, which stops being true as soon as the store is written
// without the log), then the whole log at once (renamed away: part of it replayed onto
// the checkpoint would lose writes; without the marker, the whole log replayed onto
// it rebuilds the store), then the checkpoint (a checkpoint without a log is ignored
// and replaced when the mode is next turned on).
func (ws *walState) removeLog() error {
	if err := fsRemove(ws.path(cleanMarkerName)); ignoreMissing(err) != nil {
		return err
	} else if err == nil {
		if err := syncDir(ws.dir); err != nil {
			return err
		}
	}
	removed := ws.path(walRemovedName)
	if err := fsRename(ws.log.dir, removed); err != nil {
		return err
	}
	if err := syncDir(ws.dir); err != nil {
		return err
	}
	if err := fsRemove(ws.path(checkpointName)); ignoreMissing(err) != nil {
		return err
	}
	if err := fsRemoveAll(removed); err != nil {
		return err
	}
	return syncDir(ws.dir)
}

func ignoreMissing(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// writeCheckpoint copies the database as tx sees it to checkpoint.db, atomically.
func (ws *walState) writeCheckpoint(tx *bolt.Tx) error {
	pr, pw := io.Pipe()
	go func() {
		_, err := tx.WriteTo(pw)
		pw.CloseWithError(err)
	}()
	err := copyFile(ws.path(checkpointName), pr)
	_ = pr.CloseWithError(io.ErrClosedPipe) // unblocks WriteTo if the copy failed
	if err != nil {
		return fmt.Errorf("store: writing checkpoint: %w", err)
	}
	return nil
}

// checkpoint copies the database to checkpoint.db and deletes the log segments it
// covers. The read transaction begins and the log moves to a new segment under
// commitMu, so the old segments hold exactly the batches the copy contains.
func (s *Store) checkpoint() error {
	ws := s.wal
	ws.checkpoint.Lock()
	defer ws.checkpoint.Unlock()
	s.commitMu.Lock()
	if err := ws.failedErr(s.dur); err != nil {
		s.commitMu.Unlock()
		return err
	}
	// Everything the copy holds must be durable in the segments it replaces (batches
	// whose leaders have not synced yet are in the open one).
	if err := s.syncTo(s.dur.written.Load()); err != nil {
		s.commitMu.Unlock()
		return err
	}
	tx, err := s.db.Begin(false)
	if err != nil {
		s.commitMu.Unlock()
		return err
	}
	defer func() { _ = tx.Rollback() }()
	next := ws.log.seq + 1
	ws.fileMu.Lock()
	err = ws.log.openSegment(next)
	if err == nil {
		ws.logged.Store(0)
		ws.synced = 0
	}
	ws.fileMu.Unlock()
	if err == nil {
		ws.log.size = 0
	}
	s.commitMu.Unlock()
	if err != nil {
		return fmt.Errorf("store: starting a log segment: %w", err)
	}
	start := time.Now()
	if err := ws.writeCheckpoint(tx); err != nil {
		return err
	}
	if err := ws.log.removeBefore(next); err != nil {
		return err
	}
	ws.checkpoints.Add(1)
	ws.checkpointNanos.Add(int64(time.Since(start)))
	return nil
}

// stopCheckpoints stops checkpointLoop and waits for it to end; idempotent.
func (ws *walState) stopCheckpoints() {
	ws.stopOnce.Do(func() { close(ws.stop) })
	<-ws.done
}

// checkpointLoop checkpoints every CheckpointInterval, or sooner when the log has
// grown by CheckpointBytes, until stop.
func (s *Store) checkpointLoop() {
	ws := s.wal
	defer close(ws.done)
	t := time.NewTicker(ws.every)
	defer t.Stop()
	for {
		select {
		case <-ws.stop:
			return
		case <-t.C:
			if !s.worthCheckpoint() {
				continue
			}
		case <-ws.kick:
		}
		if err := s.checkpoint(); err != nil {
			s.log.Error("store: checkpoint failed; the log keeps growing until one succeeds", "err", err)
		}
	}
}

// worthCheckpoint says whether the periodic checkpoint should run: a checkpoint
// copies the whole store, so a log much smaller than the store waits for more
// writes (or for CheckpointBytes) instead of costing a full copy every interval.
func (s *Store) worthCheckpoint() bool {
	s.commitMu.Lock()
	logged := s.wal.log.size
	s.commitMu.Unlock()
	if logged == 0 {
		return false
	}
	var size int64
	if err := s.db.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil }); err != nil {
		return true
	}
	return logged*checkpointRatio >= size
}

// checkpointRatio: the periodic checkpoint runs once the log holds at least
// 1/checkpointRatio of the store's size.
const checkpointRatio = 64

// checkpointShare: the size-driven checkpoint waits for at least 1/checkpointShare of
// the store's size in the log (see walState.append).
const checkpointShare = 8

// closeWAL stops the checkpoints and, unless an append failed, leaves a clean store:
// a final checkpoint, the file synced, then the marker that lets the next Open trust
// the file as is.
func (s *Store) closeWAL() error {
	ws := s.wal
	ws.stopCheckpoints()
	var err error
	if ws.failedErr(s.dur) == nil && s.failedErr() == nil {
		err = s.checkpoint()
		if err == nil {
			err = s.db.Sync()
		}
		if err == nil {
			var f *os.File
			if f, err = os.Create(ws.path(cleanMarkerName)); err == nil {
				err = errors.Join(f.Sync(), f.Close(), syncDir(ws.dir))
			}
		}
	}
	return errors.Join(err, ws.log.close())
}

// append writes the current batch's record to the log (caller holds commitMu), before
// its transaction commits; Store.syncTo makes it durable. A failed append may leave part
// of a record at the tail of the log, after which nothing may be appended, so from
// then on the store is failed (see Health) until it recovers from the log; the batch
// itself is rolled back and its callers get the error. A checkpoint is asked for once
// the log holds CheckpointBytes, or an eighth of the store (storeSize) if that is more:
// a checkpoint copies the whole store, so on a large store this bounds the copying to
// about eight bytes per byte of log, at the price of a longer replay after a crash.
func (ws *walState) append(storeSize int64) error {
	if err := ws.log.append(ws.batch.record()); err != nil {
		return ws.fail(fmt.Errorf("appending to the write-ahead log failed: %w", err))
	}
	ws.logged.Store(ws.log.off)
	if ws.log.size >= max(ws.bytes, storeSize/checkpointShare) {
		select {
		case ws.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// syncLocked makes every record written so far durable (caller holds fileMu).
func (ws *walState) syncLocked() error {
	if ws.beforeSync != nil {
		if err := ws.beforeSync(); err != nil {
			return err
		}
	}
	return fdatasync(ws.log.f)
}

// failedErr returns why writes are refused, if they are: a failed append or commit,
// or a failed fdatasync.
func (ws *walState) failedErr(d *durability) error {
	if ws.failed != nil {
		return ws.failed
	}
	return d.failed()
}

// fail records why the log refuses writes (caller holds commitMu): the store is failed
// (see Health) until it recovers, and Close leaves no clean-shutdown marker, so the
// next Open recovers from the checkpoint and the log.
func (ws *walState) fail(err error) error {
	if ws.failed == nil {
		ws.failed = fmt.Errorf("store: %w", err)
	}
	return ws.failed
}
