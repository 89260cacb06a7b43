// Package apierr is how the server writes errors: every error a caller can see carries
// a gRPC code and a reason declared in proto/agentplane/v1/errors.proto
// (google.rpc.ErrorInfo, domain "agentplane.dev"; see package api/reasons).
//
// Domain packages return *Error values (or wrap them); the server boundary turns any
// error into a gRPC status with ToStatus. Errors that are not *Error become Internal
// with a generic message, so internal detail never reaches a client; the caller of
// ToStatus logs the original.
package apierr

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/api/reasons"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Domain is the ErrorInfo domain of every agentplane error.
const Domain = reasons.Domain

// Reason is a declared error reason (agentplane.v1.ErrorReason). Only the constants
// below are used: a reason proto/agentplane/v1/errors.proto does not declare cannot
// be written (reasons.Status panics on one, and TestEveryReasonIsDeclared checks the
// sources).
type Reason = reasons.Reason

// The reasons the server produces, by their Go names. What each means, its codes and
// whether it is retryable are declared in proto/agentplane/v1/errors.proto
// (docs/errors.md is generated from it).
const (
	ReasonInvalidArgument         = agentplanev1.ErrorReason_ERROR_REASON_REQUEST_INVALID
	ReasonSpecInvalid             = agentplanev1.ErrorReason_ERROR_REASON_SPEC_INVALID
	ReasonTaskNotFound            = agentplanev1.ErrorReason_ERROR_REASON_TASK_NOT_FOUND
	ReasonTaskTerminal            = agentplanev1.ErrorReason_ERROR_REASON_TASK_TERMINAL
	ReasonTaskState               = agentplanev1.ErrorReason_ERROR_REASON_TASK_WRONG_STATE
	ReasonRequestIDReused         = agentplanev1.ErrorReason_ERROR_REASON_TASK_REQUEST_ID_REUSED
	ReasonInterruptNotFound       = agentplanev1.ErrorReason_ERROR_REASON_INTERRUPT_NOT_FOUND
	ReasonAlreadyResolved         = agentplanev1.ErrorReason_ERROR_REASON_INTERRUPT_ALREADY_RESOLVED
	ReasonArgsMismatch            = agentplanev1.ErrorReason_ERROR_REASON_INTERRUPT_ARGS_MISMATCH
	ReasonEditInvalid             = agentplanev1.ErrorReason_ERROR_REASON_INTERRUPT_EDIT_INVALID
	ReasonLeaseLost               = agentplanev1.ErrorReason_ERROR_REASON_LEASE_LOST
	ReasonLockedKey               = agentplanev1.ErrorReason_ERROR_REASON_CONFIG_LOCKED_KEY
	ReasonComplianceDenied        = agentplanev1.ErrorReason_ERROR_REASON_COMPLIANCE_DENIED
	ReasonRuleNotFound            = agentplanev1.ErrorReason_ERROR_REASON_RULE_NOT_FOUND
	ReasonResourceExhausted       = agentplanev1.ErrorReason_ERROR_REASON_LIMIT_EXCEEDED
	ReasonUnauthenticated         = agentplanev1.ErrorReason_ERROR_REASON_AUTH_UNAUTHENTICATED
	ReasonPermissionDenied        = agentplanev1.ErrorReason_ERROR_REASON_AUTH_PERMISSION_DENIED
	ReasonUnavailable             = agentplanev1.ErrorReason_ERROR_REASON_SERVER_UNAVAILABLE
	ReasonInternal                = agentplanev1.ErrorReason_ERROR_REASON_INTERNAL
	ReasonPolicyInvalid           = agentplanev1.ErrorReason_ERROR_REASON_POLICY_INVALID
	ReasonPageTokenInvalid        = agentplanev1.ErrorReason_ERROR_REASON_PAGE_TOKEN_INVALID
	ReasonStoreSchemaMismatch     = agentplanev1.ErrorReason_ERROR_REASON_STORE_SCHEMA_MISMATCH
	ReasonDeadlineExceeded        = agentplanev1.ErrorReason_ERROR_REASON_DEADLINE_EXCEEDED
	ReasonCanceled                = agentplanev1.ErrorReason_ERROR_REASON_REQUEST_CANCELED
	ReasonVerdictInvalid          = agentplanev1.ErrorReason_ERROR_REASON_VERDICT_INVALID
	ReasonEventInvalid            = agentplanev1.ErrorReason_ERROR_REASON_EVENT_INVALID
	ReasonObligationNotFound      = agentplanev1.ErrorReason_ERROR_REASON_OBLIGATION_NOT_FOUND
	ReasonToolCallNotApproved     = agentplanev1.ErrorReason_ERROR_REASON_TOOL_CALL_NOT_APPROVED
	ReasonToolResultUnexpected    = agentplanev1.ErrorReason_ERROR_REASON_TOOL_RESULT_UNEXPECTED
	ReasonToolOutputsMismatch     = agentplanev1.ErrorReason_ERROR_REASON_TASK_TOOL_OUTPUTS_MISMATCH
	ReasonConcurrencyLimit        = agentplanev1.ErrorReason_ERROR_REASON_LIMIT_CONCURRENCY
	ReasonStoreUnavailable        = agentplanev1.ErrorReason_ERROR_REASON_STORE_UNAVAILABLE
	ReasonRequestMalformed        = agentplanev1.ErrorReason_ERROR_REASON_REQUEST_MALFORMED
	ReasonRouteNotFound           = agentplanev1.ErrorReason_ERROR_REASON_ROUTE_NOT_FOUND
	ReasonStoreBackupUnsupported  = agentplanev1.ErrorReason_ERROR_REASON_STORE_BACKUP_UNSUPPORTED
	ReasonWebhookDeliveryNotFound = agentplanev1.ErrorReason_ERROR_REASON_WEBHOOK_DELIVERY_NOT_FOUND
	ReasonScheduleNotFound        = agentplanev1.ErrorReason_ERROR_REASON_SCHEDULE_NOT_FOUND
	ReasonScheduleExists          = agentplanev1.ErrorReason_ERROR_REASON_SCHEDULE_ALREADY_EXISTS
	ReasonScheduleInvalid         = agentplanev1.ErrorReason_ERROR_REASON_SCHEDULE_INVALID
	ReasonScheduleRevision        = agentplanev1.ErrorReason_ERROR_REASON_SCHEDULE_REVISION_MISMATCH
	ReasonBudgetExceeded          = agentplanev1.ErrorReason_ERROR_REASON_BUDGET_EXCEEDED
	ReasonApproverNotEligible     = agentplanev1.ErrorReason_ERROR_REASON_INTERRUPT_APPROVER_NOT_ELIGIBLE
	ReasonAlreadyVoted            = agentplanev1.ErrorReason_ERROR_REASON_INTERRUPT_ALREADY_VOTED
	ReasonFlowRateLimited         = agentplanev1.ErrorReason_ERROR_REASON_FLOW_RATE_LIMITED
	ReasonApprovalLinkNotFound    = agentplanev1.ErrorReason_ERROR_REASON_APPROVAL_LINK_NOT_FOUND
)

// Error is an error a client may see.
type Error struct {
	Code    codes.Code
	Reason  Reason
	Message string
	// Metadata is copied into ErrorInfo.metadata.
	Metadata map[string]string
	// Details are extra status details (for example *agentplanev1.SpecViolations).
	Details []proto.Message
	// cause is kept for logs and errors.Is/As; it never reaches the client.
	cause error
}

// New returns an Error with a formatted message.
func New(code codes.Code, reason Reason, format string, args ...any) *Error {
	return &Error{Code: code, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an Error that keeps cause for logs and errors.Is.
func Wrap(cause error, code codes.Code, reason Reason, format string, args ...any) *Error {
	e := New(code, reason, format, args...)
	e.cause = cause
	return e
}

// WithDetails adds status details and returns e.
func (e *Error) WithDetails(d ...proto.Message) *Error {
	e.Details = append(e.Details, d...)
	return e
}

// WithMetadata adds an ErrorInfo metadata entry and returns e.
func (e *Error) WithMetadata(k, v string) *Error {
	if e.Metadata == nil {
		e.Metadata = map[string]string{}
	}
	e.Metadata[k] = v
	return e
}

func (e *Error) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("%s (%s): %s: %v", e.Code, reasons.Wire(e.Reason), e.Message, e.cause)
	}
	return fmt.Sprintf("%s (%s): %s", e.Code, reasons.Wire(e.Reason), e.Message)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.cause }

// Is reports whether target is an *Error with the same reason, so that
// errors.Is(err, apierr.New(codes.X, reason, "")) matches by reason.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Reason == e.Reason
}

// HasReason reports whether err is (or wraps) an *Error with the given reason.
func HasReason(err error, reason Reason) bool {
	var e *Error
	return errors.As(err, &e) && e.Reason == reason
}

// ReasonOf returns the reason of err, or ERROR_REASON_UNSPECIFIED when err is not an
// *Error.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return agentplanev1.ErrorReason_ERROR_REASON_UNSPECIFIED
}

// Shorthands for the common codes.

// InvalidArgument is a bad request.
func InvalidArgument(reason Reason, format string, args ...any) *Error {
	return New(codes.InvalidArgument, reason, format, args...)
}

// NotFound is a missing (or another tenant's) resource.
func NotFound(reason Reason, format string, args ...any) *Error {
	return New(codes.NotFound, reason, format, args...)
}

// FailedPrecondition is a request that cannot apply to the resource's current state.
func FailedPrecondition(reason Reason, format string, args ...any) *Error {
	return New(codes.FailedPrecondition, reason, format, args...)
}

// ResourceExhausted is a limit reached.
func ResourceExhausted(format string, args ...any) *Error {
	return New(codes.ResourceExhausted, ReasonResourceExhausted, format, args...)
}

// ToStatus converts any error into a gRPC status. *Error keeps its code, reason,
// message and details (and gains a RetryInfo when its reason is retryable); a context error keeps its code; anything else is Internal with
// a generic message (log the original). The second result is false when err was not
// a recognised client error and should be logged.
func ToStatus(err error) (*status.Status, bool) {
	if err == nil {
		return status.New(codes.OK, ""), true
	}
	var e *Error
	if errors.As(err, &e) {
		return reasons.Status(e.Code, e.Reason, e.Message, e.Metadata, e.Details...), true
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		return st, true
	}
	switch {
	case errors.Is(err, context.Canceled):
		return ToStatus(New(codes.Canceled, ReasonCanceled, "request canceled"))
	case errors.Is(err, context.DeadlineExceeded):
		return ToStatus(New(codes.DeadlineExceeded, ReasonDeadlineExceeded, "deadline exceeded"))
	}
	st, _ := ToStatus(New(codes.Internal, ReasonInternal, "internal error"))
	return st, false
}
