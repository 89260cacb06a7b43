package tasks

import (
	"context"
	"sync"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// watchPage is how many events a watcher reads from the store per transaction, so a
// read transaction is never held while a client is slow to receive.
const watchPage = 256

type watchKey struct{ tenant, taskID string }

// hub fans committed events out to live watchers. Publishing never blocks: a
// watcher's channel is bounded, and a watcher whose channel is full is marked lagged
// and catches up from the store instead.
type hub struct {
	mu   sync.Mutex
	subs map[watchKey]map[*subscription]struct{}
}

type subscription struct {
	ch chan *agentplanev1.TaskEvent
	// lagged has a token when events were dropped for this watcher.
	lagged chan struct{}
}

func newHub() *hub { return &hub{subs: map[watchKey]map[*subscription]struct{}{}} }

func (h *hub) subscribe(k watchKey, buffer int) *subscription {
	s := &subscription{ch: make(chan *agentplanev1.TaskEvent, buffer), lagged: make(chan struct{}, 1)}
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
	api := make([]*agentplanev1.TaskEvent, len(events))
	for i, ev := range events {
		api[i] = toAPIEvent(taskID, ev)
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

// Watch sends the task's events with sequence > afterSeq to send, in order: first
// those in the store, then live ones as they commit, with no gap and no repeat. It
// returns nil after sending the event that made the task terminal (at once if the task
// already ended and the caller has seen everything), the error of send, or ctx's
// error. A missing task is NOT_FOUND; afterSeq beyond the task's last event is
// INVALID_ARGUMENT. A watcher that falls more than Config.MaxWatchBuffer events behind
// loses nothing: it reads the missed events from the store.
func (m *Manager) Watch(ctx context.Context, tenant, taskID string, afterSeq int64, send func(*agentplanev1.TaskEvent) error) error {
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
				if err := send(ev); err != nil {
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
	for {
		select {
		case ev := <-sub.ch:
			switch seq := ev.GetSequence(); {
			case seq <= last:
				continue // already sent from the store
			case seq == last+1:
				if err := send(ev); err != nil {
					return err
				}
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
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
