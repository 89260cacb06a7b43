package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
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

// Retry configures how a Client repeats unary calls that failed with UNAVAILABLE or
// DEADLINE_EXCEEDED (a lost connection, a server restarting, a response lost to a
// deadline on the way): only calls that are safe to repeat, and only while the
// caller's context lasts.
type Retry struct {
	// Attempts is the most calls made for one call, the first included; 1 disables
	// retrying. Default 4.
	Attempts int
	// Initial is the pause before the first retry, doubled for each next one up to
	// Max. Defaults 100ms and 2s.
	Initial, Max time.Duration
}

func (r Retry) withDefaults() Retry {
	if r.Attempts == 0 {
		r.Attempts = 4
	}
	if r.Initial <= 0 {
		r.Initial = 100 * time.Millisecond
	}
	if r.Max <= 0 {
		r.Max = 2 * time.Second
	}
	return r
}

// WithRetry sets how calls are retried (see Retry); WithRetry(Retry{Attempts: 1})
// turns retrying off. Request ids are filled in either way.
func WithRetry(r Retry) Option {
	return func(o *options) error { o.retry = r.withDefaults(); return nil }
}

// safeToRepeat lists the unary calls without a request_id, other than Get* and List*,
// that may be repeated: they read, or repeating them changes nothing (a heartbeat, a gate check keyed by call id,
// a long poll whose lost leases are only offered).
var safeToRepeat = map[string]bool{
	"ValidateSpec": true, "Heartbeat": true, "CheckToolCall": true, "LeaseTasks": true,
	"ReadTaskHistory": true, "PublishDeltas": true,
}

// RetryInterceptor gives every mutating call that has a request_id field one (a random
// id, when the caller left it empty; the caller's message is not modified) and repeats
// the calls that are safe to repeat (those with a request id, reads, and
// safeToRepeat) after UNAVAILABLE or DEADLINE_EXCEEDED, with the same request, while
// ctx lasts.
func RetryInterceptor(r Retry) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		safe := false
		if m, ok := req.(proto.Message); ok {
			req, safe = withRequestID(m)
		}
		name := method[strings.LastIndexByte(method, '/')+1:]
		safe = safe || strings.HasPrefix(name, "Get") || strings.HasPrefix(name, "List") || safeToRepeat[name]
		delay := r.Initial
		for attempt := 1; ; attempt++ {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if err == nil || !safe || attempt >= r.Attempts || ctx.Err() != nil {
				return err
			}
			if c := status.Code(err); c != codes.Unavailable && c != codes.DeadlineExceeded {
				return err
			}
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
			delay = min(2*delay, r.Max)
		}
	}
}

// withRequestID returns m with its request_id set (a copy when it had none) and
// whether m has one at all.
func withRequestID(m proto.Message) (proto.Message, bool) {
	fd := m.ProtoReflect().Descriptor().Fields().ByName("request_id")
	if fd == nil || fd.Kind() != protoreflect.StringKind {
		return m, false
	}
	if m.ProtoReflect().Get(fd).String() != "" {
		return m, true
	}
	c := proto.Clone(m)
	c.ProtoReflect().Set(fd, protoreflect.ValueOfString(NewRequestID()))
	return c, true
}
