package tasks

import (
	"fmt"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/store"
)

// TestLiveEventEncodedOnceForAllWatchers: every watcher of a task gets the same value
// for a live event, so its encoding is made once for all of them; an event replayed
// from the store is encoded for its watcher alone.
func TestLiveEventEncodedOnceForAllWatchers(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	l := h.lease(t, "rt") // events 1..3 exist before the watches
	var mu sync.Mutex
	encodes := map[int64]int{}
	got := map[int64][]*byte{}
	encode := func(resp *agentplanev1.WatchTaskResponse) ([]byte, error) {
		ev := resp.GetEvent() // caught_up and keepalives count as sequence 0
		mu.Lock()
		encodes[ev.GetSequence()]++
		mu.Unlock()
		return []byte(fmt.Sprint(ev.GetSequence())), nil
	}
	const watchers = 3
	var done []chan error
	for range watchers {
		ch := make(chan error, 1)
		done = append(done, ch)
		go func() {
			ch <- h.m.Follow(ctx, "acme", task.GetTaskId(), 0, func(ev Event) error {
				b, err := ev.Encoded(encode)
				mu.Lock()
				got[ev.GetSequence()] = append(got[ev.GetSequence()], &b[0])
				mu.Unlock()
				return err
			})
		}()
	}
	count := func(seq int64) int {
		mu.Lock()
		defer mu.Unlock()
		return len(got[seq])
	}
	waitUntil(t, func() bool { return count(3) == watchers })
	if _, err := h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{note("live")}); err != nil {
		t.Fatal(err)
	}
	final, err := h.m.Complete(ctx, ref(l), Request{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range done {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for seq := int64(1); seq <= final.GetLastSequence(); seq++ {
		want := 1
		if seq <= 3 {
			want = watchers
		}
		if encodes[seq] != want || len(got[seq]) != watchers {
			t.Fatalf("event %d: encoded %d times for %d watchers, want %d", seq, encodes[seq], len(got[seq]), want)
		}
		if seq > 3 && (got[seq][0] != got[seq][1] || got[seq][1] != got[seq][2]) {
			t.Fatalf("live event %d: the watchers got different encodings", seq)
		}
	}
}

// TestFanOutKeepsOrderWhenTheQueueIsFull: with the fan-out queue bounded to one event,
// so that publishing finds it full on nearly every commit (and drops the events),
// concurrent writers to several tasks still deliver every event to every watcher of
// its task once, in order.
func TestFanOutKeepsOrderWhenTheQueueIsFull(t *testing.T) {
	h := newHarness(t) // MaxWatchBuffer 8: watchers also fall behind and catch up
	h.m.hub.maxQueued = 1
	const tasks, watchers, reports = 4, 3, 60
	type watched struct {
		l    *agentplanev1.Lease
		cs   []*collector
		done []<-chan error
	}
	var ws []*watched
	for range tasks {
		task := h.start(t, params("acme"))
		w := &watched{l: h.lease(t, "rt")}
		for range watchers {
			c := newCollector()
			w.cs = append(w.cs, c)
			w.done = append(w.done, h.watch("acme", task.GetTaskId(), 0, c))
		}
		ws = append(ws, w)
	}
	var wg sync.WaitGroup
	last := make([]int64, tasks)
	for i, w := range ws {
		wg.Go(func() {
			for j := range reports {
				if _, err := h.m.ReportEvents(ctx, ref(w.l), Request{}, []*agentplanev1.RuntimeEvent{note(fmt.Sprint(j)), note("x")}); err != nil {
					t.Error(err)
					return
				}
			}
			final, err := h.m.Complete(ctx, ref(w.l), Request{}, nil)
			if err != nil {
				t.Error(err)
				return
			}
			last[i] = final.GetLastSequence()
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i, w := range ws {
		for j, c := range w.cs {
			if err := <-w.done[j]; err != nil {
				t.Fatal(err)
			}
			checkRun(t, fmt.Sprintf("task %d watcher %d", i, j), c.seqs, 1, last[i])
		}
	}
}

// stallFanOut makes h's fan-out stop taking events from its queue, as a drain the
// scheduler does not run for a while (or one busy with many watchers) would, until
// resume, which a cleanup also calls.
func stallFanOut(t *testing.T, h *hub) (resume func()) {
	t.Helper()
	waitUntil(t, func() bool {
		h.qmu.Lock()
		defer h.qmu.Unlock()
		if h.draining {
			return false
		}
		h.draining = true // publish queues, and leaves the sending to this "drain"
		return true
	})
	var once sync.Once
	resume = func() { once.Do(func() { go h.drain() }) }
	t.Cleanup(resume)
	return resume
}

// TestWritersAreNotHeldByAWatcherOrTheFanOut: with one watcher reading nothing and
// the fan-out not keeping up (its queue full), every write is still acknowledged:
// publish, in the commit's OnCommit hook, never waits. Once the fan-out and the
// watcher go on, both watchers, the stuck one and one that reads everything, get
// every event exactly once, in order, catching up from the store for the events the
// full queue dropped.
func TestWritersAreNotHeldByAWatcherOrTheFanOut(t *testing.T) {
	h := newHarness(t) // MaxWatchBuffer 8
	h.m.hub.maxQueued = 4
	task := h.start(t, params("acme"))
	l := h.lease(t, "rt") // events 1..3
	stuck, reader := newCollector(), newCollector()
	stuck.gate, stuck.blockAfter = make(chan struct{}), 3
	stuckDone := h.watch("acme", task.GetTaskId(), 0, stuck)
	readerDone := h.watch("acme", task.GetTaskId(), 0, reader)
	waitUntil(t, func() bool { return stuck.count() == 3 && reader.count() == 3 })
	resume := stallFanOut(t, h.m.hub)

	const reports = 200 // far more events than the queue and a watcher's channel hold
	final := make(chan int64, 1)
	go func() {
		defer close(final)
		for i := range reports {
			if _, err := h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{note(fmt.Sprint(i))}); err != nil {
				t.Error(err)
				return
			}
		}
		done, err := h.m.Complete(ctx, ref(l), Request{}, nil)
		if err != nil {
			t.Error(err)
			return
		}
		final <- done.GetLastSequence()
	}()
	last := testutil.Within(t, final, "every write acknowledged, with a watcher reading nothing and the fan-out stalled")
	if last == 0 {
		t.FailNow() // the writer failed
	}
	if n := stuck.count(); n != 3 {
		t.Fatalf("the stuck watcher sent %d events, want the 3 replayed", n)
	}

	resume()
	close(stuck.gate)
	for what, w := range map[string]struct {
		c    *collector
		done <-chan error
	}{"the watcher that reads everything": {reader, readerDone}, "the stuck watcher": {stuck, stuckDone}} {
		if err := testutil.Within(t, w.done, what+" to end at the terminal event"); err != nil {
			t.Fatal(err)
		}
		checkRun(t, what, w.c.seqs, 1, last)
	}
}

// TestChangedNeverWaits: Changed, which a shared store's listener calls for another
// replica's commits, returns with the fan-out queue full: the deltas it hands on are
// dropped (they are best effort), and the wake-ups it gives go straight to the
// watchers.
func TestChangedNeverWaits(t *testing.T) {
	h := newHarness(t)
	h.m.hub.maxQueued = 1
	task := h.start(t, params("acme"))
	c := newCollector()
	h.watch("acme", task.GetTaskId(), 0, c)
	waitUntil(t, func() bool { return c.count() == 1 })
	stallFanOut(t, h.m.hub)
	data, err := proto.Marshal(&agentplanev1.PublishDeltasRequest{Deltas: []*agentplanev1.MessageDelta{{MessageId: "m", TextDelta: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 10 {
			h.m.Changed(store.Change{Kind: store.ChangeMessage, Tenant: "acme", TaskID: task.GetTaskId(), Data: data})
			h.m.Changed(store.Change{Kind: store.ChangeEvents, Tenant: "acme", TaskID: task.GetTaskId()})
		}
	}()
	testutil.Within(t, done, "Changed to return with the fan-out queue full")
}
