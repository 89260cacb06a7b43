package worker

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/server/apierr"
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
// why: ErrLeaseLost for a fenced write refused with lease.lost, ErrCanceled for a
// task that already ended (task.terminal: it was canceled under us). Otherwise nil.
func stopCause(err error) error {
	if status.Code(err) != codes.FailedPrecondition {
		return nil
	}
	switch apierr.InfoOf(err).GetReason() {
	case apierr.ReasonLeaseLost:
		return ErrLeaseLost
	case apierr.ReasonTaskTerminal:
		return ErrCanceled
	}
	return nil
}

// IsTransient reports whether a failed idempotent call (a poll, a read, a stream) is
// worth repeating after a backoff: the server may be restarting or overloaded.
func IsTransient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted,
		codes.Internal, codes.Unknown:
		return true
	}
	return false
}

// writeAttempts is how many times a Task call is made when it fails with
// UNAVAILABLE or DEADLINE_EXCEEDED (see Task.write).
const writeAttempts = 4

// lostOnTheWay reports whether err may mean the call, or its response, was lost on the
// way: UNAVAILABLE or DEADLINE_EXCEEDED. Repeating such a call is safe only because
// every call a Task makes is idempotent (request ids, or by nature).
func lostOnTheWay(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}
