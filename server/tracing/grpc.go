package tracing

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// scope is the instrumentation scope of the gRPC spans.
const scope = "github.com/agentplane/agentplane/server/tracing"

// mdCarrier adapts gRPC metadata to the propagator (keys are lowercase in both).
type mdCarrier metadata.MD

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}
func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }
func (c mdCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// UnaryServerInterceptor starts a server span per call, a child of the caller's
// traceparent when it sent one, named and attributed per the OpenTelemetry RPC
// conventions (rpc.system, rpc.service, rpc.method, rpc.grpc.status_code). It must
// run outside the interceptor that maps errors to statuses, so that it records the
// status the client sees.
func UnaryServerInterceptor(tp trace.TracerProvider) grpc.UnaryServerInterceptor {
	tracer := tp.Tracer(scope)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, span := startServer(ctx, tracer, info.FullMethod)
		resp, err := handler(ctx, req)
		endServer(span, err)
		return resp, err
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streams: the span lasts as
// long as the stream.
func StreamServerInterceptor(tp trace.TracerProvider) grpc.StreamServerInterceptor {
	tracer := tp.Tracer(scope)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, span := startServer(ss.Context(), tracer, info.FullMethod)
		err := handler(srv, &tracedStream{ServerStream: ss, ctx: ctx})
		endServer(span, err)
		return err
	}
}

type tracedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *tracedStream) Context() context.Context { return s.ctx }

func startServer(ctx context.Context, tracer trace.Tracer, fullMethod string) (context.Context, trace.Span) {
	md, _ := metadata.FromIncomingContext(ctx)
	ctx = Propagator.Extract(ctx, mdCarrier(md))
	service, method, _ := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	return tracer.Start(ctx, service+"/"+method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("rpc.system", "grpc"),
			attribute.String("rpc.service", service),
			attribute.String("rpc.method", method),
		))
}

func endServer(span trace.Span, err error) {
	st, _ := status.FromError(err)
	span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(st.Code())))
	if err != nil {
		// The status message is what the client was told already (errors are
		// masked before this interceptor sees them).
		span.SetStatus(otelcodes.Error, st.Message())
	}
	span.End()
}

// UnaryClientInterceptor sends the W3C trace context of the call's context (the
// caller's current span) as gRPC metadata, so the control plane's server spans
// become its children. Calls made outside any span go as they are.
func UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(inject(ctx), method, req, reply, cc, opts...)
	}
}

// StreamClientInterceptor is UnaryClientInterceptor for streams.
func StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(inject(ctx), desc, cc, method, opts...)
	}
}

func inject(ctx context.Context) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	Propagator.Inject(ctx, mdCarrier(md))
	return metadata.NewOutgoingContext(ctx, md)
}
