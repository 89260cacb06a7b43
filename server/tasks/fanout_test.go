package tasks

import (
	"fmt"
	"sync"
	"testing"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
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

// TestFanOutKeepsOrderWhenPublishWaits: with the fan-out queue bounded to one event,
// so that publishing waits on nearly every commit, concurrent writers to several tasks
// still deliver every event to every watcher of its task once, in order.
func TestFanOutKeepsOrderWhenPublishWaits(t *testing.T) {
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
