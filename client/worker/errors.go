package worker

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/api/reasons"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

var (
	// ErrLeaseLost is the cause of a task context canceled because this runtime no
	// longer holds the lease; writes under it are refused.
	ErrLeaseLost = errors.New("worker: lease lost")
	// ErrCanceled is the cause of a task context canceled because a caller canceled
	// the task.
	ErrCanceled = errors.New("worker: task canceled")
	// ErrStopping is the cause of a task context canceled because the worker stopped
	// and the drain deadline passed.
	ErrStopping = errors.New("worker: worker stopping")
	// ErrSuspended is returned by Task.ToolCall after it gave the lease up to wait
	// durably for a decision. A handler returns it (or nil); the task resumes on a
	// later lease.
	ErrSuspended = errors.New("worker: task suspended until an interrupt is decided")
	// ErrEnded is returned by a Task method called after the task was completed,
	// failed, paused or suspended by this runtime.
	ErrEnded = errors.New("worker: task already ended by this runtime")
)

// StopReason names why a task's context was canceled, with the names every agentplane
// SDK uses (TypeScript's TaskStopped.kind, Python's task.stop_reason): StopLeaseLost
// (its cause wraps ErrLeaseLost), StopCanceled (ErrCanceled) or StopStopping
// (ErrStopping); "" while the task runs, or for a context canceled otherwise.
func StopReason(ctx context.Context) string {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, ErrLeaseLost):
		return StopLeaseLost
	case errors.Is(cause, ErrCanceled):
		return StopCanceled
	case errors.Is(cause, ErrStopping):
		return StopStopping
	}
	return ""
}

// Failure is an error a Handler returns to choose how its task fails.
type Failure struct {
	// Reason is machine-readable, for example "tool.unavailable".
	Reason string
	// Message is for people.
	Message string
	// Retry returns the task to the queue instead of failing it.
	Retry bool
}

func (f *Failure) Error() string {
	return fmt.Sprintf("task failed (%s): %s", f.Reason, f.Message)
}

// stopCause says whether err means this runtime must stop working on the task, and
// why: ErrLeaseLost for a fenced write refused with LEASE_LOST, ErrCanceled for a
// task that already ended (TASK_TERMINAL: it was canceled under us). Otherwise nil.
func stopCause(err error) error {
	if status.Code(err) != codes.FailedPrecondition {
		return nil
	}
	switch reasons.Of(err) {
	case agentplanev1.ErrorReason_ERROR_REASON_LEASE_LOST:
		return ErrLeaseLost
	case agentplanev1.ErrorReason_ERROR_REASON_TASK_TERMINAL:
		return ErrCanceled
	}
	return nil
}

// IsTransient reports whether a failed idempotent call (a poll, a read, a stream) is
// worth repeating after a backoff. An agentplane error says so itself: it is transient
// when it carries a google.rpc.RetryInfo (its reason is declared retryable), whatever
// its code, so a permanent limit (LIMIT_EXCEEDED, RESOURCE_EXHAUSTED) is not retried
// while LIMIT_CONCURRENCY is. An error without an agentplane ErrorInfo comes from the
// transport or a proxy: it is transient when its code says the server may be
// restarting or unreachable.
func IsTransient(err error) bool {
	if _, retry := reasons.RetryAfter(err); retry {
		return true
	}
	if reasons.Info(err) != nil {
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted, codes.Internal, codes.Unknown:
		return true
	}
	return false
}

// retryable reports whether a failed Task call may succeed if it is made again: its
// call or response may have been lost on the way (UNAVAILABLE, DEADLINE_EXCEEDED), or
// the server says to retry (a RetryInfo: STORE_UNAVAILABLE, SERVER_UNAVAILABLE,
// LIMIT_CONCURRENCY). Repeating such a call is safe only because every call a Task
// makes is idempotent (request ids, or by nature).
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	_, retry := reasons.RetryAfter(err)
	return retry
}
