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
// Publishing never blocks: a watcher's channel is bounded, and a watcher whose channel
// is full is marked lagged and catches up from the store instead (a delta that does
// not fit is dropped).
type hub struct {
	mu   sync.Mutex
	subs map[watchKey]map[*subscription]struct{}
}

type subscription struct {
	// ch carries events and deltas (WatchTaskResponse arms), in publishing order.
	ch chan *agentplanev1.WatchTaskResponse
	// lagged has a token when events were dropped for this watcher.
	lagged chan struct{}
}

func newHub() *hub { return &hub{subs: map[watchKey]map[*subscription]struct{}{}} }

func (h *hub) subscribe(k watchKey, buffer int) *subscription {
	s := &subscription{ch: make(chan *agentplanev1.WatchTaskResponse, buffer), lagged: make(chan struct{}, 1)}
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

// publish runs after a commit, in commit order, on the committing goroutine.
func (h *hub) publish(tenant, taskID string, events []*storagev1.EventRecord) {
	if len(events) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	subs := h.subs[watchKey{tenant, taskID}]
	if len(subs) == 0 {
		return
	}
	api := make([]*agentplanev1.WatchTaskResponse, len(events))
	for i, ev := range events {
		api[i] = eventResponse(toAPIEvent(taskID, ev))
	}
	for s := range subs {
	send:
		for _, ev := range api {
			select {
			case s.ch <- ev:
			default:
				select {
				case s.lagged <- struct{}{}:
				default:
				}
				break send
			}
		}
	}
}

// publishDelta hands deltas to the live watchers of a task and returns how many there
// were. A watcher whose channel is full misses them.
func (h *hub) publishDelta(tenant, taskID string, deltas []*agentplanev1.MessageDelta) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	subs := h.subs[watchKey{tenant, taskID}]
	for s := range subs {
		for _, d := range deltas {
			select {
			case s.ch <- &agentplanev1.WatchTaskResponse{Kind: &agentplanev1.WatchTaskResponse_MessageDelta{MessageDelta: d}}:
			default:
			}
		}
	}
	return len(subs)
}

func eventResponse(ev *agentplanev1.TaskEvent) *agentplanev1.WatchTaskResponse {
	return &agentplanev1.WatchTaskResponse{Kind: &agentplanev1.WatchTaskResponse_Event{Event: ev}}
}

// Watch sends the task's events with sequence > afterSeq to send, in order: first
// those in the store, then live ones as they commit, with no gap and no repeat. When
// the replay has reached the end of the log and the task has not ended it sends one
// caught_up marker; while live it sends the message deltas published for the task
// (PublishDeltas) that follow the last event sent, and a keepalive after
// Config.StreamKeepalive without anything to send. It returns nil after sending the
// event that made the task terminal (at once if the task already ended and the caller
// has seen everything), the error of send, or ctx's error. A missing task is
// NOT_FOUND; afterSeq beyond the task's last event is INVALID_ARGUMENT. A watcher that
// falls more than Config.MaxWatchBuffer events behind loses no event: it reads the
// missed events from the store (and misses the deltas).
func (m *Manager) Watch(ctx context.Context, tenant, taskID string, afterSeq int64, send func(*agentplanev1.WatchTaskResponse) error) error {
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
			var page []*agentplanev1.TaskEvent
			var rec *storagev1.TaskRecord
			err := m.store.View(ctx, func(r store.Reader) error {
				page, rec = page[:0], nil
				var err error
				if rec, err = r.GetTask(tenant, taskID); err != nil {
					return err
				}
				return r.ScanEvents(tenant, taskID, last, func(ev *storagev1.EventRecord) (bool, error) {
					page = append(page, toAPIEvent(taskID, ev))
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
				if err := send(eventResponse(ev)); err != nil {
					return false, err
				}
				last = ev.GetSequence()
				if isTerminalEvent(ev) {
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
	if err := send(&agentplanev1.WatchTaskResponse{Kind: &agentplanev1.WatchTaskResponse_CaughtUp{
		CaughtUp: &agentplanev1.StreamCaughtUp{LastSequence: last},
	}}); err != nil {
		return err
	}
	var keepalive <-chan time.Time
	if m.cfg.StreamKeepalive > 0 {
		t := time.NewTicker(m.cfg.StreamKeepalive)
		defer t.Stop()
		keepalive = t.C
	}
	idle := true // nothing sent since the last tick
	for {
		select {
		case msg := <-sub.ch:
			if d := msg.GetMessageDelta(); d != nil {
				// Only a delta that follows what this watcher has seen: one published
				// before events it has since read from the store is stale.
				if d.GetAfterSequence() == last {
					if err := send(msg); err != nil {
						return err
					}
					idle = false
				}
				continue
			}
			ev := msg.GetEvent()
			switch seq := ev.GetSequence(); {
			case seq <= last:
				continue // already sent from the store
			case seq == last+1:
				if err := send(msg); err != nil {
					return err
				}
				idle = false
				last = seq
				if isTerminalEvent(ev) {
					return nil
				}
			default:
				// A gap: events were dropped for us. The store has them.
				if done, err := catchUp(); done || err != nil {
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
				if err := send(&agentplanev1.WatchTaskResponse{Kind: &agentplanev1.WatchTaskResponse_Keepalive{
					Keepalive: &agentplanev1.StreamKeepalive{Time: timestamppb.New(m.clock.Now())},
				}}); err != nil {
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
// lease on, after fencing the lease like a write (lease.lost, task.terminal); nothing
// is stored. Each delta's after_sequence is set to the task's newest sequence. It
// returns how many watchers were live.
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
		rec, err := r.GetTask(tenant, ref.GetTaskId())
		if store.IsNotFound(err) {
			return leaseLost("task %q does not exist", ref.GetTaskId())
		}
		if err != nil {
			return err
		}
		if f := fence(rec, ref, now); f != fenceOK {
			return fenceError(rec, ref, f)
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
	return m.hub.publishDelta(tenant, ref.GetTaskId(), out), nil
}
