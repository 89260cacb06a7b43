// Package apierr is the error vocabulary of agentplane: every error a caller can see
// carries a gRPC code and a stable reason (google.rpc.ErrorInfo, domain "agentplane").
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

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
)

// Domain is the ErrorInfo domain of every agentplane error.
const Domain = "agentplane"

// Stable reasons. A reason names what went wrong, not where; clients branch on it.
const (
	ReasonInvalidArgument = "request.invalid"
	// ReasonRequestMalformed: the request could not be read at all: not protobuf,
	// truncated, invalid UTF-8 in a string, malformed JSON over HTTP.
	ReasonRequestMalformed = "request.malformed"
	// ReasonRouteNotFound: an HTTP path or method the API does not have.
	ReasonRouteNotFound        = "route.not_found"
	ReasonSpecInvalid          = "spec.invalid"
	ReasonTaskNotFound         = "task.not_found"
	ReasonTaskTerminal         = "task.terminal"
	ReasonTaskState            = "task.wrong_state"
	ReasonRequestIDReused      = "task.request_id_reused"
	ReasonInterruptNotFound    = "interrupt.not_found"
	ReasonAlreadyResolved      = "interrupt.already_resolved"
	ReasonArgsMismatch         = "interrupt.args_mismatch"
	ReasonEditInvalid          = "interrupt.edit_invalid"
	ReasonLeaseLost            = "lease.lost"
	ReasonLockedKey            = "config.locked_key"
	ReasonComplianceDenied     = "compliance.denied"
	ReasonRuleNotFound         = "rule.not_found"
	ReasonResourceExhausted    = "limit.exceeded"
	ReasonUnimplemented        = "unimplemented"
	ReasonUnauthenticated      = "auth.unauthenticated"
	ReasonPermissionDenied     = "auth.permission_denied"
	ReasonUnavailable          = "server.unavailable"
	ReasonInternal             = "internal"
	ReasonPolicyInvalid        = "policy.invalid"
	ReasonPageTokenInvalid     = "page_token.invalid"
	ReasonStoreSchemaMismatch  = "store.schema_mismatch"
	ReasonDeadlineExceeded     = "deadline.exceeded"
	ReasonCanceled             = "request.canceled"
	ReasonVerdictInvalid       = "verdict.invalid"
	ReasonObligationInvalid    = "obligation.invalid"
	ReasonEventInvalid         = "event.invalid"
	ReasonTaskAlreadyCompleted = "task.already_ended"
	ReasonObligationNotFound   = "obligation.not_found"
	// ReasonToolCallNotApproved: a runtime reported a tool call that no decision lets
	// run (never checked, pending, rejected, other arguments, or already reported).
	ReasonToolCallNotApproved = "tool_call.not_approved"
	// ReasonConcurrencyLimit: the caller already has as many calls, watches or awaits
	// open as the deployment allows one principal (ErrorInfo metadata kind and limit);
	// retry once one of them ends.
	ReasonConcurrencyLimit = "limit.concurrency"
	// ReasonStoreUnavailable: the store refuses writes after a failed write or sync
	// (disk full, I/O error) until it has recovered; retry with backoff.
	ReasonStoreUnavailable = "store.unavailable"
)

// Error is an error a client may see.
type Error struct {
	Code    codes.Code
	Reason  string
	Message string
	// Metadata is copied into ErrorInfo.metadata.
	Metadata map[string]string
	// Details are extra status details (for example *agentplanev1.SpecViolations).
	Details []proto.Message
	// cause is kept for logs and errors.Is/As; it never reaches the client.
	cause error
}

// New returns an Error with a formatted message.
func New(code codes.Code, reason, format string, args ...any) *Error {
	return &Error{Code: code, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an Error that keeps cause for logs and errors.Is.
func Wrap(cause error, code codes.Code, reason, format string, args ...any) *Error {
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
		return fmt.Sprintf("%s (%s): %s: %v", e.Code, e.Reason, e.Message, e.cause)
	}
	return fmt.Sprintf("%s (%s): %s", e.Code, e.Reason, e.Message)
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
func HasReason(err error, reason string) bool {
	var e *Error
	return errors.As(err, &e) && e.Reason == reason
}

// ReasonOf returns the reason of err, or "" when err is not an *Error.
func ReasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// Shorthands for the common codes.

// InvalidArgument is a bad request.
func InvalidArgument(reason, format string, args ...any) *Error {
	return New(codes.InvalidArgument, reason, format, args...)
}

// NotFound is a missing (or another tenant's) resource.
func NotFound(reason, format string, args ...any) *Error {
	return New(codes.NotFound, reason, format, args...)
}

// FailedPrecondition is a request that cannot apply to the resource's current state.
func FailedPrecondition(reason, format string, args ...any) *Error {
	return New(codes.FailedPrecondition, reason, format, args...)
}

// ResourceExhausted is a limit reached.
func ResourceExhausted(format string, args ...any) *Error {
	return New(codes.ResourceExhausted, ReasonResourceExhausted, format, args...)
}

// Unimplemented names what is missing.
func Unimplemented(format string, args ...any) *Error {
	return New(codes.Unimplemented, ReasonUnimplemented, format, args...)
}

// ToStatus converts any error into a gRPC status. *Error keeps its code, reason,
// message and details; a context error keeps its code; anything else is Internal with
// a generic message (log the original). The second result is false when err was not
// a recognised client error and should be logged.
func ToStatus(err error) (*status.Status, bool) {
	if err == nil {
		return status.New(codes.OK, ""), true
	}
	var e *Error
	if errors.As(err, &e) {
		st := status.New(e.Code, e.Message)
		details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Domain: Domain, Reason: e.Reason, Metadata: e.Metadata}}
		for _, d := range e.Details {
			details = append(details, protoadapt.MessageV1Of(d))
		}
		if withDetails, derr := st.WithDetails(details...); derr == nil {
			st = withDetails
		}
		return st, true
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

// InfoOf extracts the ErrorInfo of a status error (client side), or nil.
func InfoOf(err error) *errdetails.ErrorInfo {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}
