package agent

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/agentplane/agentplane/client/worker"
)

// The runtime repeats failed model requests itself (the SDK's own retries are off) so
// that every retry is logged and counted: which attempt failed, with what status, and
// how long the runtime waits before the next.

// modelBackoff is the wait before a retry when the server names none (Retry-After):
// 0.5 s doubling to 8 s, jittered.
var modelBackoff = worker.Backoff{Initial: 500 * time.Millisecond, Max: 8 * time.Second}

// maxRetryAfter caps a server's Retry-After: a longer wait fails the call (the task is
// handed back to the queue, runtime.model_error with retry) instead of holding the
// lease idle.
const maxRetryAfter = time.Minute

// retryDrainBytes is how much of a failed attempt's body is read (and dropped) so the
// connection can be reused.
const retryDrainBytes = 64 << 10

// retrying is the middleware that repeats a model request up to maxRetries times
// after a 408, 409, 429, 5xx answer or a transport error, waiting the server's
// Retry-After (Retry-After-Ms, seconds or an HTTP date) or else modelBackoff. Each
// retry is a warning in the log (attempt, status, wait) and counted by status. A wait
// past maxRetryAfter or the call's deadline is not waited: the failure is returned.
func (tu *turn) retrying(maxRetries int) option.Middleware {
	return func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		for attempt := 1; ; attempt++ {
			res, err := next(req)
			status := retryStatus(res, err)
			ctx := req.Context()
			if status == "" || attempt > maxRetries || ctx.Err() != nil || req.GetBody == nil {
				return res, err
			}
			wait, ok := retryAfter(res)
			if !ok {
				wait = modelBackoff.Delay(attempt)
			}
			if dl, has := ctx.Deadline(); wait > maxRetryAfter || (has && time.Until(dl) < wait) {
				tu.log.Warn("model call failed; the server's wait is too long to retry", "model", tu.model, "attempt", attempt, "status", status, "retry_after", wait)
				return res, err
			}
			body, berr := req.GetBody()
			if berr != nil {
				return res, err
			}
			tu.log.Warn("model call failed; retrying", "model", tu.model, "attempt", attempt, "status", status, "wait", wait, "err", attemptError(res, err))
			tu.r.Telemetry.ModelRetry(tu.model, status)
			if res != nil {
				_, _ = io.CopyN(io.Discard, res.Body, retryDrainBytes)
				_ = res.Body.Close()
			}
			select {
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			case <-time.After(wait):
			}
			req = req.Clone(ctx)
			req.Body = body
		}
	}
}

// retryStatus is the label of a failed attempt worth repeating ("429", "503",
// "transport"), "" for one that is not.
func retryStatus(res *http.Response, err error) string {
	switch {
	case err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return ""
	case err != nil:
		return "transport"
	case res == nil:
		return ""
	}
	switch c := res.StatusCode; {
	case c == http.StatusRequestTimeout, c == http.StatusConflict, c == http.StatusTooManyRequests, c >= 500 && c <= 599:
		return strconv.Itoa(c)
	}
	return ""
}

// retryAfter is the wait a failed answer asks for, from Retry-After-Ms or Retry-After
// (seconds or an HTTP date).
func retryAfter(res *http.Response) (time.Duration, bool) {
	if res == nil {
		return 0, false
	}
	// A day stands for any longer wait (it is over maxRetryAfter, and fits a Duration).
	seconds := func(v float64) time.Duration { return time.Duration(math.Min(v, 86400) * float64(time.Second)) }
	if v, err := strconv.ParseFloat(res.Header.Get("Retry-After-Ms"), 64); err == nil && v >= 0 {
		return seconds(v / 1000), true
	}
	h := res.Header.Get("Retry-After")
	if v, err := strconv.ParseFloat(h, 64); err == nil && v >= 0 {
		return seconds(v), true
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(0, time.Until(t)), true
	}
	return 0, false
}

// attemptError says what a failed attempt answered, for the log: the transport error,
// or the status line.
func attemptError(res *http.Response, err error) string {
	if err != nil {
		return err.Error()
	}
	return res.Status
}
