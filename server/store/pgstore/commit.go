package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentplane/agentplane/server/store"
)

// Group commit. Concurrent Updates share transactions: a caller that finds a write
// slot free (at most Options.Writers transactions are open at once) leads a batch,
// runs every queued function in one READ COMMITTED transaction and commits it once;
// callers that find every slot taken queue, and the next batch carries all of them.
// Under load a commit carries many Updates (one COMMIT, one WAL flush), and a lone
// caller runs at once, without waiting for company.
//
// The Update contract holds as in the bbolt store: a function that fails without
// writing costs its batch-mates nothing; one that fails after writing, or whose
// statement the database refused, makes the transaction roll back and the batch run
// again without it. A caller whose own statement failed for a reason worth retrying
// (a unique key taken by a concurrent insert, a deadlock) is run again alone, with a
// short growing pause, up to Options.MaxRetries times.

// call is one queued Update.
type call struct {
	ctx context.Context
	fn  func(store.Writer) error
	// wake is signalled once the call is done, must run alone, or has been handed a
	// batch to lead. Buffered: the signaller never blocks.
	wake chan struct{}
	// batch is what the call was handed to lead (set before wake).
	batch []*call
	done  bool
	err   error // final when done; the last failure when alone
	// alone says the call's own statement failed the transaction with an error worth
	// retrying: it runs again in a transaction of its own, careful: reading what
	// writes otherwise take for granted (see writer.PutTask).
	alone    bool
	careful  bool
	onCommit []func()
	// unmerged: a merged statement with this call's rows failed; its transactions
	// send every row on its own (merge.go).
	unmerged bool
}

// Update implements store.Store with group commit (see above).
func (s *Store) Update(ctx context.Context, fn func(store.Writer) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	c := &call{ctx: ctx, fn: fn, wake: make(chan struct{}, 1)}
	s.qmu.Lock()
	s.queue = append(s.queue, c)
	var batch []*call
	if s.running < s.writers {
		// A free slot means nothing was queued: the batch is c alone.
		s.running++
		batch = s.takeLocked()
	}
	s.qmu.Unlock()
	if batch == nil {
		// Queued: another caller's batch takes c, or c is handed one to lead.
		<-c.wake
		batch, c.batch = c.batch, nil
	}
	if batch != nil {
		s.lead(c, batch) // c heads its batch
	}
	if c.alone {
		return s.runAlone(c)
	}
	return c.err
}

// takeLocked takes the next batch from the head of the queue (caller holds qmu).
func (s *Store) takeLocked() []*call {
	n := min(len(s.queue), s.maxBatch)
	batch := s.queue[:n:n]
	if n == len(s.queue) {
		s.queue = nil
	} else {
		s.queue = s.queue[n:]
	}
	return batch
}

// lead runs batch, hands the slot to the next queued batch (or frees it), then wakes
// the batch's callers.
func (s *Store) lead(self *call, batch []*call) {
	s.runBatch(batch)
	s.qmu.Lock()
	var next []*call
	if len(s.queue) > 0 {
		next = s.takeLocked()
	} else {
		s.running--
	}
	s.qmu.Unlock()
	if next != nil {
		next[0].batch = next
		next[0].wake <- struct{}{}
	}
	for _, c := range batch {
		if c != self {
			c.wake <- struct{}{}
		}
	}
}

// runAlone runs c in transactions of its own until it is done or out of retries.
func (s *Store) runAlone(c *call) error {
	for attempt := 1; ; attempt++ {
		if attempt > s.retries {
			return c.err
		}
		// Back off a little, more each time, so that contenders spread out.
		t := time.NewTimer(time.Duration(attempt) * time.Millisecond)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return c.ctx.Err()
		case <-t.C:
		}
		c.alone, c.careful = false, true
		s.retried.Add(1)
		s.runBatch([]*call{c})
		if c.done {
			return c.err
		}
	}
}

// runBatch runs calls until each is done or must run alone.
func (s *Store) runBatch(calls []*call) {
	for len(calls) > 0 {
		pending := calls[:0:0]
		for _, c := range calls {
			if err := c.ctx.Err(); err != nil {
				c.done, c.err = true, err
				continue
			}
			pending = append(pending, c)
		}
		if len(pending) == 0 {
			return
		}
		calls = s.attempt(pending)
	}
}

// attempt runs calls in one transaction and commits it. It returns the calls to run
// again in a new transaction: those that a batch-mate's failure rolled back.
func (s *Store) attempt(calls []*call) (again []*call) {
	ctx, stop := batchContext(calls)
	defer stop()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		finish(calls, unavailable(err))
		return nil
	}
	t := newTx(ctx, conn)
	defer t.release()
	for _, c := range calls {
		t.unmerged = t.unmerged || c.unmerged
	}
	ran := make([]*call, 0, len(calls))
	for _, c := range calls {
		c.onCommit = nil
		w := &writer{reader: reader{ctx: ctx, q: t.querier(c), lock: true}, t: t, c: c}
		err := runFn(c.fn, w)
		if t.failed != nil {
			return s.blame(calls, t.failed)
		}
		if err != nil {
			if w.assumed {
				// The error may rest on a request id taken to be free (a retry of an
				// accepted start refused by a rate limit or a budget, where its task
				// would have answered it): run again alone, careful, reading the id.
				c.alone, c.err = true, err
			} else {
				c.done, c.err = true, err
			}
			if w.wrote {
				return unfinished(calls)
			}
			continue
		}
		c.onCommit = w.onCommit
		ran = append(ran, c)
	}
	if len(ran) == 0 {
		return nil
	}
	if f := t.verifyRequests(ran); f != nil {
		return s.blame(calls, f)
	}
	// The other replicas' wake-ups, delivered at COMMIT if it commits (notify.go).
	if ps := notices(s.listener.replica, t.changes.list); ps != nil {
		t.later(nil, "SELECT pg_notify($1, p) FROM unnest($2::text[]) p", channel, ps)
	}
	s.commitMu.Lock()
	err = t.commit()
	if err == nil {
		s.commits.Add(1)
		s.updates.Add(int64(len(ran)))
		for _, c := range ran {
			c.done, c.err = true, nil
			for _, f := range c.onCommit {
				runHook(f)
			}
		}
	}
	s.commitMu.Unlock()
	if err == nil {
		return nil
	}
	if t.failed != nil && (t.failed.owner != nil || t.failed.merged) {
		return s.blame(calls, t.failed)
	}
	// The COMMIT itself failed, or its answer was lost: the outcome is unknown.
	finish(ran, unavailable(err))
	return nil
}

// blame settles a transaction that the database failed: the call whose statement
// failed is done with the error, or runs again alone when the error is worth
// retrying; the others run again without it. A failure of no call's statement (BEGIN,
// the connection) fails them all.
func (s *Store) blame(calls []*call, f *failure) []*call {
	o := f.owner
	if o == nil && f.merged {
		// Whose row it was is not known: run the batch again unmerged to find out.
		for _, c := range calls {
			c.unmerged = true
		}
		return unfinished(calls)
	}
	if o == nil {
		finish(calls, unavailable(f.err))
		return nil
	}
	if retryable(f.err) || errors.Is(f.err, errRequestTaken) {
		o.alone, o.err = true, f.err
	} else {
		o.done, o.err = true, unavailable(f.err)
	}
	return unfinished(calls)
}

// unfinished are the calls neither done nor set to run alone.
func unfinished(calls []*call) []*call {
	var out []*call
	for _, c := range calls {
		if !c.done && !c.alone {
			out = append(out, c)
		}
	}
	return out
}

func finish(calls []*call, err error) {
	for _, c := range calls {
		if !c.done && !c.alone {
			c.done, c.err = true, err
		}
	}
}

// batchContext is the context of a batch's statements: it ends when every caller's
// has, so that callers that gave up stop a query nobody waits for, and no one caller
// cancels its batch-mates' work.
func batchContext(calls []*call) (context.Context, func()) {
	if len(calls) == 1 {
		return calls[0].ctx, func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var left atomic.Int32
	left.Store(int32(len(calls)))
	stops := make([]func() bool, len(calls))
	for i, c := range calls {
		stops[i] = context.AfterFunc(c.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// runFn runs fn, turning a panic into an error so that one broken caller cannot take
// down the transaction that others share.
func runFn(fn func(store.Writer) error, w *writer) (err error) {
	defer func() {
		if r := recover(); r != nil {
			w.wrote = true // its writes, if any, are unknown: roll them back
			err = fmt.Errorf("store: update function panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return fn(w)
}

func runHook(f func()) {
	defer func() {
		if r := recover(); r != nil {
			// A hook's panic must not stop the hooks of the transactions after it.
			slog.Error("store: OnCommit hook panicked", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	f()
}

// failure is a statement the database refused, which aborted the transaction.
type failure struct {
	owner *call // whose statement it was; nil for BEGIN, COMMIT, the connection
	err   error
	// merged: the statement was the merged rows of several calls (merge.go).
	merged bool
}

// errTxFailed is what a function reads after its transaction failed for a
// batch-mate's statement: the batch runs again without that batch-mate.
var errTxFailed = errors.New("store: the transaction failed; it will run again")

// stmt is a statement waiting to be sent.
type stmt struct {
	sql   string
	args  []any
	owner *call // nil for a merged statement of several calls' rows
	// ins is set on a one-row insert that run may merge with others (merge.go);
	// merged on the statement that resulted.
	ins    *insertTable
	merged bool
}

// query is a statement sent with the pending writes, whose answer someone waits for:
// its rows go to rows, or (rows nil) its command tag to tag.
type query struct {
	sql  string
	args []any
	rows func(pgx.Rows) error
	tag  *pgconn.CommandTag
}

// tx is one write transaction. Statements that need no answer (the writes) wait in
// pending and go to the server with the next statement that does (a read, an
// immediate write, COMMIT), in one pipeline: one round trip for all of them. BEGIN
// goes with the first. It also keeps what its functions learned about the rows they
// locked (see writer), valid for as long as the transaction.
type tx struct {
	ctx     context.Context
	conn    *pgxpool.Conn
	pending []stmt
	sent    bool     // something reached the server: the transaction is open there
	failed  *failure // the first refused statement; PostgreSQL refuses the rest until ROLLBACK

	tasks      map[[2]string]*taskState
	requests   map[[2]string]string
	interrupts map[[2]string]*interruptState
	flows      map[[2]string]*flowState

	// changes are what the other replicas' waiters hear of at COMMIT.
	changes changes
	// assumed are the request ids answered free without a read (writer.TaskForRequest).
	assumed []assumption
	// unmerged: send one-row inserts as they are (merge.go).
	unmerged bool
}

// assumption is a request id that call by was told is free without a read.
type assumption struct {
	key [2]string
	by  *call
}

// errRequestTaken fails a call that was told a request id is free which another
// transaction had taken: it runs again alone, careful, and reads.
var errRequestTaken = errors.New("store: a request id taken to be free was taken")

// verifyRequests reads, in one round trip with the pending writes, the request ids that
// calls of ran were told are free and that the transaction did not insert (an insert
// checks its own). It returns the failure to blame on the first call told so of one
// that is taken, or nil.
func (t *tx) verifyRequests(ran []*call) *failure {
	if len(t.assumed) == 0 {
		return nil
	}
	in := make(map[*call]bool, len(ran))
	for _, c := range ran {
		in[c] = true
	}
	var tenants, ids []string
	by := map[[2]string]*call{}
	for _, a := range t.assumed {
		if !in[a.by] || t.requests[a.key] != "" {
			continue
		}
		if _, seen := by[a.key]; !seen {
			by[a.key] = a.by
			tenants, ids = append(tenants, a.key[0]), append(ids, a.key[1])
		}
	}
	if len(ids) == 0 {
		return nil
	}
	var taken *call
	err := t.run(nil, query{sql: `SELECT tenant, request_id FROM requests
		WHERE (tenant, request_id) IN (SELECT unnest($1::text[]), unnest($2::text[]))`, args: []any{tenants, ids},
		rows: func(rows pgx.Rows) error {
			for rows.Next() && taken == nil {
				var k [2]string
				if err := rows.Scan(&k[0], &k[1]); err != nil {
					return err
				}
				taken = by[k]
			}
			return nil
		}})
	switch {
	case t.failed != nil:
		return t.failed
	case err != nil:
		return &failure{err: err}
	case taken != nil:
		return &failure{owner: taken, err: errRequestTaken}
	}
	return nil
}

// flowState is what a transaction knows of a flow row it locked (or found missing).
type flowState struct {
	rec    []byte // as of this transaction; nil: none
	exists bool   // the row exists in the database (so far as this transaction wrote)
}

// beginSQL names the isolation level so that a server whose
// default_transaction_isolation is another still runs this store's writes as designed.
const beginSQL = "BEGIN ISOLATION LEVEL READ COMMITTED"

func newTx(ctx context.Context, conn *pgxpool.Conn) *tx {
	return &tx{
		ctx: ctx, conn: conn, pending: []stmt{{sql: beginSQL}},
		tasks: map[[2]string]*taskState{}, requests: map[[2]string]string{}, interrupts: map[[2]string]*interruptState{},
		flows: map[[2]string]*flowState{},
	}
}

// later queues a write of owner's.
func (t *tx) later(owner *call, sql string, args ...any) {
	t.pending = append(t.pending, stmt{sql: sql, args: args, owner: owner})
}

// run sends the pending writes and then qs, in one round trip, and hands each query's
// answer over. A statement the database refuses fails the transaction (t.failed,
// blamed on its owner: owner for qs) and is returned as unavailable when it is a
// connection failure; an error of a rows callback is returned as it is.
func (t *tx) run(owner *call, qs ...query) error {
	if t.failed != nil {
		return errTxFailed
	}
	pending := t.pending
	if !t.unmerged {
		pending = merge(pending)
	}
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(pending)+len(qs))}
	for _, p := range pending {
		b.Queue(p.sql, p.args...)
	}
	for _, q := range qs {
		b.Queue(q.sql, q.args...)
	}
	t.sent = true
	br := t.conn.SendBatch(t.ctx, b)
	for _, p := range pending {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			t.pending = t.pending[:0]
			if p.merged && p.owner == nil && t.failed == nil {
				t.failed = &failure{err: err, merged: true}
			}
			return t.fail(p.owner, err)
		}
	}
	t.pending = t.pending[:0]
	var fnErr error
	for _, q := range qs {
		var err error
		if q.rows == nil {
			var tag pgconn.CommandTag
			tag, err = br.Exec()
			if q.tag != nil {
				*q.tag = tag
			}
		} else {
			var rows pgx.Rows
			if rows, err = br.Query(); err == nil {
				if ferr := q.rows(rows); ferr != nil && fnErr == nil {
					fnErr = ferr
				}
				rows.Close()
				err = rows.Err()
			}
		}
		if err != nil {
			_ = br.Close()
			return t.fail(owner, err)
		}
	}
	if err := br.Close(); err != nil {
		return t.fail(owner, err)
	}
	return fnErr
}

func (t *tx) fail(owner *call, err error) error {
	if t.failed == nil {
		t.failed = &failure{owner: owner, err: err}
	}
	return unavailable(err)
}

// commit sends the pending writes and COMMIT. A transaction that never reached the
// server has nothing to commit.
func (t *tx) commit() error {
	if t.failed != nil {
		return errTxFailed
	}
	if !t.sent && len(t.pending) <= 1 {
		return nil
	}
	return t.run(nil, query{sql: "COMMIT"})
}

// release rolls back what is still open and returns the connection to the pool (which
// closes a connection left in a transaction).
func (t *tx) release() {
	if pc := t.conn.Conn().PgConn(); t.sent && !pc.IsClosed() && pc.TxStatus() != 'I' {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), 5*time.Second)
		_, _ = t.conn.Exec(ctx, "ROLLBACK")
		cancel()
	}
	t.conn.Release()
}

// querier reads through t for owner: its reads carry the pending writes.
func (t *tx) querier(owner *call) querier { return txQuerier{t: t, owner: owner} }

type txQuerier struct {
	t     *tx
	owner *call
}

func (q txQuerier) query(sql string, args []any, rows func(pgx.Rows) error) error {
	return q.t.run(q.owner, query{sql: sql, args: args, rows: rows})
}
