package server

import (
	"container/list"
	"context"
	"runtime/debug"
	"sync"
)

// decodeGate bounds the spec documents decoded at once: a FIFO semaphore weighted
// by each document's decode weight (spec.DecodeWeight), so that a burst of large or
// dense documents is queued instead of decoded all together. A call waits at most
// until its context ends.
//
// Decoding a large document leaves a heap that the Go runtime returns to the system
// only slowly (measured: a burst of 16 worst-case documents left the RSS at its peak
// for minutes), so when the gate falls idle after at least its size in weight was
// decoded, the memory is handed back at once (debug.FreeOSMemory, in the background).
type decodeGate struct {
	mu      sync.Mutex
	size    int64
	used    int64
	waiters list.List // of *decodeWaiter, in arrival order
	// decoded is the weight admitted since memory was last handed back; freeing is
	// true while that runs.
	decoded int64
	freeing bool
	// free hands memory back; debug.FreeOSMemory unless a test replaces it.
	free func()
}

type decodeWaiter struct {
	n     int64
	ready chan struct{}
}

func newDecodeGate(size int64) *decodeGate {
	return &decodeGate{size: size, free: debug.FreeOSMemory}
}

// acquire waits until n (capped at the gate's size) fits, and returns the release.
func (g *decodeGate) acquire(ctx context.Context, n int64) (release func(), err error) {
	n = min(max(n, 1), g.size)
	release = func() { g.release(n) }
	g.mu.Lock()
	if g.waiters.Len() == 0 && g.used+n <= g.size {
		g.used += n
		g.decoded += n
		g.mu.Unlock()
		return release, nil
	}
	w := &decodeWaiter{n: n, ready: make(chan struct{})}
	el := g.waiters.PushBack(w)
	g.mu.Unlock()
	select {
	case <-w.ready:
		return release, nil
	case <-ctx.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		select {
		case <-w.ready: // granted while giving up: hand it back
			g.used -= n
		default:
			g.waiters.Remove(el)
		}
		g.wake()
		return nil, ctx.Err()
	}
}

func (g *decodeGate) release(n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.used -= n
	g.wake()
	if g.used == 0 && g.decoded >= g.size && !g.freeing {
		g.decoded, g.freeing = 0, true
		go func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			for {
				g.mu.Unlock()
				g.free()
				g.mu.Lock()
				// A full load that ended while memory was being handed back.
				if g.used != 0 || g.decoded < g.size {
					break
				}
				g.decoded = 0
			}
			g.freeing = false
		}()
	}
}

// wake admits waiters from the front while they fit. g.mu is held.
func (g *decodeGate) wake() {
	for e := g.waiters.Front(); e != nil; e = g.waiters.Front() {
		w := e.Value.(*decodeWaiter)
		if g.used+w.n > g.size {
			return
		}
		g.used += w.n
		g.decoded += w.n
		g.waiters.Remove(e)
		close(w.ready)
	}
}
