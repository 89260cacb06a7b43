package boltstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/agentplane/agentplane/server/apierr"
)

// The failed state. A write the disk refused (no space, an I/O error) or a failed
// fdatasync leaves the store unsure of what is durable: after a failed fdatasync the
// kernel may have dropped the dirty pages, or kept them marked clean, so neither the
// page cache nor a later successful fdatasync says what the disk holds (the
// "fsyncgate" semantics of Linux). From the first such failure on the store refuses
// every call with UNAVAILABLE (STORE_UNAVAILABLE), reads included (they could see a
// batch that is not durable); Health reports the failure, and Options.OnHealth hears
// of it.
//
// A failed store recovers by itself: it waits (Options.RecoverInterval, doubling),
// probes the disk with a small write and fdatasync in its directory, and once that
// succeeds it closes the file and reopens it the way Open does after a crash, so that
// what it serves is rebuilt from what is known to be on disk:
//   - In the write-ahead log mode it first cuts the open log segment at the end of the
//     last record an fdatasync confirmed (Close of a failed store does the same): the
//     records after it were never acknowledged (their callers got an error), and
//     nothing written after the failure is trusted. What remains was confirmed on disk:
//     the checkpoint (fsynced before its rename), the earlier segments (each synced in
//     full before the next began) and that prefix. It then copies the checkpoint over
//     the file, replays the log, writes a new checkpoint and starts a new segment, as
//     Open does; that needs about the store's size free.
//   - In the default mode it reopens the file. bbolt fsyncs a commit's pages before
//     it writes the meta page that makes them reachable, so whichever meta page the
//     reopened file finds valid (the failed commit's, if the kernel kept it, or the one
//     before) points at pages that are on disk.
//
// A recovery that fails (the disk is still full) leaves the store failed, its file
// closed if it got that far, and is tried again later. The recovery takes the store
// exclusively once the operations in flight have finished (a failed store admits no
// new ones); an open snapshot (a backup being streamed) delays it until it is closed.
//
// The one write that met the failure may be found after the recovery (its log record
// was synced before its commit failed, or the kernel kept its meta page), like any
// write whose outcome its caller never learned.

// failure is a Store's failed state.
type failure struct {
	mu sync.Mutex
	// err is the refusal every call gets while the store is failed; nil when healthy.
	err error
	// stop is closed by Close to end the recovery loop; done is closed when it ends.
	stop, done chan struct{}
	closing    bool
	// beforeProbe, set by tests only (before the store fails), runs first in each
	// probe and may fail it.
	beforeProbe func() error
}

func (f *failure) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// stopRecovery ends the recovery loop, if one runs, and keeps another from starting.
func (f *failure) stopRecovery() {
	f.mu.Lock()
	f.closing = true
	stop, done := f.stop, f.done
	f.stop = nil
	f.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// unavailable is what callers of a failed store get: the cause stays in the logs.
func unavailable(cause error) error {
	return apierr.Wrap(cause, codes.Unavailable, apierr.ReasonStoreUnavailable,
		"the store could not write to its disk (no space left, or an I/O error) and refuses calls until it has recovered; retry with backoff")
}

// Health returns nil while the store accepts writes, and otherwise the UNAVAILABLE
// (STORE_UNAVAILABLE) error calls get: from a failed write or sync until the store
// has recovered (see the failed state above).
func (s *Store) Health() error { return s.failure.get() }

// fail puts the store in the failed state, if it is not already, and returns the
// refusal to give the callers; it starts the recovery loop.
func (s *Store) fail(cause error) error {
	f := &s.failure
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.err = unavailable(cause)
	s.log.Error("store: a write or sync failed; refusing calls until the store recovers", "err", cause)
	if s.opts.OnHealth != nil {
		s.opts.OnHealth(f.err)
	}
	if s.opts.RecoverInterval > 0 && !f.closing && f.stop == nil {
		f.stop, f.done = make(chan struct{}), make(chan struct{})
		go s.recoverLoop(f.stop, f.done)
	}
	return f.err
}

// failedErr returns the refusal while the store is failed.
func (s *Store) failedErr() error { return s.failure.get() }

// recoverLoop tries to recover until it succeeds or stop is closed.
func (s *Store) recoverLoop(stop, done chan struct{}) {
	defer close(done)
	wait := s.opts.RecoverInterval
	for attempt := 1; ; attempt++ {
		t := time.NewTimer(wait)
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, 16*s.opts.RecoverInterval)
		if err := s.probe(); err != nil {
			s.log.Warn("store: still failed: the disk refuses a probe write", "attempt", attempt, "err", err)
			continue
		}
		if err := s.recoverNow(stop); errors.Is(err, errRecoveryStopped) {
			return
		} else if err != nil {
			s.log.Warn("store: recovery failed; will retry", "attempt", attempt, "err", err)
			continue
		}
		s.log.Info("store: recovered; serving again", "attempt", attempt)
		return
	}
}

// probeName is the file the probe writes, next to the store file.
const probeName = "probe.tmp"

// probeBytes is how much the probe writes.
const probeBytes = 1 << 20

// probe writes and fdatasyncs a small file in the store's directory, then removes it.
func (s *Store) probe() error {
	if s.failure.beforeProbe != nil {
		if err := s.failure.beforeProbe(); err != nil {
			return err
		}
	}
	path := filepath.Join(filepath.Dir(s.path), probeName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	for off := 0; off < probeBytes && err == nil; off += len(zeros) {
		_, err = f.Write(zeros)
	}
	if err == nil {
		err = fdatasync(f)
	}
	return errors.Join(err, f.Close(), os.Remove(path))
}

// errRecoveryStopped ends a recovery that Close interrupted.
var errRecoveryStopped = errors.New("store: closing")

// recoverNow closes the store's file and reopens it as Open does after a crash,
// holding the store exclusively; on success the store is healthy again. A failed
// store refuses new operations (enter), so the store is soon free of them; an open
// snapshot (a backup being streamed) delays the recovery until it is closed, and
// closing stop abandons the wait.
func (s *Store) recoverNow(stop <-chan struct{}) error {
	for !s.closeMu.TryLock() {
		select {
		case <-stop:
			return errRecoveryStopped
		case <-time.After(5 * time.Millisecond):
		}
	}
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	if s.db != nil {
		if err := s.closeFailed(false); err != nil {
			return err
		}
	}
	ws, replay, err := prepareWAL(s.path, s.opts)
	if err != nil {
		return err
	}
	if err := s.openFile(ws, replay); err != nil {
		if ws != nil {
			_ = ws.lock.Close()
		}
		return err
	}
	// Healthy again, and this loop is done: a failure from now on starts another.
	f := &s.failure
	f.mu.Lock()
	f.err, f.stop, f.done = nil, nil, nil
	if s.opts.OnHealth != nil {
		s.opts.OnHealth(nil)
	}
	f.mu.Unlock()
	return nil
}

// closeFailed closes a failed store's file (caller holds closeMu exclusively) without
// the clean-shutdown marker, first cutting the log's unconfirmed tail (write-ahead log
// mode), so that a restart too recovers only what an fdatasync confirmed. If the cut
// fails the file stays open, unless force (Close) says to close it anyway.
func (s *Store) closeFailed(force bool) error {
	var cut error
	if ws := s.wal; ws != nil {
		ws.stopCheckpoints()
		ws.fileMu.Lock()
		if err := ws.cutUnsynced(); err != nil {
			cut = fmt.Errorf("store: cutting the log's unconfirmed tail: %w", err)
		}
		ws.fileMu.Unlock()
		if cut != nil && !force {
			return cut
		}
	}
	err := errors.Join(cut, s.db.Close())
	if ws := s.wal; ws != nil {
		err = errors.Join(err, ws.log.close(), ws.lock.Close())
	}
	s.db, s.wal = nil, nil
	return err
}

// cutUnsynced truncates the open segment after the last record an fdatasync
// confirmed, and makes the truncation durable (caller holds fileMu). It reopens the
// file rather than using the descriptor whose fdatasync failed.
func (ws *walState) cutUnsynced() error {
	f, err := os.OpenFile(filepath.Join(ws.log.dir, segmentName(ws.log.seq)), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(ws.synced)
	if err == nil {
		err = fdatasync(f)
	}
	return errors.Join(err, f.Close())
}
