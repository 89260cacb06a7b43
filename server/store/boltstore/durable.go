package boltstore

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// durability tracks the batches of the commit pipeline. Every batch that writes gets
// the next sequence number as it commits (under Store.commitMu). It is durable when
// bbolt's commit returns (default mode: bbolt fsyncs), or once its log record is
// fdatasynced (write-ahead log mode): syncLoop does that while the next batch already
// runs, and one fdatasync covers every record written before it started. A batch's
// callers are acknowledged, and its commit hooks run, only once it is durable, and
// the hooks of successive batches run in sequence order. In the write-ahead log mode
// a reader may find a batch in the file before its record is durable, so View waits
// for the batches it may have seen (see Store.settleRead).
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
	// kick asks syncLoop to make what is written durable (buffered, 1).
	kick chan struct{}

	mu sync.Mutex
	// durable is the newest sequence known durable.
	durable uint64
	// err is set when an fdatasync failed: nothing after durable will ever be.
	err error
	// changed is closed and replaced whenever durable or err changes.
	changed chan struct{}
	// hooked is the newest sequence whose commit hooks have run (or were skipped).
	hooked uint64
	// hookTurn is closed and replaced whenever hooked changes.
	hookTurn chan struct{}
}

func newDurability() *durability {
	return &durability{kick: make(chan struct{}, 1), changed: make(chan struct{}), hookTurn: make(chan struct{})}
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

// markFailed records a failed fdatasync: the batches after durable are visible but
// not durable, and will not become so.
func (d *durability) markFailed(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == nil {
		d.err = fmt.Errorf("store: making the write-ahead log durable failed; writes are refused until a restart: %w", err)
		close(d.changed)
		d.changed = make(chan struct{})
	}
}

// failed returns the error of a failed fdatasync, if any.
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

// requestSync wakes syncLoop without blocking.
func (d *durability) requestSync() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// syncLoop makes written log records durable, one fdatasync for all that are written
// when it starts, until kick is closed (write-ahead log mode).
func (s *Store) syncLoop(done chan<- struct{}) {
	defer close(done)
	d := s.dur
	for range d.kick {
		target := d.written.Load()
		d.mu.Lock()
		idle := target <= d.durable || d.err != nil
		d.mu.Unlock()
		if idle {
			continue
		}
		if err := s.wal.sync(); err != nil {
			d.markFailed(err)
			continue
		}
		d.markDurable(target)
	}
}
