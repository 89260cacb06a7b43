package tasks

import (
	"sync"

	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// interruptTaps are the listeners of a tenant's interrupts (the console's live
// inbox): each is told, without the details, that an interrupt of the tenant was
// raised or resolved. A tap is a channel of one token, so a burst of changes costs a
// listener one wake-up and the committing writer one non-blocking send per tap.
type interruptTaps struct {
	mu   sync.RWMutex
	taps map[string]map[chan struct{}]struct{}
}

// WatchInterrupts returns a channel that receives a token (coalesced: at most one
// waits) after a commit that raises or resolves an interrupt of tenant, and the
// function that stops it. On a store shared with other replicas (store.Shared) a write
// another replica committed to a task of tenant wakes it too (Changed cannot tell
// which events it appended), as does a store.ChangeAll. It tells nothing of what
// changed: the listener reads that through the API, under its caller's credentials.
func (m *Manager) WatchInterrupts(tenant string) (<-chan struct{}, func()) {
	return m.hub.itaps.add(tenant)
}

func (t *interruptTaps) add(tenant string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	t.mu.Lock()
	if t.taps == nil {
		t.taps = map[string]map[chan struct{}]struct{}{}
	}
	if t.taps[tenant] == nil {
		t.taps[tenant] = map[chan struct{}]struct{}{}
	}
	t.taps[tenant][ch] = struct{}{}
	t.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			delete(t.taps[tenant], ch)
			if len(t.taps[tenant]) == 0 {
				delete(t.taps, tenant)
			}
		})
	}
}

// publish wakes tenant's taps when events raise or resolve an interrupt. It never blocks.
func (t *interruptTaps) publish(tenant string, events []*storagev1.EventRecord) {
	for _, ev := range events {
		if p := ev.GetEvent(); p.GetInterruptRaised() != nil || p.GetInterruptResolved() != nil {
			t.wake(tenant)
			return
		}
	}
}

// wake sends every tap of tenant a token, unless it holds one already.
func (t *interruptTaps) wake(tenant string) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for ch := range t.taps[tenant] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// wakeAll is wake for every tenant.
func (t *interruptTaps) wakeAll() {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, taps := range t.taps {
		for ch := range taps {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}
