package worker

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is an exponential backoff with jitter for transient errors.
type Backoff struct {
	// Initial is the first delay; default 100ms.
	Initial time.Duration
	// Max caps the delay; default 5s.
	Max time.Duration
}

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = 100 * time.Millisecond
	}
	if b.Max <= 0 {
		b.Max = 5 * time.Second
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	return b
}

// Delay is the wait before retry number failures (from 1). It doubles per failure up
// to Max and is jittered into [d/2, d], so runtimes that lost the same server do not
// come back in lockstep.
func (b Backoff) Delay(failures int) time.Duration {
	b = b.withDefaults()
	d := b.Initial
	for i := 1; i < failures && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	half := d / 2
	return half + rand.N(d-half+1)
}

// sleep waits d or until ctx is done; it reports whether the full wait elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
