package boltstore

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// durability tracks the batches of the commit pipeline. Every batch that writes gets
// the next sequence number as it commits (under Store.commitMu). It is durable when
// bbolt's commit returns (default mode: bbolt fsyncs), or once its log record is
// fdatasynced (write-ahead log mode): its leader does that after handing leadership
// on (Store.syncTo), so the fdatasync overlaps the next batch's work, and one
// fdatasync covers every record written before it started. A batch's callers are
// acknowledged, and its commit hooks run, only once it is durable, and the hooks of
// successive batches run in sequence order. In the write-ahead log mode a reader may
// find a batch in the file before its record is durable, so View waits for the
// batches it may have seen (see Store.settleRead).
type durability struct {
	// last is the newest sequence assigned (guarded by Store.commitMu).
	last uint64
	// applied is the newest sequence whose transaction may be visible to readers: it
	// is stored before bbolt's commit begins, so a reader that loads it after its
	// transaction began has a bound on what it can have seen.
	applied atomic.Uint64
	// written is the newest sequence whose log record is completely written (write-
	// ahead log mode).
	written atomic.Uint64

	mu sync.Mutex
	// durable is the newest sequence known durable.
	durable uint64
	// err is set by markFailed: nothing after durable will ever be durable.
	err error
	// changed is closed and replaced whenever durable or err changes.
	changed chan struct{}
	// hooked is the newest sequence whose commit hooks have run (or were skipped).
	hooked uint64
	// hookTurn is closed and replaced whenever hooked changes.
	hookTurn chan struct{}
}

func newDurability() *durability {
	return &durability{changed: make(chan struct{}), hookTurn: make(chan struct{})}
}

// next assigns the sequence of a batch about to commit (caller holds commitMu).
func (d *durability) next() uint64 {
	d.last++
	return d.last
}

// markDurable records that every batch up to seq is durable.
func (d *durability) markDurable(seq uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if seq > d.durable {
		d.durable = seq
		close(d.changed)
		d.changed = make(chan struct{})
	}
}

// markFailed records that the batches after durable will never be durable (a failed
// fdatasync, or a batch the file refused after its record was written): their
// callers and the readers that may have seen them get err.
func (d *durability) markFailed(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == nil {
		d.err = fmt.Errorf("store: the write-ahead log failed: %w", err)
		close(d.changed)
		d.changed = make(chan struct{})
	}
}

// failed returns the error markFailed recorded, if any.
func (d *durability) failed() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// wait returns once every batch up to seq is durable, or with the error that means it
// never will be.
func (d *durability) wait(seq uint64) error {
	for {
		d.mu.Lock()
		if d.durable >= seq {
			d.mu.Unlock()
			return nil
		}
		if d.err != nil {
			err := d.err
			d.mu.Unlock()
			return err
		}
		ch := d.changed
		d.mu.Unlock()
		<-ch
	}
}

// inOrder runs f once the hooks of every earlier batch have run, so that what commit
// hooks announce (new events, decisions) is announced in commit order. Every sequence
// must pass through inOrder exactly once, failed batches included (with a no-op f), or
// the batches after it would wait forever.
func (d *durability) inOrder(seq uint64, f func()) {
	d.mu.Lock()
	for d.hooked+1 != seq {
		ch := d.hookTurn
		d.mu.Unlock()
		<-ch
		d.mu.Lock()
	}
	d.mu.Unlock()
	f()
	d.mu.Lock()
	d.hooked = seq
	close(d.hookTurn)
	d.hookTurn = make(chan struct{})
	d.mu.Unlock()
}

// syncTo makes every batch up to seq durable (write-ahead log mode): a leader calls it
// for its batch, a checkpoint for everything written so far. One fdatasync
// runs at a time and covers every record written when it starts, so a leader that
// waited for the one before often finds its batch covered already. A leader syncs
// itself rather than handing the fdatasync to another goroutine: on a small machine
// the wake-ups of such a hand-off cost more than the overlap with bbolt's commit
// saved.
func (s *Store) syncTo(seq uint64) error {
	d := s.dur
	d.mu.Lock()
	done, err := d.durable >= seq, d.err
	d.mu.Unlock()
	if done || err != nil {
		return err
	}
	ws := s.wal
	ws.fileMu.Lock()
	defer ws.fileMu.Unlock()
	d.mu.Lock()
	done, err = d.durable >= seq, d.err
	d.mu.Unlock()
	if done || err != nil {
		return err
	}
	logged, target := ws.logged.Load(), d.written.Load()
	if err := ws.syncLocked(); err != nil {
		d.markFailed(err)
		return s.fail(d.failed())
	}
	ws.synced = logged
	d.markDurable(target)
	return nil
}
