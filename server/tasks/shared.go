package tasks

import (
	"context"
	"sync"

	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/store"
)

// Changed wakes what waits in this Manager for a write another control plane
// committed to the shared store (store.Shared): the watchers of a task whose log grew
// read it from the store, and the long polls of a queue that got a task look again.
// A store.ChangeAll wakes every watcher and every long poll. It never blocks.
func (m *Manager) Changed(c store.Change) {
	switch c.Kind {
	case store.ChangeEvents:
		m.hub.wake(watchKey{c.Tenant, c.TaskID})
		m.hub.itaps.wake(c.Tenant)
	case store.ChangeQueued:
		m.work.broadcast(c.Queue)
	case store.ChangeMessage:
		var msg agentplanev1.PublishDeltasRequest
		if err := proto.Unmarshal(c.Data, &msg); err != nil {
			m.log.Warn("tasks: ignoring message deltas another replica broadcast", "err", err)
			return
		}
		m.hub.publishDeltas(c.Tenant, c.TaskID, msg.GetDeltas())
	case store.ChangeAll:
		m.hub.wakeAll()
		m.hub.itaps.wakeAll()
		m.work.broadcastAll()
	}
}

// broadcastDeltas hands deltas to the watchers of the task on the other replicas
// sharing the store, in as few broadcasts as fit store.MaxBroadcast (a delta too large
// for one is left out: deltas are best effort, and the message they make is in the
// log once reported). Their after_sequence travels with them, so a watcher there
// drops those its log has overtaken, as here.
func (m *Manager) broadcastDeltas(ctx context.Context, shared store.Shared, tenant, taskID string, deltas []*agentplanev1.MessageDelta) {
	var batch []*agentplanev1.MessageDelta
	size := 0
	flush := func() {
		if len(batch) == 0 {
			return
		}
		data, err := proto.Marshal(&agentplanev1.PublishDeltasRequest{Deltas: batch})
		if err == nil {
			err = shared.Broadcast(ctx, tenant, taskID, data)
		}
		if err != nil {
			m.log.Warn("tasks: broadcasting message deltas to the other replicas", "task", taskID, "err", err)
		}
		batch, size = nil, 0
	}
	for _, d := range deltas {
		// A delta's share of the container: its size and a tag and length prefix.
		n := proto.Size(d) + 8
		if n > store.MaxBroadcast {
			continue
		}
		if size+n > store.MaxBroadcast {
			flush()
		}
		batch = append(batch, d)
		size += n
	}
	flush()
}

// wake makes every watcher of k read the store, as if it had lagged: events another
// process committed reach its watchers that way.
func (h *hub) wake(k watchKey) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for s := range h.subs[k] {
		s.poke()
	}
}

// wakeAll is wake for every watched task.
func (h *hub) wakeAll() {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, subs := range h.subs {
		for s := range subs {
			s.poke()
		}
	}
}

func (s *subscription) poke() {
	select {
	case s.lagged <- struct{}{}:
	default:
	}
}

// isLagged says whether s has a catch-up from the store ahead of it: live events are
// of no use to it until then (it would skip them, having read them from the store).
func (s *subscription) isLagged() bool { return len(s.lagged) > 0 }

// queueSignal wakes the long polls of a run queue: a poll registers one channel
// under each queue it serves, and a broadcast to a queue leaves a token in the
// channels registered under it. A token that arrives while the poll is looking makes
// it look again, so no wake-up is lost between a look and the wait.
type queueSignal struct {
	mu sync.Mutex
	m  map[string]map[chan struct{}]struct{}
}

// register returns the channel that a broadcast to any of queues wakes, and the
// function that unregisters it.
func (s *queueSignal) register(queues []string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]map[chan struct{}]struct{}{}
	}
	for _, q := range queues {
		if s.m[q] == nil {
			s.m[q] = map[chan struct{}]struct{}{}
		}
		s.m[q][ch] = struct{}{}
	}
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, q := range queues {
			delete(s.m[q], ch)
			if len(s.m[q]) == 0 {
				delete(s.m, q)
			}
		}
	}
}

// broadcast wakes the polls that serve queue ("" is store.DefaultQueue).
func (s *queueSignal) broadcast(queue string) {
	if queue == "" {
		queue = store.DefaultQueue
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.m[queue] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// broadcastAll wakes every poll.
func (s *queueSignal) broadcastAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, chs := range s.m {
		for ch := range chs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// waiting is the number of polls registered under queue, for tests.
func (s *queueSignal) waiting(queue string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m[queue])
}
