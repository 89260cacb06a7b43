package server

import (
	"context"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/metadata"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// The W3C Trace Context keys (https://www.w3.org/TR/trace-context/): gRPC metadata
// keys, and HTTP headers the gateway forwards as metadata (traceHeaderMatcher).
const (
	traceparentKey = "traceparent"
	tracestateKey  = "tracestate"
	// maxTracestateBytes is what a vendor must at least propagate; more is dropped
	// rather than stored.
	maxTracestateBytes = 512
)

// traceContextOf is the W3C trace context of an incoming call, or nil when it carries
// no well-formed traceparent. A tracestate is kept only with a traceparent, and only
// up to maxTracestateBytes (the whole of it or nothing: list members are not cut).
func traceContextOf(ctx context.Context) *agentplanev1.TraceContext {
	md, _ := metadata.FromIncomingContext(ctx)
	parents := md.Get(traceparentKey)
	if len(parents) != 1 || !validTraceparent(parents[0]) {
		return nil
	}
	tc := &agentplanev1.TraceContext{Traceparent: parents[0]}
	// Several tracestate headers form one list, in order (RFC 9110 field combination).
	if state := strings.Join(md.Get(tracestateKey), ","); len(state) <= maxTracestateBytes && validTracestate(state) {
		tc.Tracestate = state
	}
	return tc
}

// validTraceparent checks the traceparent grammar: version-traceid-parentid-flags,
// lowercase hex, version not ff, trace and parent ids not all zeros. Version 00 has
// exactly these four fields; a later version may append more after a '-'.
func validTraceparent(s string) bool {
	const size = 55 // 2+1+32+1+16+1+2
	if len(s) < size || (len(s) > size && s[size] != '-') || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return false
	}
	version, traceID, parentID, flags := s[0:2], s[3:35], s[36:52], s[53:55]
	if !lowerHex(version) || !lowerHex(traceID) || !lowerHex(parentID) || !lowerHex(flags) {
		return false
	}
	if version == "ff" || (version == "00" && len(s) != size) {
		return false
	}
	return strings.Trim(traceID, "0") != "" && strings.Trim(parentID, "0") != ""
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// validTracestate accepts printable ASCII without control characters, which is what
// the list-member grammar allows; the members' own syntax is the tracer's concern.
func validTracestate(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// traceHeaderMatcher forwards the W3C trace context headers of HTTP requests to the
// gRPC handlers as metadata, and every other header as the gateway does by default.
func traceHeaderMatcher(key string) (string, bool) {
	switch strings.ToLower(key) {
	case traceparentKey, tracestateKey:
		return strings.ToLower(key), true
	}
	return runtime.DefaultHeaderMatcher(key)
}
