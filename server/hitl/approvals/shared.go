package approvals

import "github.com/agentplane/agentplane/server/store"

// Changed wakes what waits in this Service for a write another control plane
// committed to the shared store (store.Shared): the AwaitDecision calls on an
// interrupt that stopped being pending look at the store again, and a new deadline
// wakes the deadline loop. A store.ChangeAll does both for every waiter. It never
// blocks.
func (s *Service) Changed(c store.Change) {
	switch c.Kind {
	case store.ChangeDecided:
		// No decision in the notice: the waiter reads it from the store.
		s.waiters.notify(waitKey(c.Tenant, c.InterruptID), notice{})
	case store.ChangeDeadline:
		s.kickDeadlines()
	case store.ChangeAll:
		s.waiters.notifyAll(notice{})
		s.kickDeadlines()
	}
}

// notifyAll is notify for every waiter.
func (ws *waiters) notifyAll(n notice) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, set := range ws.m {
		for w := range set {
			select {
			case w.ch <- n:
			default:
			}
		}
	}
}
