package tasks

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// watchPage is how many events a watcher reads from the store per transaction, so a
// read transaction is never held while a client is slow to receive.
const watchPage = 256

type watchKey struct{ tenant, taskID string }

// hub fans committed events, and ephemeral message deltas, out to live watchers.
// Publishing never blocks, on a watcher or on the fan-out: publish runs in a commit's
// OnCommit hook, which must not block, and hooks run in commit order, so a wait there
// would delay every writer's answer. publish queues the events, in commit order, for
// one goroutine at a time to send (drain). The queue is bounded: events that find it
// full are dropped and their task's watchers marked lagged, and a watcher's queue
// is bounded: a watcher whose queue is full is marked lagged. A lagged watcher
// catches up from the store, from the last event it sent (a delta that does not fit
// is dropped).
type hub struct {
	// mu guards subs; a fan-out holds it for reading.
	mu   sync.RWMutex
	subs map[watchKey]map[*subscription]struct{}

	// qmu guards the queue of published events awaiting their fan-out.
	qmu      sync.Mutex
	queue    []published
	queued   int  // events in queue
	draining bool // a goroutine is fanning the queue out
	// maxQueued is how many events may await their fan-out; beyond it publish drops
	// them (their watchers read them from the store), so that writers outrunning the
	// fan-out cost bounded memory and are never held.
	maxQueued int

	// itaps are the listeners of each tenant's interrupts (interruptwatch.go).
	itaps interruptTaps
}

// published is one commit's events, or one PublishDeltas call's deltas, for one
// watched task. Both go through the same queue, so a watcher sees them in the order
// they were published.
type published struct {
	key    watchKey
	events []*storagev1.EventRecord
	deltas []*agentplanev1.MessageDelta
}

// subscription is one watcher's mailbox. Its queue grows as live messages arrive, up
// to max, and is emptied by each take: an idle watcher holds no buffer (a channel of
// max slots would cost each of thousands of idle watches max messages' room).
type subscription struct {
	mu    sync.Mutex
	queue []Event
	max   int
	// ready has a token when queue may hold messages.
	ready chan struct{}
	// lagged has a token when events were dropped for this watcher.
	lagged chan struct{}
}

// offer queues ev for the watcher unless max messages wait already; it never blocks.
func (s *subscription) offer(ev Event) bool {
	s.mu.Lock()
	if len(s.queue) >= s.max {
		s.mu.Unlock()
		return false
	}
	s.queue = append(s.queue, ev)
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
	return true
}

// take returns the queued messages, oldest first, and empties the queue, which
// reuses spare's room (a batch taken earlier, now handled) unless that is large.
func (s *subscription) take(spare []Event) []Event {
	clear(spare)
	if cap(spare) > 64 {
		spare = nil
	}
	s.mu.Lock()
	q := s.queue
	s.queue = spare[:0]
	s.mu.Unlock()
	return q
}

// Event is one message of a watch as Follow sends it: an event of the log
// (TaskEvent set), or another arm of WatchTaskResponse (Other set: caught_up,
// keepalive, message_delta). A live event or delta is one value shared by every
// watcher of its task, so what a watcher derives from it alone (its wire encoding) can
// be derived once for all of them: see Encoded.
type Event struct {
	*agentplanev1.TaskEvent
	// Other is the message when it is not an event of the log.
	Other *agentplanev1.WatchTaskResponse
	enc   *encoding // nil for a message made for one watcher
}

// Response is the WatchTaskResponse that carries e.
func (e Event) Response() *agentplanev1.WatchTaskResponse {
	if e.Other != nil {
		return e.Other
	}
	return &agentplanev1.WatchTaskResponse{Kind: &agentplanev1.WatchTaskResponse_Event{Event: e.TaskEvent}}
}

type encoding struct {
	once sync.Once
	b    []byte
	err  error
}

// Encoded returns encode(e.Response()). For a live event or delta, encode runs once,
// in whichever watcher comes first, and every watcher gets its result: encode must
// depend on the message alone, and nobody may modify the bytes.
func (e Event) Encoded(encode func(*agentplanev1.WatchTaskResponse) ([]byte, error)) ([]byte, error) {
	if e.enc == nil {
		return encode(e.Response())
	}
	e.enc.once.Do(func() { e.enc.b, e.enc.err = encode(e.Response()) })
	return e.enc.b, e.enc.err
}

func newHub() *hub {
	return &hub{subs: map[watchKey]map[*subscription]struct{}{}, maxQueued: 4096}
}

func (h *hub) subscribe(k watchKey, buffer int) *subscription {
	s := &subscription{max: max(buffer, 1), ready: make(chan struct{}, 1), lagged: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[k] == nil {
		h.subs[k] = map[*subscription]struct{}{}
	}
	h.subs[k][s] = struct{}{}
	return s
}

func (h *hub) unsubscribe(k watchKey, s *subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs[k], s)
	if len(h.subs[k]) == 0 {
		delete(h.subs, k)
	}
}

// publish runs after a commit, in commit order, on the committing goroutine, and
// never blocks. It queues the events of a watched task for drain, or, when the queue
// is full, drops them and marks the task's watchers lagged: they read the events from
// the store, which holds them (the commit is done), and skip those they then receive
// from the queue. Nor does it queue them when every watcher of the task is lagged
// already: each will read them from the store. A watcher that subscribes after
// publish dropped its task's events (nobody watched) reads them from the store, as it
// does every event committed before its subscription.
func (h *hub) publish(tenant, taskID string, events []*storagev1.EventRecord) {
	if len(events) == 0 {
		return
	}
	h.itaps.publish(tenant, events)
	k := watchKey{tenant, taskID}
	h.mu.RLock()
	defer h.mu.RUnlock()
	live := false
	for s := range h.subs[k] {
		if live = !s.isLagged(); live {
			break
		}
	}
	if !live {
		return
	}
	if !h.tryEnqueue(published{key: k, events: events}) {
		for s := range h.subs[k] {
			s.poke()
		}
	}
}

// publishDeltas queues deltas for the live watchers of a task and returns how many
// there are; it never blocks. A watcher misses them when the queue is full, or when
// its queue is full as they are fanned out.
func (h *hub) publishDeltas(tenant, taskID string, deltas []*agentplanev1.MessageDelta) int {
	k := watchKey{tenant, taskID}
	h.mu.RLock()
	n := len(h.subs[k])
	h.mu.RUnlock()
	if n > 0 && len(deltas) > 0 {
		h.tryEnqueue(published{key: k, deltas: deltas})
	}
	return n
}

// tryEnqueue adds p to the queue, and starts a drain if none runs, unless the queue
// holds maxQueued events already.
func (h *hub) tryEnqueue(p published) bool {
	h.qmu.Lock()
	defer h.qmu.Unlock()
	if h.queued >= h.maxQueued {
		return false
	}
	h.queue = append(h.queue, p)
	h.queued += len(p.events) + len(p.deltas)
	if !h.draining {
		h.draining = true
		go h.drain()
	}
	return true
}

// drain fans the queue out in order until it is empty.
func (h *hub) drain() {
	for {
		h.qmu.Lock()
		batch := h.queue
		h.queue, h.queued = nil, 0
		if len(batch) == 0 {
			h.draining = false
			h.qmu.Unlock()
			return
		}
		h.qmu.Unlock()
		for _, p := range batch {
			if len(p.deltas) > 0 {
				h.fanOutDeltas(p.key, p.deltas)
			} else {
				h.fanOut(p.key, p.events)
			}
		}
	}
}

// fanOut sends one commit's events of a task to its watchers, each event encoded for
// the API once for all of them.
func (h *hub) fanOut(k watchKey, events []*storagev1.EventRecord) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	subs := h.subs[k]
	if len(subs) == 0 {
		return
	}
	api := make([]Event, len(events))
	for i, ev := range events {
		api[i] = Event{TaskEvent: toAPIEvent(k.taskID, ev), enc: &encoding{}}
	}
	for s := range subs {
		if s.isLagged() {
			continue // cut loose: it reads these from the store
		}
	send:
		for _, ev := range api {
			if !s.offer(ev) {
				s.poke()
				break send
			}
		}
	}
}

// fanOutDeltas sends one PublishDeltas call's deltas to the watchers of a task, each
// encoded once for all of them; a watcher with no room misses them (it is not marked
// lagged: there is nothing to catch up on).
func (h *hub) fanOutDeltas(k watchKey, deltas []*agentplanev1.MessageDelta) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	subs := h.subs[k]
	if len(subs) == 0 {
		return
	}
	msgs := make([]Event, len(deltas))
	for i, d := range deltas {
		msgs[i] = Event{Other: &agentplanev1.WatchTaskResponse{Kind: &agentplanev1.WatchTaskResponse_MessageDelta{MessageDelta: d}}, enc: &encoding{}}
	}
	for s := range subs {
		for _, msg := range msgs {
			s.offer(msg)
		}
	}
}

// Watch is Follow for a caller that needs the messages, not their shared encoding.
func (m *Manager) Watch(ctx context.Context, tenant, taskID string, afterSeq int64, send func(*agentplanev1.WatchTaskResponse) error) error {
	return m.Follow(ctx, tenant, taskID, afterSeq, func(ev Event) error { return send(ev.Response()) })
}

// Follow sends the task's events with sequence > afterSeq to send, in order: first
// those in the store, then live ones as they commit, with no gap and no repeat. When
// the replay has reached the end of the log and the task has not ended it sends one
// caught_up marker; while live it sends the message deltas published for the task
// (PublishDeltas) that follow the last event sent, and a keepalive after
// Config.StreamKeepalive without anything to send. It returns nil after sending the
// event that made the task terminal (at once if the task already ended and the caller
// has seen everything), the error of send, or ctx's error. A missing task is
// NOT_FOUND; afterSeq beyond the task's last event is INVALID_ARGUMENT. A watcher that
// falls more than Config.MaxWatchBuffer events behind, or whose events the hub's
// fan-out queue had no room for, loses no event: it reads the missed events from the
// store (and misses the deltas).
func (m *Manager) Follow(ctx context.Context, tenant, taskID string, afterSeq int64, send func(Event) error) error {
	if afterSeq < 0 {
		return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "after_sequence may not be negative")
	}
	key := watchKey{tenant, taskID}
	// Subscribe before the first read: an event committed after the read is then
	// certain to arrive live (and one committed before it is in the store).
	sub := m.hub.subscribe(key, m.cfg.MaxWatchBuffer)
	defer m.hub.unsubscribe(key, sub)

	last := afterSeq
	first := true
	// catchUp sends what the store holds after last; done means the terminal event has
	// been sent (or the task ended and there is nothing more to send).
	catchUp := func() (done bool, err error) {
		for {
			var page []Event
			var rec *storagev1.TaskRecord
			err := m.store.View(ctx, func(r store.Reader) error {
				page, rec = page[:0], nil
				var err error
				if rec, err = r.GetTask(tenant, taskID); err != nil {
					return err
				}
				return r.ScanEvents(tenant, taskID, last, func(ev *storagev1.EventRecord) (bool, error) {
					page = append(page, Event{TaskEvent: toAPIEvent(taskID, ev)})
					return len(page) < watchPage, nil
				})
			})
			if err != nil {
				return false, err
			}
			if first && afterSeq > rec.GetLastSequence() {
				return false, apierr.InvalidArgument(apierr.ReasonInvalidArgument,
					"after_sequence %d is beyond the last event of task %s (%d)", afterSeq, taskID, rec.GetLastSequence())
			}
			first = false
			for _, ev := range page {
				if err := send(ev); err != nil {
					return false, err
				}
				last = ev.GetSequence()
				if isTerminalEvent(ev.TaskEvent) {
					return true, nil
				}
			}
			if len(page) < watchPage {
				return isTerminal(rec.GetState()) && last >= rec.GetLastSequence(), nil
			}
		}
	}
	if done, err := catchUp(); done || err != nil {
		return err
	}
	if err := send(Event{Other: &agentplanev1.WatchTaskResponse{Kind: &agentplanev1.WatchTaskResponse_CaughtUp{
		CaughtUp: &agentplanev1.StreamCaughtUp{LastSequence: last},
	}}}); err != nil {
		return err
	}
	var keepalive <-chan time.Time
	if m.cfg.StreamKeepalive > 0 {
		t := time.NewTicker(m.cfg.StreamKeepalive)
		defer t.Stop()
		keepalive = t.C
	}
	idle := true // nothing sent since the last tick
	// live handles one message taken from the subscription.
	live := func(ev Event) (done bool, err error) {
		if d := ev.Other.GetMessageDelta(); d != nil {
			// Only a delta that follows what this watcher has seen: one published
			// before events it has since read from the store is stale.
			if d.GetAfterSequence() == last {
				if err := send(ev); err != nil {
					return false, err
				}
				idle = false
			}
			return false, nil
		}
		switch seq := ev.GetSequence(); {
		case seq <= last:
			return false, nil // already sent from the store
		case seq == last+1:
			if err := send(ev); err != nil {
				return false, err
			}
			idle = false
			last = seq
			return isTerminalEvent(ev.TaskEvent), nil
		default:
			// A gap: events were dropped for us. The store has them.
			return catchUp()
		}
	}
	var batch []Event
	for {
		select {
		case <-sub.ready:
			batch = sub.take(batch)
			for _, ev := range batch {
				if done, err := live(ev); done || err != nil {
					return err
				}
			}
		case <-sub.lagged:
			if done, err := catchUp(); done || err != nil {
				return err
			}
			idle = false
		case <-keepalive:
			if idle {
				if err := send(Event{Other: &agentplanev1.WatchTaskResponse{Kind: &agentplanev1.WatchTaskResponse_Keepalive{
					Keepalive: &agentplanev1.StreamKeepalive{Time: timestamppb.New(m.clock.Now())},
				}}}); err != nil {
					return err
				}
			}
			idle = true
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// PublishDeltas hands message deltas to the live watchers of the task ref holds a
// lease on, after fencing the lease like a write (LEASE_LOST, TASK_TERMINAL); nothing
// is stored. Each delta's after_sequence is set to the task's newest sequence. It
// returns how many watchers were live on this replica; on a store shared by several
// replicas (store.Shared) the deltas are broadcast to the watchers of the others too.
func (m *Manager) PublishDeltas(ctx context.Context, ref *agentplanev1.LeaseRef, deltas []*agentplanev1.MessageDelta) (int, error) {
	for i, d := range deltas {
		switch {
		case d.GetMessageId() == "" || len(d.GetMessageId()) > maxIDBytes:
			return 0, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "deltas[%d]: message_id is required (at most %d bytes)", i, maxIDBytes)
		case int64(len(d.GetTextDelta())) > m.cfg.MaxEventBytes:
			return 0, apierr.ResourceExhausted("deltas[%d]: text_delta of %d bytes exceeds the %d-byte limit per event (limits.max_event_bytes)",
				i, len(d.GetTextDelta()), m.cfg.MaxEventBytes)
		}
	}
	tenant, ok := LeaseTenant(ref.GetLeaseId())
	if !ok {
		return 0, leaseLost("lease id %q was not issued by this control plane", ref.GetLeaseId())
	}
	now := m.clock.Now()
	var last int64
	err := m.store.View(ctx, func(r store.Reader) error {
		rec, err := readFenced(r, tenant, ref, now)
		if err != nil {
			return err
		}
		last = rec.GetLastSequence()
		return nil
	})
	if err != nil {
		return 0, err
	}
	out := make([]*agentplanev1.MessageDelta, len(deltas))
	for i, d := range deltas {
		out[i] = &agentplanev1.MessageDelta{MessageId: d.GetMessageId(), TextDelta: d.GetTextDelta(), Node: d.GetNode(), AfterSequence: last}
	}
	n := m.hub.publishDeltas(tenant, ref.GetTaskId(), out)
	if shared, ok := m.store.(store.Shared); ok {
		m.broadcastDeltas(ctx, shared, tenant, ref.GetTaskId(), out)
	}
	return n, nil
}
