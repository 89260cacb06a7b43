package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/api/reasons"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/spec"
)

// httpError is the gateway's error handler. An error from a gRPC method already
// carries its ErrorInfo. One the gateway met before any method ran has none: a body
// that is not JSON, a path or query parameter that does not parse or cannot be
// encoded (invalid UTF-8 such as /v1/tasks/%ff: the in-process client fails to
// marshal it, which grpc-go reports as INTERNAL), a body over the size limit. Those
// are given one here, counted in agentplane_http_refused_total and logged, so that
// every answer carries a reason and a bad request is never a server fault. In a
// multi-tenant deployment a caller without valid credentials is answered
// UNAUTHENTICATED first, as a gRPC call is.
func (s *Server) httpError(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	st := status.Convert(err)
	if reasons.Info(err) == nil {
		var e *apierr.Error
		_, authErr := s.guard.AuthenticateHTTP(r)
		switch code := st.Code(); {
		case authErr != nil && errors.As(authErr, &e):
			// As for a gRPC call, a caller without credentials learns only that.
		case bodyLimitHit(r):
			e = apierr.ResourceExhausted("the request body is over this deployment's limit of %d bytes", s.maxHTTPBody())
			w = statusWriter{w, http.StatusRequestEntityTooLarge}
		case code == codes.InvalidArgument:
			e = apierr.InvalidArgument(apierr.ReasonRequestMalformed, "the request could not be read: %s", st.Message())
		case code == codes.Internal && strings.HasPrefix(st.Message(), "grpc: error while marshaling"):
			e = apierr.InvalidArgument(apierr.ReasonRequestMalformed, "the request could not be encoded (a path or query parameter that is not valid UTF-8?): %s",
				strings.TrimPrefix(st.Message(), "grpc: error while marshaling: "))
		case code == codes.NotFound:
			e = apierr.NotFound(apierr.ReasonRouteNotFound, "no API route for %s %s; see docs/api.md", r.Method, r.URL.Path)
		case code == codes.Unimplemented:
			e = apierr.New(codes.Unimplemented, apierr.ReasonRouteNotFound, "method %s is not allowed on %s", r.Method, r.URL.Path)
		case code == codes.ResourceExhausted:
			e = apierr.ResourceExhausted("%s", st.Message())
		case code == codes.Canceled:
			e = apierr.New(code, apierr.ReasonCanceled, "request canceled")
		case code == codes.DeadlineExceeded:
			e = apierr.New(code, apierr.ReasonDeadlineExceeded, "deadline exceeded")
		case code == codes.Unavailable:
			e = apierr.New(code, apierr.ReasonUnavailable, "the server is unavailable; retry")
		default:
			s.log.Error("gateway error", "method", r.Method, "path", r.URL.Path, "err", err)
			e = apierr.New(codes.Internal, apierr.ReasonInternal, "internal error")
		}
		s.metrics.httpRefused.WithLabelValues(e.Code.String(), reasons.Wire(e.Reason)).Inc()
		if e.Reason == apierr.ReasonRouteNotFound {
			s.log.Debug("http request refused", "method", r.Method, "path", r.URL.Path, "reason", reasons.Wire(e.Reason))
		} else {
			s.log.Info("http request refused", "method", r.Method, "path", r.URL.Path, "code", e.Code.String(), "reason", reasons.Wire(e.Reason), "msg", e.Message)
		}
		st, _ = apierr.ToStatus(e)
	} else if tooLargeDocument(st) {
		// RESOURCE_EXHAUSTED is 429 to the gateway, which tells a client to retry; a
		// document over the size or value limit will never fit.
		w = statusWriter{w, http.StatusRequestEntityTooLarge}
	}
	runtime.DefaultHTTPErrorHandler(ctx, mux, m, w, r, st.Err())
}

// tooLargeDocument reports whether st refuses a spec document for its size
// (LIMIT_EXCEEDED with a DOC-TOO-LARGE finding).
func tooLargeDocument(st *status.Status) bool {
	if st.Code() != codes.ResourceExhausted {
		return false
	}
	for _, d := range st.Details() {
		if v, ok := d.(*agentplanev1.SpecViolations); ok {
			for _, f := range v.GetViolations() {
				if f.GetRuleId() == spec.RuleDocTooLarge {
					return true
				}
			}
		}
	}
	return false
}

// httpRoutingError answers a path or method the API does not have through httpError.
func (s *Server) httpRoutingError(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
	err := status.Error(codes.Internal, "unexpected routing error")
	switch code {
	case http.StatusBadRequest:
		err = status.Error(codes.InvalidArgument, http.StatusText(code))
	case http.StatusMethodNotAllowed:
		err = status.Error(codes.Unimplemented, http.StatusText(code))
	case http.StatusNotFound:
		err = status.Error(codes.NotFound, http.StatusText(code))
	}
	s.httpError(ctx, mux, m, w, r, err)
}

func (s *Server) maxHTTPBody() int64 { return s.cfg.Limits.MaxRequestBytes() }

// statusWriter writes its own HTTP status instead of the one it is given.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w statusWriter) WriteHeader(int) { w.ResponseWriter.WriteHeader(w.code) }

type bodyLimitKey struct{}

// limitBody is http.MaxBytesHandler that also notes, for httpError, that the limit
// was hit: the gateway reports a failed body read as a plain INVALID_ARGUMENT.
func limitBody(h http.Handler, n int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hit := new(atomic.Bool)
		r = r.WithContext(context.WithValue(r.Context(), bodyLimitKey{}, hit))
		r.Body = limitedBody{http.MaxBytesReader(w, r.Body, n), hit}
		h.ServeHTTP(w, r)
	})
}

type limitedBody struct {
	io.ReadCloser
	hit *atomic.Bool
}

func (b limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		b.hit.Store(true)
	}
	return n, err
}

func bodyLimitHit(r *http.Request) bool {
	hit, _ := r.Context().Value(bodyLimitKey{}).(*atomic.Bool)
	return hit != nil && hit.Load()
}
