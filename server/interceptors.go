package server

import (
	"context"
	"runtime/debug"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/server/apierr"
)

// unaryInterceptor recovers panics, maps errors to statuses (the one place that does),
// records metrics and logs failures an operator should see.
func (s *Server) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	start := time.Now()
	s.metrics.inflight.WithLabelValues(info.FullMethod).Inc()
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic in handler", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
			err = apierr.New(codes.Internal, apierr.ReasonInternal, "internal error")
		}
		err = s.mapError(info.FullMethod, err)
		s.metrics.inflight.WithLabelValues(info.FullMethod).Dec()
		s.metrics.latency.WithLabelValues(info.FullMethod).Observe(time.Since(start).Seconds())
		s.metrics.requests.WithLabelValues(info.FullMethod, codeOf(err).String()).Inc()
	}()
	return handler(ctx, req)
}

// streamInterceptor is unaryInterceptor for streams.
func (s *Server) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	s.metrics.streams.Inc()
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic in stream handler", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
			err = apierr.New(codes.Internal, apierr.ReasonInternal, "internal error")
		}
		err = s.mapError(info.FullMethod, err)
		s.metrics.streams.Dec()
		s.metrics.requests.WithLabelValues(info.FullMethod, codeOf(err).String()).Inc()
	}()
	return handler(srv, ss)
}

// mapError turns a handler error into a gRPC status error; unrecognised errors are
// logged with their detail and masked as INTERNAL.
func (s *Server) mapError(method string, err error) error {
	if err == nil {
		return nil
	}
	st, known := apierr.ToStatus(err)
	if !known {
		s.log.Error("internal error", "method", method, "err", err)
	} else if st.Code() == codes.Internal || st.Code() == codes.DataLoss || st.Code() == codes.Unavailable {
		s.log.Warn("call failed", "method", method, "code", st.Code().String(), "err", err)
	} else if apierr.HasReason(err, apierr.ReasonRequestMalformed) {
		// A broken client or a probe, rare either way: worth an operator's eye.
		s.log.Info("malformed request refused", "method", method, "reason", reasons.Wire(apierr.ReasonRequestMalformed), "msg", st.Message())
	} else {
		s.log.Debug("call refused", "method", method, "code", st.Code().String(), "msg", st.Message())
	}
	return st.Err()
}

func codeOf(err error) codes.Code { return status.Code(err) }
