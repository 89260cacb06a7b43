package tasks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/apierr"
)

// collector gathers what a Watch sends.
type collector struct {
	mu   sync.Mutex
	seqs []int64
	// gate, when set, blocks every send after the first blockAfter until it is closed
	// (a client that stops reading).
	gate       chan struct{}
	blockAfter int
	// seen is signalled after each send.
	seen chan struct{}
}

func newCollector() *collector { return &collector{seen: make(chan struct{}, 1<<16)} }

// send collects the events of a watch (other messages are not counted).
func (c *collector) send(msg *agentplanev1.WatchTaskResponse) error {
	ev := msg.GetEvent()
	if ev == nil {
		return nil
	}
	if c.gate != nil && c.count() >= c.blockAfter {
		<-c.gate
	}
	c.mu.Lock()
	c.seqs = append(c.seqs, ev.GetSequence())
	c.mu.Unlock()
	c.seen <- struct{}{}
	return nil
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seqs)
}

// checkRun checks that seqs is exactly from..to with no gap and no repeat.
func checkRun(t *testing.T, what string, seqs []int64, from, to int64) {
	t.Helper()
	if int64(len(seqs)) != to-from+1 {
		t.Fatalf("%s: got %d events %v, want %d..%d", what, len(seqs), seqs, from, to)
	}
	for i, s := range seqs {
		if s != from+int64(i) {
			t.Fatalf("%s: sequence %v is not %d..%d", what, seqs, from, to)
		}
	}
}

func (h *harness) watch(tenant, id string, after int64, c *collector) <-chan error {
	done := make(chan error, 1)
	go func() { done <- h.m.Watch(ctx, tenant, id, after, c.send) }()
	return done
}

func TestWatchReplaysThenFollowsAndEnds(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	l := h.lease(t, "rt") // events 1..3 exist before the watch
	c := newCollector()
	done := h.watch("acme", task.GetTaskId(), 0, c)
	waitUntil(t, func() bool { return c.count() == 3 })
	for i := range 5 {
		if _, err := h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{note(fmt.Sprint(i)), note("x")}); err != nil {
			t.Fatal(err)
		}
	}
	done2, err := h.m.Complete(ctx, ref(l), Request{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.Within(t, done, "Watch to end at the terminal event"); err != nil {
		t.Fatalf("Watch = %v, want nil after the terminal event", err)
	}
	checkRun(t, "watch from 0", c.seqs, 1, done2.GetLastSequence())

	// A client reconnecting after sequence 6 gets exactly the rest.
	again := newCollector()
	if err := h.m.Watch(ctx, "acme", task.GetTaskId(), 6, again.send); err != nil {
		t.Fatal(err)
	}
	checkRun(t, "reconnect after 6", again.seqs, 7, done2.GetLastSequence())
	// One that has seen everything of an ended task returns at once.
	none := newCollector()
	if err := h.m.Watch(ctx, "acme", task.GetTaskId(), done2.GetLastSequence(), none.send); err != nil || none.count() != 0 {
		t.Fatalf("watch of an ended task from its end = %v, %d events", err, none.count())
	}
}

func TestWatchReconnectMidStream(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	l := h.lease(t, "rt")
	c1 := newCollector()
	c1ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.m.Watch(c1ctx, "acme", task.GetTaskId(), 0, c1.send) }()
	report := func(n int) {
		for range n {
			if _, err := h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{note("n")}); err != nil {
				t.Error(err)
			}
		}
	}
	report(10)
	waitUntil(t, func() bool { return c1.count() == 13 })
	cancel()
	if err := testutil.Within(t, done, "a canceled Watch to return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled watch = %v", err)
	}
	c1.mu.Lock()
	lastSeen := c1.seqs[len(c1.seqs)-1]
	c1.mu.Unlock()
	// Writes go on while the client is away, and while it reconnects.
	report(5)
	c2 := newCollector()
	done2 := h.watch("acme", task.GetTaskId(), lastSeen, c2)
	report(5)
	final, err := h.m.Complete(ctx, ref(l), Request{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.Within(t, done2, "the reconnected Watch to end at the terminal event"); err != nil {
		t.Fatal(err)
	}
	all := append(append([]int64{}, c1.seqs...), c2.seqs...)
	checkRun(t, "both connections", all, 1, final.GetLastSequence())
}

// TestSlowWatcherDoesNotBlock: a watcher that stops reading must not hold up writers
// or other watchers, and must still get every event, in order, once it reads again.
func TestSlowWatcherDoesNotBlock(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxWatchBuffer = 4 })
	task := h.start(t, params("acme"))
	l := h.lease(t, "rt")
	slow, fast := newCollector(), newCollector()
	slow.gate, slow.blockAfter = make(chan struct{}), 3
	slowDone := h.watch("acme", task.GetTaskId(), 0, slow)
	fastDone := h.watch("acme", task.GetTaskId(), 0, fast)
	waitUntil(t, func() bool { return fast.count() == 3 && slow.count() == 3 })

	const reports = 200
	for i := range reports {
		if _, err := h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{note(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	final, err := h.m.Complete(ctx, ref(l), Request{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Every write went through with the slow watcher stuck on its first live event, and
	// the fast watcher saw everything.
	if err := testutil.Within(t, fastDone, "the fast watcher to end at the terminal event"); err != nil {
		t.Fatal(err)
	}
	checkRun(t, "fast watcher", fast.seqs, 1, final.GetLastSequence())
	if n := slow.count(); n != 3 {
		t.Fatalf("slow watcher got %d events while blocked, want the 3 replayed", n)
	}
	close(slow.gate)
	if err := testutil.Within(t, slowDone, "the slow watcher to end at the terminal event"); err != nil {
		t.Fatal(err)
	}
	checkRun(t, "slow watcher", slow.seqs, 1, final.GetLastSequence())
}

func TestWatchErrors(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	for name, tc := range map[string]struct {
		tenant string
		after  int64
		code   codes.Code
		reason apierr.Reason
	}{
		"other tenant":     {"beta", 0, codes.NotFound, apierr.ReasonTaskNotFound},
		"negative":         {"acme", -1, codes.InvalidArgument, 0},
		"beyond the end":   {"acme", 5, codes.InvalidArgument, 0},
		"other tenant end": {"beta", 5, codes.NotFound, apierr.ReasonTaskNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			err := h.m.Watch(ctx, tc.tenant, task.GetTaskId(), tc.after, func(*agentplanev1.WatchTaskResponse) error {
				t.Fatal("sent an event")
				return nil
			})
			wantErr(t, err, tc.code, tc.reason)
		})
	}
	boom := errors.New("client gone")
	if err := h.m.Watch(ctx, "acme", task.GetTaskId(), 0, func(*agentplanev1.WatchTaskResponse) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Watch = %v, want the send error", err)
	}
	// Nothing stays subscribed after watches end.
	waitUntil(t, func() bool { h.m.hub.mu.Lock(); defer h.m.hub.mu.Unlock(); return len(h.m.hub.subs) == 0 })
}

// TestWatchDeltasFollowTheLog: a live watcher gets caught_up once, then deltas in the
// order they were published relative to events; deltas are refused without a message
// id or under a stale lease, and reach nobody when nobody watches.
func TestWatchDeltasFollowTheLog(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	l := h.lease(t, "rt")
	delta := func(id, text string) []*agentplanev1.MessageDelta {
		return []*agentplanev1.MessageDelta{{MessageId: id, TextDelta: text}}
	}
	if n, err := h.m.PublishDeltas(ctx, ref(l), delta("m0", "x")); err != nil || n != 0 {
		t.Fatalf("PublishDeltas without watchers = %d, %v", n, err)
	}
	_, err := h.m.PublishDeltas(ctx, ref(l), delta("", "x"))
	wantErr(t, err, codes.InvalidArgument, apierr.ReasonInvalidArgument)
	stale := ref(l)
	stale.Epoch++
	_, err = h.m.PublishDeltas(ctx, stale, delta("m0", "x"))
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonLeaseLost)

	msgs := make(chan *agentplanev1.WatchTaskResponse, 64)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- h.m.Watch(wctx, "acme", task.GetTaskId(), 0, func(m *agentplanev1.WatchTaskResponse) error { msgs <- m; return nil })
	}()
	var last int64
	for m := range msgs {
		if m.GetCaughtUp() != nil {
			last = m.GetCaughtUp().GetLastSequence()
			break
		}
	}
	if n, err := h.m.PublishDeltas(ctx, ref(l), delta("m1", "a")); err != nil || n != 1 {
		t.Fatalf("PublishDeltas = %d, %v; want 1 watcher", n, err)
	}
	seq, err := h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{note("m1 done")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.m.PublishDeltas(ctx, ref(l), delta("m2", "b")); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 3 {
		m := <-msgs
		switch {
		case m.GetMessageDelta() != nil:
			d := m.GetMessageDelta()
			got = append(got, fmt.Sprintf("%s@%d", d.GetMessageId(), d.GetAfterSequence()))
		case m.GetEvent() != nil:
			got = append(got, fmt.Sprint("event@", m.GetEvent().GetSequence()))
		case m.GetCaughtUp() != nil:
			t.Fatal("a second caught_up")
		}
	}
	want := []string{fmt.Sprint("m1@", last), fmt.Sprint("event@", seq), fmt.Sprint("m2@", seq)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("watcher got %v, want %v", got, want)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}
