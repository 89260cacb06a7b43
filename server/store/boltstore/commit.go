package boltstore

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/agentplane/agentplane/server/store"
)

// call is one queued Update.
type call struct {
	ctx context.Context
	fn  func(store.Writer) error
	// wake is signalled once: either the call is done (err is final) or the caller
	// became the leader and must commit. It is buffered so the signaller never blocks.
	wake chan struct{}
	done bool
	err  error
	// onCommit is what the successful run of fn registered.
	onCommit []func()
}

// Update implements store.Store with group commit; see the package documentation.
func (s *Store) Update(ctx context.Context, fn func(store.Writer) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	c := &call{ctx: ctx, fn: fn, wake: make(chan struct{}, 1)}
	s.mu.Lock()
	s.queue = append(s.queue, c)
	lead := !s.leading
	s.leading = true
	s.mu.Unlock()
	if !lead {
		<-c.wake
		if c.done {
			return c.err
		}
	}
	// Leader: c is at the head of the queue, so the batch taken next carries it.
	s.leadOnce(c)
	return c.err
}

// leadOnce commits one batch from the head of the queue, wakes its callers and hands
// leadership to the next queued call, if any. Leadership moves on after one batch so
// that no caller commits for others indefinitely.
func (s *Store) leadOnce(self *call) {
	s.mu.Lock()
	n := min(len(s.queue), s.maxBatch)
	batch := s.queue[:n:n]
	if n == len(s.queue) {
		s.queue = nil
	} else {
		s.queue = s.queue[n:]
	}
	s.mu.Unlock()

	s.runBatch(batch)

	s.mu.Lock()
	var next *call
	if len(s.queue) > 0 {
		next = s.queue[0]
	} else {
		s.leading = false
	}
	s.mu.Unlock()
	for _, c := range batch {
		if c != self {
			c.wake <- struct{}{}
		}
	}
	if next != nil {
		next.wake <- struct{}{}
	}
}

// runBatch runs the calls in one transaction and commits it, marking every call done.
// A call whose fn fails without writing is done with its error and the batch goes on;
// one that fails after writing poisons the transaction, which is rolled back and rerun
// without it.
func (s *Store) runBatch(batch []*call) {
	pending := make([]*call, 0, len(batch))
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.done, c.err = true, err
			continue
		}
		pending = append(pending, c)
	}
	for len(pending) > 0 {
		tx, err := s.db.Begin(true)
		if err != nil {
			finish(pending, fmt.Errorf("store: begin transaction: %w", err))
			return
		}
		var ran []*call
		wrote, poisoned := false, false
		for _, c := range pending {
			if c.done {
				continue
			}
			w := &writer{reader: reader{tx: tx}}
			err := runFn(c.fn, w)
			switch {
			case err == nil:
				c.onCommit = w.onCommit
				wrote = wrote || w.dirty
				ran = append(ran, c)
				continue
			case !w.dirty:
				c.done, c.err = true, err
				continue
			}
			c.done, c.err = true, err
			poisoned = true
			break
		}
		if poisoned {
			_ = tx.Rollback()
			next := pending[:0]
			for _, c := range pending {
				if !c.done {
					c.onCommit = nil
					next = append(next, c)
				}
			}
			pending = next
			continue
		}
		if !wrote {
			// Nothing to make durable; skip the fsyncs.
			_ = tx.Rollback()
			finish(ran, nil)
			return
		}
		if err := tx.Commit(); err != nil {
			finish(ran, fmt.Errorf("store: commit: %w", err))
			return
		}
		s.commits.Add(1)
		s.updates.Add(int64(len(ran)))
		for _, c := range ran {
			for _, f := range c.onCommit {
				s.runHook(f)
			}
		}
		finish(ran, nil)
		return
	}
}

func finish(calls []*call, err error) {
	for _, c := range calls {
		if !c.done {
			c.done, c.err = true, err
		}
	}
}

// runFn runs fn, turning a panic into an error so that one broken caller cannot take
// down the commit that others share.
func runFn(fn func(store.Writer) error, w *writer) (err error) {
	defer func() {
		if r := recover(); r != nil {
			w.dirty = true // its writes, if any, are unknown: roll them back
			err = fmt.Errorf("store: update function panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return fn(w)
}

func (s *Store) runHook(f func()) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("store: OnCommit hook panicked", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	f()
}
