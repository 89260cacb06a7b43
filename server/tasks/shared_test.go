package tasks

import (
	"testing"

	"github.com/agentplane/agentplane/server/store"
)

// TestQueueSignalWakesOnlyItsQueues: a task queued in one queue wakes the long polls
// serving that queue and leaves the others asleep; ChangeAll wakes every poll.
func TestQueueSignalWakesOnlyItsQueues(t *testing.T) {
	var s queueSignal
	gpu, done1 := s.register([]string{"gpu", "batch"})
	defer done1()
	def, done2 := s.register([]string{store.DefaultQueue})
	defer done2()
	woken := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}

	s.broadcast("batch")
	if !woken(gpu) || woken(def) {
		t.Fatal("a task queued in batch must wake the poll serving gpu and batch, and only it")
	}
	s.broadcast("")
	if woken(gpu) || !woken(def) {
		t.Fatal("a task queued in the default queue must wake only the default queue's poll")
	}
	s.broadcastAll()
	if !woken(gpu) || !woken(def) {
		t.Fatal("broadcastAll must wake every poll")
	}
	done1()
	if n := s.waiting("gpu"); n != 0 {
		t.Fatalf("%d polls still registered under gpu after unregistering", n)
	}
}
