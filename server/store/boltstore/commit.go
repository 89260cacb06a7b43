package boltstore

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/schema"
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

// Update implements store.Store with group commit (see leadOnce, and docs/store.md).
func (s *Store) Update(ctx context.Context, fn func(store.Writer) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	c := &call{ctx: ctx, fn: fn, wake: make(chan struct{}, 1)}
	s.mu.Lock()
	s.queue = append(s.queue, c)
	lead := !s.leading
	s.leading = true
	s.mu.Unlock()
	if !lead {
		select { // tell a lingering leader
		case s.arrive <- struct{}{}:
		default:
		}
		<-c.wake
		if c.done {
			return c.err
		}
	}
	// Leader: c is at the head of the queue, so the batch taken next carries it.
	s.leadOnce(c)
	return c.err
}

// leadOnce commits one batch from the head of the queue, hands leadership to the next
// queued call, if any, then waits for the batch to be durable (see durability) and
// wakes its callers. Leadership moves on after one batch so that no caller commits
// for others indefinitely, and before the wait, so that the next batch's work
// overlaps this one's fdatasync.
func (s *Store) leadOnce(self *call) {
	s.mu.Lock()
	target, linger := s.plan()
	s.mu.Unlock()
	if target > 1 && linger > 0 {
		s.linger(target, linger)
	}

	s.mu.Lock()
	n := min(len(s.queue), s.maxBatch)
	batch := s.queue[:n:n]
	if n == len(s.queue) {
		s.queue = nil
	} else {
		s.queue = s.queue[n:]
	}
	s.mu.Unlock()

	start := time.Now()
	s.commitMu.Lock()
	r := s.commitBatch(batch)
	s.commitMu.Unlock()
	took := time.Since(start)

	s.mu.Lock()
	s.commitAvg += (took - s.commitAvg) / 8
	s.batchAvg += (float64(len(batch)) - s.batchAvg) / 8
	// Every caller is still inside Update here (in the batch, or queued behind it), so
	// this is the moment to count how many there are.
	s.peak = max(s.peak-max(1, s.peak/8), int(s.inflight.Load()))
	var next *call
	if len(s.queue) > 0 {
		next = s.queue[0]
	} else {
		s.leading = false
	}
	s.mu.Unlock()
	if next != nil {
		next.wake <- struct{}{} // the next batch runs while this one becomes durable
	}
	s.settle(r)
	for _, c := range batch {
		if c != self {
			c.wake <- struct{}{}
		}
	}
}

// plan decides the batch a leader waits for (caller holds mu). Without it, n callers
// in a closed loop split into two groups that alternate, each committing while the
// other queues, so every commit carries n/2. Waiting briefly for the callers that are
// in flight lets one commit carry them all. The target is the number of concurrent
// Updates counted at the end of recent commits, decaying by an eighth per commit so
// that a burst is soon forgotten; a lone caller (peak 1) never waits. Nor does any
// leader while recent commits carried few callers each (batchAvg below
// lingerMinBatch): two callers that overlapped once are no closed loop, and a wait
// for one that does not come costs a whole timer tick (the runtime's timers are not
// finer than about a millisecond when the process is otherwise idle). The wait is at
// most half the recent commit time and MaxLinger, and ends as soon as the target has
// queued.
func (s *Store) plan() (target int, linger time.Duration) {
	if s.batchAvg < lingerMinBatch {
		return 1, 0
	}
	return min(s.peak, s.maxBatch), min(s.commitAvg/2, s.maxLinger)
}

func (s *Store) linger(target int, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		s.mu.Lock()
		n := len(s.queue)
		s.mu.Unlock()
		if n >= target {
			return
		}
		select {
		case <-s.arrive:
		case <-timer.C:
			return
		}
	}
}

// lingerMinBatch is the mean recent batch size below which leaders do not linger.
const lingerMinBatch = 4

// txState is shared by the calls of one transaction attempt.
type txState struct {
	// counts accumulates counter changes, applied once before the commit: every task
	// write moves a counter, and a batch touching the same counter once is cheaper
	// than once per call.
	counts map[string]int64
	// log records the transaction's bbolt mutations for the write-ahead log; nil when
	// the mode is off.
	log *walBatch
}

func (st *txState) logPut(bucket, key, value []byte) {
	if st.log != nil {
		st.log.put(bucket, key, value)
	}
}

func (st *txState) logDelete(bucket, key []byte) {
	if st.log != nil {
		st.log.del(bucket, key)
	}
}

func (st *txState) apply(tx *bolt.Tx) error {
	b := tx.Bucket(schema.Counters)
	for key, delta := range st.counts {
		if delta == 0 {
			continue
		}
		n := schema.DecodeCount(b.Get([]byte(key))) + delta
		var err error
		if n == 0 {
			err = b.Delete([]byte(key))
			st.logDelete(schema.Counters, []byte(key))
		} else {
			v := schema.EncodeCount(n)
			err = b.Put([]byte(key), v)
			st.logPut(schema.Counters, []byte(key), v)
		}
		if err != nil {
			return fmt.Errorf("store: counter: %w", err)
		}
	}
	return nil
}

// batchResult is what committing a batch leaves for settling it.
type batchResult struct {
	// ran are the calls whose outcome is err (the others are done already).
	ran []*call
	// seq is the batch's sequence when it holds one (ordered); otherwise the newest
	// sequence committed before it, which its functions may have read.
	seq     uint64
	ordered bool
	// committed says the transaction committed (its hooks run once it is durable).
	committed bool
	err       error
}

// settle waits until the batch is durable, runs its commit hooks in sequence order and
// marks its calls done.
func (s *Store) settle(r batchResult) {
	err := r.err
	if err == nil && r.seq > 0 {
		if r.committed && s.wal != nil {
			err = s.syncTo(r.seq)
		} else if err = s.dur.wait(r.seq); err != nil {
			err = s.fail(err)
		}
	}
	if r.ordered {
		s.dur.inOrder(r.seq, func() {
			if err != nil || !r.committed {
				return
			}
			s.commits.Add(1)
			s.updates.Add(int64(len(r.ran)))
			for _, c := range r.ran {
				for _, f := range c.onCommit {
					s.runHook(f)
				}
			}
		})
	}
	finish(r.ran, err)
}

// commitBatch runs the batch's calls in one transaction and commits it (caller holds
// commitMu). A call whose fn fails without writing is done with its error and the
// batch goes on; one that fails after writing poisons the transaction, which is
// rolled back and rerun without it. In the write-ahead log mode the batch's log
// record is written (not yet synced) while the transaction is still open and bbolt
// commits without fsync; the batch is durable, and its callers are acknowledged, once
// the leader's fdatasync returns (settle).
func (s *Store) commitBatch(batch []*call) batchResult {
	if err := s.failedErr(); err != nil {
		return batchResult{ran: batch, err: err}
	}
	if s.wal != nil {
		if err := s.wal.failedErr(s.dur); err != nil {
			return batchResult{ran: batch, err: s.fail(err)}
		}
	}
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
			return batchResult{ran: pending, err: s.fail(fmt.Errorf("store: begin transaction: %w", err))}
		}
		state := &txState{counts: map[string]int64{}}
		if s.wal != nil {
			s.wal.batch.reset()
			state.log = &s.wal.batch
		}
		var ran []*call
		wrote, poisoned := false, false
		for _, c := range pending {
			w := &writer{reader: reader{tx: tx}, state: state}
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
			// Nothing to commit. In the write-ahead log mode what the functions read
			// may still be on its way to durable; otherwise it is durable already.
			_ = tx.Rollback()
			r := batchResult{ran: ran}
			if s.wal != nil {
				r.seq = s.dur.last
			}
			return r
		}
		if err := state.apply(tx); err != nil {
			_ = tx.Rollback()
			return batchResult{ran: ran, err: err}
		}
		if s.wal != nil {
			if err := s.wal.append(tx.Size()); err != nil {
				_ = tx.Rollback()
				return batchResult{ran: ran, err: s.fail(err)}
			}
		}
		seq := s.dur.next()
		if s.wal != nil {
			s.dur.written.Store(seq)
		}
		s.dur.applied.Store(seq)
		if err := tx.Commit(); err != nil {
			if s.wal != nil {
				// Readers that loaded applied may wait for this batch: fail them too.
				cause := fmt.Errorf("the store file refused a batch the log holds: %w", err)
				s.wal.fail(cause)
				s.dur.markFailed(cause)
			}
			return batchResult{ran: ran, seq: seq, ordered: true, err: s.fail(fmt.Errorf("store: commit: %w", err))}
		}
		if s.wal == nil {
			s.dur.markDurable(seq) // bbolt fsynced it
		}
		return batchResult{ran: ran, seq: seq, ordered: true, committed: true}
	}
	return batchResult{}
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
