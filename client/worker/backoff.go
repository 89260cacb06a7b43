package worker

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/agentplane/agentplane/client"
)

// Backoff is an exponential backoff with jitter for transient errors. Its defaults are
// the retry policy's of every agentplane SDK (client.RetryBackoffBase and
// client.RetryBackoffMax, jittered by client.RetryJitter; docs/clients.md, "Retries,
// request ids and reconnection"), which the TypeScript and Python workers use too.
type Backoff struct {
	// Initial is the first delay; default client.RetryBackoffBase (100ms).
	Initial time.Duration
	// Max caps the delay; default client.RetryBackoffMax (2s).
	Max time.Duration
}

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = client.RetryBackoffBase
	}
	if b.Max <= 0 {
		b.Max = client.RetryBackoffMax
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	return b
}

// Delay is the wait before retry number failures (from 1). It doubles per failure up
// to Max and is jittered into [(1-client.RetryJitter)*d, d] ([d/2, d]), so runtimes
// that lost the same server do not come back in lockstep.
func (b Backoff) Delay(failures int) time.Duration {
	b = b.withDefaults()
	d := b.Initial
	for i := 1; i < failures && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	low := time.Duration(float64(d) * (1 - client.RetryJitter))
	return low + rand.N(d-low+1)
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
