package worker

import (
	"context"
	"fmt"
	"time"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// minHeartbeatDelay keeps a lease whose deadline is (nearly) past, for example under
// clock skew, from turning the heartbeat into a busy loop.
const minHeartbeatDelay = 10 * time.Millisecond

// heartbeatDelay is how long to wait before the next heartbeat: fraction of the time
// left until deadline. The deadline is the server's clock read on ours; the fraction
// leaves room for skew and for failed attempts.
func heartbeatDelay(now, deadline time.Time, fraction float64) time.Duration {
	return max(time.Duration(float64(deadline.Sub(now))*fraction), minHeartbeatDelay)
}

// heartbeat keeps t's lease until ctx is done. It stops the task (cancels its
// context) when the server says the task was canceled or the lease is gone, or when
// no heartbeat succeeded before the deadline: past it the server may have given the
// task to another runtime, and this one must stop writing.
func (w *Worker) heartbeat(ctx context.Context, t *Task) {
	failures := 0
	for {
		deadline := t.Deadline()
		delay := heartbeatDelay(time.Now(), deadline, w.o.HeartbeatFraction)
		if failures > 0 {
			delay = min(delay, w.o.Backoff.Delay(failures))
		}
		if !sleep(ctx, delay) {
			return
		}
		if t.endedAs() != "" {
			return // the lease was given up; a heartbeat would only be refused
		}
		resp, err := w.beat(ctx, t, deadline)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if cause := stopCause(err); cause != nil {
				t.stop(fmt.Errorf("%w (heartbeat: %v)", cause, err))
				return
			}
			if !time.Now().Before(deadline) {
				t.stop(fmt.Errorf("%w: no heartbeat succeeded before the lease deadline (last error: %v)", ErrLeaseLost, err))
				return
			}
			failures++
			t.log.Warn("heartbeat failed; retrying", "err", err)
			continue
		}
		failures = 0
		if d := resp.GetDeadline(); d != nil {
			t.setDeadline(d.AsTime())
		}
		if resp.GetCanceled() {
			t.stop(fmt.Errorf("%w: %s", ErrCanceled, resp.GetCancelReason()))
			return
		}
	}
}

// beat sends one heartbeat, bounded by the lease deadline (at least a second, so
// that a nearly expired lease still gets a real attempt).
func (w *Worker) beat(ctx context.Context, t *Task, deadline time.Time) (*agentplanev1.HeartbeatResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, max(time.Until(deadline), time.Second))
	defer cancel()
	return w.rt.Heartbeat(ctx, &agentplanev1.HeartbeatRequest{Lease: t.Ref()})
}

// acknowledge sends the first heartbeat of a lease before its handler runs: the
// control plane counts an attempt only for a lease its runtime acknowledged, so a
// lease whose LeaseTasks response was lost costs the task nothing. A heartbeat that
// says the task is gone stops it; one that fails otherwise is left to the heartbeat
// loop (any later call acknowledges the lease too).
func (w *Worker) acknowledge(ctx context.Context, t *Task) {
	resp, err := w.beat(ctx, t, t.Deadline())
	switch {
	case err != nil:
		if cause := stopCause(err); cause != nil {
			t.stop(fmt.Errorf("%w (first heartbeat: %v)", cause, err))
		}
	case resp.GetCanceled():
		t.stop(fmt.Errorf("%w: %s", ErrCanceled, resp.GetCancelReason()))
	case resp.GetDeadline() != nil:
		t.setDeadline(resp.GetDeadline().AsTime())
	}
}
