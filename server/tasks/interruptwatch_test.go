package tasks

import (
	"testing"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

func rec(ev *agentplanev1.TaskEvent) *storagev1.EventRecord { return &storagev1.EventRecord{Event: ev} }

func woken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestWatchInterrupts: a tap hears of its tenant's interrupts being raised and
// resolved, coalesced, and of nothing else: not another tenant's, not other events.
func TestWatchInterrupts(t *testing.T) {
	h := newHub()
	m := &Manager{hub: h}
	acme, stopAcme := m.WatchInterrupts("acme")
	globex, stopGlobex := m.WatchInterrupts("globex")
	defer stopGlobex()

	note := rec(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_Note{Note: &agentplanev1.RuntimeNote{Text: "hi"}}})
	raised := rec(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_InterruptRaised{InterruptRaised: &agentplanev1.InterruptRaised{}}})
	resolved := rec(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_InterruptResolved{InterruptResolved: &agentplanev1.InterruptResolved{}}})

	h.publish("acme", "t1", []*storagev1.EventRecord{note})
	if woken(acme) || woken(globex) {
		t.Fatal("a note woke a tap")
	}
	h.publish("acme", "t1", []*storagev1.EventRecord{note, raised})
	h.publish("acme", "t2", []*storagev1.EventRecord{resolved})
	if !woken(acme) {
		t.Fatal("acme's tap missed its interrupts")
	}
	if woken(acme) {
		t.Fatal("two commits made two tokens: not coalesced")
	}
	if woken(globex) {
		t.Fatal("globex's tap heard acme's interrupt")
	}
	// Another replica's write (store.Shared) wakes the tenant's taps; ChangeAll all of them.
	m.Changed(store.Change{Kind: store.ChangeEvents, Tenant: "globex", TaskID: "t9"})
	if woken(acme) || !woken(globex) {
		t.Fatal("a change of globex's task: wrong taps woken")
	}
	m.Changed(store.Change{Kind: store.ChangeAll})
	if !woken(acme) || !woken(globex) {
		t.Fatal("ChangeAll missed a tap")
	}
	stopAcme()
	stopAcme() // twice is harmless
	h.publish("acme", "t1", []*storagev1.EventRecord{raised})
	if woken(acme) {
		t.Fatal("a stopped tap was woken")
	}
	if len(h.itaps.taps["acme"]) != 0 {
		t.Fatal("a stopped tap is still held")
	}
}
