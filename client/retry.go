package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	mrand "math/rand/v2"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// NewRequestID returns a random request id (32 hex digits) for the request_id field of
// a mutating call. Reuse it when repeating the call, never for another request.
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

// Retry configures how a Client repeats unary calls (docs/clients.md, "Retries,
// request ids and reconnection"; the same policy in every agentplane SDK): only calls
// whose RPC is marked NO_SIDE_EFFECTS or IDEMPOTENT in the API (api_gen.go, generated
// from the protos' idempotency_level), after an error whose declared reason is
// retryable or, without a declared reason, after UNAVAILABLE or DEADLINE_EXCEEDED; and
// only while the caller's context lasts.
type Retry struct {
	// Attempts is the most calls made for one call, the first included; 1 disables
	// retrying. Default RetryAttempts (4).
	Attempts int
	// Initial is the pause before the first retry, doubled for each next one up to
	// Max; each pause is jittered into [d/2, d] and is never shorter than the error's
	// RetryInfo delay. Defaults RetryBackoffBase and RetryBackoffMax (100ms and 2s).
	Initial, Max time.Duration
}

func (r Retry) withDefaults() Retry {
	if r.Attempts == 0 {
		r.Attempts = RetryAttempts
	}
	if r.Initial <= 0 {
		r.Initial = RetryBackoffBase
	}
	if r.Max <= 0 {
		r.Max = RetryBackoffMax
	}
	if r.Max < r.Initial {
		r.Max = r.Initial
	}
	return r
}

// delay is the pause before retry number n (from 1) after err.
func (r Retry) delay(n int, err error) time.Duration {
	d := r.Initial
	for i := 1; i < n && d < r.Max; i++ {
		d *= 2
	}
	d = min(d, r.Max)
	low := time.Duration(float64(d) * (1 - RetryJitter))
	d = low + mrand.N(d-low+1)
	if hint := retryInfoDelay(err); hint > d {
		d = hint
	}
	return d
}

// WithRetry sets how calls are retried (see Retry); WithRetry(Retry{Attempts: 1})
// turns retrying off. Request ids are filled in either way.
func WithRetry(r Retry) Option {
	return func(o *options) error { o.retry = r.withDefaults(); return nil }
}

// Retryable reports whether a call of method (a full gRPC method name,
// "/agentplane.v1.TaskService/GetTask") that failed with err may be made again
// unchanged: the RPC is NO_SIDE_EFFECTS or IDEMPOTENT (a write with a request_id is
// IDEMPOTENT only because the client sends the same id again), and either the error's
// reason is a declared one marked retryable (STORE_UNAVAILABLE, LIMIT_CONCURRENCY, ...)
// or it carries no declared reason (a transport or proxy error) and its code is one the
// policy retries for that level (UNAVAILABLE, DEADLINE_EXCEEDED).
func Retryable(method string, err error) bool {
	p, ok := rpcs[method]
	if !ok || p.idempotency == IdempotencyUnknown || err == nil {
		return false
	}
	st, _ := status.FromError(err)
	if r, declared := reasonTable[errorReason(st)]; declared {
		return r.retryable
	}
	return retryCodes[p.idempotency][st.Code()]
}

// errorReason is the ErrorInfo reason of st, or "".
func errorReason(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

func retryInfoDelay(err error) time.Duration {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// RetryInterceptor gives every call whose request has a request_id field one (a random
// id, when the caller left it empty, generated once for the logical call; the caller's
// message is not modified) and repeats the call after an error Retryable allows, with
// the same request, up to r.Attempts calls while ctx lasts.
func RetryInterceptor(r Retry) grpc.UnaryClientInterceptor {
	r = r.withDefaults()
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if m, ok := req.(proto.Message); ok && rpcs[method].requestID {
			req = withRequestID(m)
		}
		for attempt := 1; ; attempt++ {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if err == nil || attempt >= r.Attempts || ctx.Err() != nil || !Retryable(method, err) {
				return err
			}
			t := time.NewTimer(r.delay(attempt, err))
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
		}
	}
}

// withRequestID returns m with its request_id set (a copy when it had none).
func withRequestID(m proto.Message) proto.Message {
	fd := m.ProtoReflect().Descriptor().Fields().ByName("request_id")
	if fd == nil || fd.Kind() != protoreflect.StringKind || m.ProtoReflect().Get(fd).String() != "" {
		return m
	}
	c := proto.Clone(m)
	c.ProtoReflect().Set(fd, protoreflect.ValueOfString(NewRequestID()))
	return c
}

type rpcPolicy struct {
	idempotency Idempotency
	requestID   bool
}

type reasonInfo struct {
	name      string
	retryable bool
}

// ReasonName returns the name a declared error reason has in errors.proto without its
// ERROR_REASON_ prefix ("TASK_NOT_FOUND" for ReasonTaskNotFound), or "" for a reason
// the API does not declare.
func ReasonName(reason string) string { return reasonTable[reason].name }

// RetryableReason reports whether reason is declared retryable: the same call may
// succeed later unchanged.
func RetryableReason(reason string) bool { return reasonTable[reason].retryable }
