package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
)

// channel is the LISTEN channel of the replicas' wake-ups.
const channel = "agentplane"

// Defaults of the listener's timing.
const (
	defaultPollInterval = time.Second
	// listenerPing is how long the listener waits for a notification before it asks
	// the database whether it is still there; listenerPingTimeout bounds the answer.
	listenerPing        = time.Second
	listenerPingTimeout = 5 * time.Second
	maxReconnectBackoff = 2 * time.Second
)

var _ store.Shared = (*Store)(nil)

// listener is the dedicated connection that LISTENs for the other replicas' writes
// and turns their notifications into store.Changes. It is also the store's health:
// while it cannot reach the database the store is unhealthy. After a reconnect it
// reports store.ChangeAll (anything committed while it was away is in the tables, and
// the readers it wakes read them), and while it is away it reports ChangeAll every
// poll interval, so a missed notification costs at most that delay.
type listener struct {
	conf     *pgx.ConnConfig
	pool     *pgxpool.Pool
	replica  string
	poll     time.Duration
	log      *slog.Logger
	onHealth func(error)

	handlers atomic.Pointer[[]func(store.Change)]
	hmu      sync.Mutex // serializes OnChange

	health atomic.Pointer[error] // nil: listening

	cancel context.CancelFunc
	done   chan struct{}
}

// newReplicaID names this process in its notifications.
func newReplicaID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// OnChange implements store.Shared.
func (s *Store) OnChange(f func(store.Change)) {
	l := s.listener
	l.hmu.Lock()
	defer l.hmu.Unlock()
	var hs []func(store.Change)
	if old := l.handlers.Load(); old != nil {
		hs = append(hs, *old...)
	}
	hs = append(hs, f)
	l.handlers.Store(&hs)
}

// Health is the store's failure while it cannot reach the database (UNAVAILABLE,
// STORE_UNAVAILABLE), or nil. It is the state of the listener connection, which asks
// the database at least every second while no notification arrives.
func (s *Store) Health() error {
	if e := s.listener.health.Load(); e != nil {
		return *e
	}
	return nil
}

// Broadcast implements store.Shared with a NOTIFY outside any transaction, a notice
// whose "m" is [tenant, task_id, base64(data)].
func (s *Store) Broadcast(ctx context.Context, tenant, taskID string, data []byte) error {
	if len(data) > store.MaxBroadcast {
		return apierr.New(codes.InvalidArgument, apierr.ReasonInvalidArgument, "a broadcast carries at most %d bytes, not %d", store.MaxBroadcast, len(data))
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	payload, err := json.Marshal(notice{Replica: s.listener.replica, Message: []string{tenant, taskID, base64.StdEncoding.EncodeToString(data)}})
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", channel, string(payload))
	return unavailable(err)
}

// start connects the listener (failing when the database is unreachable) and
// runs it until stopListener.
func (l *listener) start(ctx context.Context) error {
	conn, err := l.connect(ctx)
	if err != nil {
		return err
	}
	lctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	go l.run(lctx, conn)
	return nil
}

func (l *listener) stop() {
	if l.cancel != nil {
		l.cancel()
		<-l.done
	}
}

// listenerName is the listener connection's application_name in pg_stat_activity,
// unless the DSN names one.
const listenerName = "agentplane-listener"

func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	conf := l.conf.Copy()
	if conf.RuntimeParams["application_name"] == "" {
		conf.RuntimeParams["application_name"] = listenerName
	}
	conn, err := pgx.ConnectConfig(ctx, conf)
	if err != nil {
		return nil, unavailable(err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, unavailable(err)
	}
	return conn, nil
}

func (l *listener) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	for {
		err := l.listen(ctx, conn)
		_ = conn.Close(context.Background())
		if ctx.Err() != nil {
			return
		}
		l.setHealth(unavailable(err))
		l.log.Warn("postgres: lost the notification connection; reconnecting", "err", err)
		l.emit(store.Change{Kind: store.ChangeAll})
		if conn = l.reconnect(ctx); conn == nil {
			return
		}
	}
}

// listen delivers notifications until the connection fails.
func (l *listener) listen(ctx context.Context, conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, listenerPing)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			l.deliver(n.Payload)
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case !pgconn.Timeout(err):
			return err
		}
		// Quiet for a while: make sure the database is still there (a cut network
		// may not close the connection).
		pctx, cancel := context.WithTimeout(ctx, listenerPingTimeout)
		err = conn.Ping(pctx)
		cancel()
		if err != nil {
			return err
		}
	}
}

// reconnect tries again with a growing pause until it is listening (nil when ctx
// ends), reporting ChangeAll every poll interval meanwhile.
func (l *listener) reconnect(ctx context.Context) *pgx.Conn {
	backoff := 50 * time.Millisecond
	lastPoll := time.Now()
	for {
		t := time.NewTimer(min(backoff, l.poll))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, maxReconnectBackoff)
		if time.Since(lastPoll) >= l.poll {
			lastPoll = time.Now()
			l.emit(store.Change{Kind: store.ChangeAll})
		}
		cctx, cancel := context.WithTimeout(ctx, l.conf.ConnectTimeout+listenerPingTimeout)
		conn, err := l.connect(cctx)
		cancel()
		if err != nil {
			l.setHealth(err)
			continue
		}
		// The pool's connections may be to the server that went away: start afresh
		// rather than let each caller find a dead one.
		l.pool.Reset()
		l.setHealth(nil)
		l.log.Info("postgres: notification connection restored")
		l.emit(store.Change{Kind: store.ChangeAll})
		return conn
	}
}

func (l *listener) setHealth(err error) {
	if err != nil && !apierr.HasReason(err, apierr.ReasonStoreUnavailable) {
		// A ping that timed out, say: the database did not answer in time.
		err = apierr.New(codes.Unavailable, apierr.ReasonStoreUnavailable, "the database is unreachable: %v", err)
	}
	var changed bool
	if err == nil {
		changed = l.health.Swap(nil) != nil
	} else {
		changed = l.health.Swap(&err) == nil
	}
	if changed && l.onHealth != nil {
		l.onHealth(err)
	}
}

// deliver parses one notice and reports what it names, unless this replica sent it.
func (l *listener) deliver(payload string) {
	var n notice
	if err := json.Unmarshal([]byte(payload), &n); err != nil || n.Replica == "" {
		l.log.Warn("postgres: ignoring a malformed notification", "payload", payload)
		return
	}
	if n.Replica == l.replica {
		return
	}
	if n.All {
		l.emit(store.Change{Kind: store.ChangeAll})
		return
	}
	// The changes of one commit have no order among them.
	for _, q := range n.Queues {
		l.emit(store.Change{Kind: store.ChangeQueued, Queue: q})
	}
	for i := 0; i+1 < len(n.Events); i += 2 {
		l.emit(store.Change{Kind: store.ChangeEvents, Tenant: n.Events[i], TaskID: n.Events[i+1]})
	}
	for i := 0; i+1 < len(n.Decided); i += 2 {
		l.emit(store.Change{Kind: store.ChangeDecided, Tenant: n.Decided[i], InterruptID: n.Decided[i+1]})
	}
	if n.Deadline {
		l.emit(store.Change{Kind: store.ChangeDeadline})
	}
	if m := n.Message; len(m) == 3 {
		data, err := base64.StdEncoding.DecodeString(m[2])
		if err != nil {
			l.log.Warn("postgres: ignoring a malformed broadcast", "err", err)
			return
		}
		l.emit(store.Change{Kind: store.ChangeMessage, Tenant: m[0], TaskID: m[1], Data: data})
	}
}

func (l *listener) emit(c store.Change) {
	if hs := l.handlers.Load(); hs != nil {
		for _, h := range *hs {
			h(c)
		}
	}
}

// A notice is one notification's payload, a JSON object. The store sends the notices
// of a transaction's writes in that transaction (at most maxNotices, each under
// maxPayload bytes; see notices), so PostgreSQL delivers them at its COMMIT and only if
// it commits: no commit goes unannounced and nothing rolled back is announced.
// Broadcast sends one of its own. A notice only says where to look; readers read the
// tables, so a lost or repeated one costs a delay or a read, never a record.
type notice struct {
	// Replica names the sending process, which skips its own notices (its OnCommit
	// hooks have already woken its waiters).
	Replica string `json:"r"`
	// Events: the tasks whose logs grew, as tenant, task id, tenant, task id, ...
	Events []string `json:"e,omitempty"`
	// Queues: the run queues a task was queued (or queued again) in.
	Queues []string `json:"q,omitempty"`
	// Decided: the interrupts no longer pending, as tenant, interrupt id, ...
	Decided []string `json:"d,omitempty"`
	// Deadline: a pending interrupt was given a deadline or an escalation step.
	Deadline bool `json:"t,omitempty"`
	// All: something changed that the other fields could not name (the transaction
	// changed too much for maxNotices notices): every waiter looks again.
	All bool `json:"a,omitempty"`
	// Message: a broadcast, as tenant, task id, base64(data).
	Message []string `json:"m,omitempty"`
}

const (
	// maxPayload is the most bytes a notice carries: PostgreSQL refuses a payload of
	// 8000 bytes or more.
	maxPayload = 7999
	// maxNotices is the most notices one transaction sends; past that it sends one
	// with All instead.
	maxNotices = 8
)

// change is one thing a transaction changed that another replica's waiters may wait
// for: the kind, and where (tenant and task, the queue, tenant and interrupt).
type change struct {
	kind store.ChangeKind
	a, b string
}

// changes are a transaction's changes, each once, in the order first made.
type changes struct {
	seen map[change]struct{}
	list []change
}

func (cs *changes) add(c change) {
	if _, ok := cs.seen[c]; ok {
		return
	}
	if cs.seen == nil {
		cs.seen = map[change]struct{}{}
	}
	cs.seen[c] = struct{}{}
	cs.list = append(cs.list, c)
}

// notices encodes cs as the payloads of at most maxNotices notifications, each under
// maxPayload bytes, or else as one notice with All.
func notices(replica string, cs []change) []string {
	var out []string
	var split func(cs []change) bool
	split = func(cs []change) bool {
		n := notice{Replica: replica}
		for _, c := range cs {
			switch c.kind {
			case store.ChangeEvents:
				n.Events = append(n.Events, c.a, c.b)
			case store.ChangeQueued:
				n.Queues = append(n.Queues, c.a)
			case store.ChangeDecided:
				n.Decided = append(n.Decided, c.a, c.b)
			case store.ChangeDeadline:
				n.Deadline = true
			}
		}
		p := marshalNotice(n)
		if len(p) <= maxPayload {
			out = append(out, p)
			return len(out) <= maxNotices
		}
		if len(cs) == 1 {
			return false
		}
		h := len(cs) / 2
		return split(cs[:h]) && split(cs[h:])
	}
	if len(cs) == 0 {
		return nil
	}
	if !split(cs) {
		return []string{marshalNotice(notice{Replica: replica, All: true})}
	}
	return out
}

func marshalNotice(n notice) string {
	p, err := json.Marshal(n)
	if err != nil {
		panic(err) // strings and booleans only
	}
	return string(p)
}
