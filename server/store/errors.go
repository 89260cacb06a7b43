package store

import (
	"errors"

	"google.golang.org/grpc/codes"

	"github.com/agentplane/agentplane/server/apierr"
)

// ErrTaskNotFound builds the error for a task that a tenant does not have. Absent and
// belonging to another tenant are the same error, by construction (keys start with
// the tenant).
func ErrTaskNotFound(taskID string) error {
	return apierr.NotFound(apierr.ReasonTaskNotFound, "task %q not found", taskID)
}

// ErrInterruptNotFound builds the error for an interrupt a tenant does not have.
func ErrInterruptNotFound(interruptID string) error {
	return apierr.NotFound(apierr.ReasonInterruptNotFound, "interrupt %q not found", interruptID)
}

// ErrObligationNotFound builds the error for a ledger entry a task does not have.
func ErrObligationNotFound(taskID string, ordinal int64) error {
	return apierr.NotFound(apierr.ReasonObligationNotFound, "task %q has no obligation #%d", taskID, ordinal)
}

// ErrClosed is returned by every method of a closed store.
func ErrClosed() error {
	return apierr.New(codes.Unavailable, apierr.ReasonUnavailable, "the store is closed")
}

// IsNotFound reports whether err is a NotFound *apierr.Error.
func IsNotFound(err error) bool {
	var e *apierr.Error
	return errors.As(err, &e) && e.Code == codes.NotFound
}

// ErrOutboxNotFound builds the error for a notification the outbox does not hold.
func ErrOutboxNotFound(id string) error {
	return apierr.NotFound(apierr.ReasonWebhookDeliveryNotFound, "webhook notification %q not found", id)
}

// ErrScheduleNotFound builds the error for a schedule a tenant does not have.
func ErrScheduleNotFound(scheduleID string) error {
	return apierr.NotFound(apierr.ReasonScheduleNotFound, "schedule %q not found", scheduleID)
}

// ErrScheduleExists builds the error for creating a schedule under a taken id.
func ErrScheduleExists(scheduleID string) error {
	return apierr.New(codes.AlreadyExists, apierr.ReasonScheduleExists, "schedule %q already exists", scheduleID)
}
