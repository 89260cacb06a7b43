package server

import (
	"context"
	"runtime"
	"testing"
)

// TestDecodeGate: what does not fit waits in arrival order, a waiter whose context
// ends leaves, and memory is handed back when the gate falls idle after a full load.
func TestDecodeGate(t *testing.T) {
	g := newDecodeGate(10)
	freed := make(chan struct{}, 4)
	g.free = func() { freed <- struct{}{} }
	ctx := context.Background()

	r1, err := g.acquire(ctx, 6)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 2)
	go func() {
		r, err := g.acquire(ctx, 100) // capped at the gate's size: waits for all of it
		if err != nil {
			t.Error(err)
			return
		}
		got <- "big"
		r()
	}()
	// Wait until the big one is queued, then a small one that would fit must queue
	// behind it (FIFO), and give up when its context ends.
	for {
		g.mu.Lock()
		n := g.waiters.Len()
		g.mu.Unlock()
		if n == 1 {
			break
		}
		runtime.Gosched()
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := g.acquire(cctx, 1); err == nil {
		t.Fatal("a waiter whose context ended was admitted ahead of an earlier one")
	}
	r1()
	if s := <-got; s != "big" {
		t.Fatal(s)
	}
	<-freed // 16 admitted over a size of 10, then idle: memory handed back
	r2, err := g.acquire(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	r2()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.used != 0 || g.waiters.Len() != 0 || g.decoded != 3 {
		t.Fatalf("used %d, waiters %d, decoded %d", g.used, g.waiters.Len(), g.decoded)
	}
}
