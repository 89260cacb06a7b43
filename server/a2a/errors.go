package a2a

import (
	"errors"
	"net/http"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/server/apierr"
	grpcstatus "google.golang.org/grpc/status"
)

// JSON-RPC and A2A error codes (A2A v1.0 §5.4, §9.5).
const (
	codeParseError          = -32700
	codeInvalidRequest      = -32600
	codeMethodNotFound      = -32601
	codeInvalidParams       = -32602
	codeInternal            = -32603
	codeServerError         = -32000 // authentication, authorization, limits: not A2A's own
	codeTaskNotFound        = -32001
	codeTaskNotCancelable   = -32002
	codePushNotSupported    = -32003
	codeUnsupportedOp       = -32004
	codeContentType         = -32005
	codeExtendedCardMissing = -32007
	codeVersionNotSupported = -32009
)

// errorDomain is the ErrorInfo domain of A2A's own errors; errors the API raised keep
// their agentplane reason and domain.
const errorDomain = "a2a-protocol.org"

// The face's own limits carry agentplane's reasons (errors.proto) and domain:
// LIMIT_CONCURRENCY (a2a.max_streams open), LIMIT_EXCEEDED (a body over the bound).
var (
	reasonConcurrency = reasons.Wire(apierr.ReasonConcurrencyLimit)
	reasonTooLarge    = reasons.Wire(apierr.ReasonResourceExhausted)
)

// rpcError is an error as both bindings write it.
type rpcError struct {
	code   int    // JSON-RPC code
	http   int    // HTTP status (REST binding; JSON-RPC answers 200 except for 401/403)
	status string // google.rpc.Code name, for the REST body
	msg    string
	reason string // ErrorInfo reason
	domain string
}

func (e *rpcError) Error() string { return e.msg }

func newErr(code int, msg string) *rpcError {
	e := &rpcError{code: code, msg: msg, domain: errorDomain}
	switch code {
	case codeTaskNotFound:
		e.http, e.status, e.reason = http.StatusNotFound, "NOT_FOUND", "TASK_NOT_FOUND"
	case codeTaskNotCancelable:
		e.http, e.status, e.reason = http.StatusBadRequest, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE"
	case codePushNotSupported:
		e.http, e.status, e.reason = http.StatusBadRequest, "FAILED_PRECONDITION", "PUSH_NOTIFICATION_NOT_SUPPORTED"
	case codeUnsupportedOp:
		e.http, e.status, e.reason = http.StatusBadRequest, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION"
	case codeContentType:
		e.http, e.status, e.reason = http.StatusBadRequest, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED"
	case codeExtendedCardMissing:
		e.http, e.status, e.reason = http.StatusBadRequest, "FAILED_PRECONDITION", "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
	case codeVersionNotSupported:
		e.http, e.status, e.reason = http.StatusBadRequest, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED"
	// JSON-RPC's own errors carry no ErrorInfo: their code says it all.
	case codeParseError:
		e.http, e.status = http.StatusBadRequest, "INVALID_ARGUMENT"
	case codeInvalidRequest:
		e.http, e.status = http.StatusBadRequest, "INVALID_ARGUMENT"
	case codeMethodNotFound:
		e.http, e.status = http.StatusNotFound, "UNIMPLEMENTED"
	case codeInvalidParams:
		e.http, e.status = http.StatusBadRequest, "INVALID_ARGUMENT"
	default:
		e.http, e.status = http.StatusInternalServerError, "INTERNAL"
	}
	return e
}

func invalidParams(msg string) *rpcError { return newErr(codeInvalidParams, msg) }

func taskNotFound() *rpcError {
	return newErr(codeTaskNotFound, "task not found")
}

// fromAPI maps an error of the in-process API call to A2A's. The API's messages are
// written for clients (internal errors are masked there), so they pass through; the
// agentplane reason travels in the ErrorInfo. NOT_FOUND from a task method is
// TaskNotFound: another tenant's task and a missing one look the same.
func fromAPI(err error) *rpcError {
	var re *rpcError
	if errors.As(err, &re) {
		return re
	}
	st, _ := grpcstatus.FromError(err)
	var reason, domain string
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			reason, domain = info.GetReason(), info.GetDomain()
		}
	}
	var e *rpcError
	switch st.Code() {
	case codes.NotFound:
		return taskNotFound()
	case codes.InvalidArgument, codes.AlreadyExists, codes.OutOfRange:
		e = newErr(codeInvalidParams, st.Message())
	case codes.FailedPrecondition, codes.Aborted:
		e = newErr(codeUnsupportedOp, st.Message())
	case codes.Unauthenticated:
		e = &rpcError{code: codeServerError, http: http.StatusUnauthorized, status: "UNAUTHENTICATED", msg: st.Message()}
	case codes.PermissionDenied:
		e = &rpcError{code: codeServerError, http: http.StatusForbidden, status: "PERMISSION_DENIED", msg: st.Message()}
	case codes.ResourceExhausted:
		e = &rpcError{code: codeServerError, http: http.StatusTooManyRequests, status: "RESOURCE_EXHAUSTED", msg: st.Message()}
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		e = &rpcError{code: codeInternal, http: http.StatusServiceUnavailable, status: "UNAVAILABLE", msg: st.Message()}
	default:
		e = &rpcError{code: codeInternal, http: http.StatusInternalServerError, status: "INTERNAL", msg: "internal error"}
	}
	if reason != "" {
		e.reason, e.domain = reason, domain
	}
	return e
}

// details is the error's google.rpc details, as ProtoJSON Any objects.
func (e *rpcError) details() []map[string]any {
	if e.reason == "" {
		return nil
	}
	return []map[string]any{{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": e.reason, "domain": e.domain}}
}
