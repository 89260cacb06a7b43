package server

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	encproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/server/apierr"
)

// readErrors is the service registrar every gRPC server of this process registers
// through, with requestCodec as the server's codec. grpc-go decodes a request before
// any interceptor runs, and when the codec fails it writes the status itself: a
// request that is not valid protobuf or holds invalid UTF-8 was INTERNAL, without an
// ErrorInfo and unseen by metrics and logs. So requestCodec does not fail: it notes
// the error against the message, and the handlers registered here (wrapped) take the
// note and answer INVALID_ARGUMENT REQUEST_MALFORMED through the interceptors like any
// other answer: authorization first, then the error mapping, the metrics and the log.
type readErrors struct {
	*grpc.Server
	notes *readNotes
}

// RegisterService implements grpc.ServiceRegistrar.
func (r readErrors) RegisterService(sd *grpc.ServiceDesc, impl any) {
	wrapped := *sd
	wrapped.Methods = make([]grpc.MethodDesc, len(sd.Methods))
	for i, m := range sd.Methods {
		wrapped.Methods[i] = grpc.MethodDesc{MethodName: m.MethodName, Handler: r.unary("/"+sd.ServiceName+"/"+m.MethodName, m.Handler)}
	}
	wrapped.Streams = make([]grpc.StreamDesc, len(sd.Streams))
	for i, st := range sd.Streams {
		h := st.Handler
		st.Handler = func(srv any, ss grpc.ServerStream) error { return h(srv, readErrorStream{ss, r.notes}) }
		wrapped.Streams[i] = st
	}
	r.Server.RegisterService(&wrapped, impl)
}

// unary wraps a generated unary handler. When the request cannot be read, the
// generated code returns before it calls the interceptors; they are then run here,
// with the request as far as it was decoded and a handler that answers the error.
func (r readErrors) unary(method string, h grpc.MethodHandler) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		var req any
		var readErr error
		resp, err := h(srv, ctx, func(m any) error {
			req = m
			if err := dec(m); err != nil {
				readErr = transportReadError(err)
				return readErr
			}
			readErr = r.notes.take(m)
			return readErr
		}, interceptor)
		if readErr == nil || interceptor == nil {
			return resp, err
		}
		return interceptor(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: method},
			func(context.Context, any) (any, error) { return nil, readErr })
	}
}

// readErrorStream answers a streaming call's unreadable message from RecvMsg.
type readErrorStream struct {
	grpc.ServerStream
	notes *readNotes
}

func (s readErrorStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return transportReadError(err)
	}
	return s.notes.take(m)
}

// transportReadError maps what grpc-go's RecvMsg failed with. By then grpc-go has
// written the call's status itself (the client sees its code and message, without an
// ErrorInfo: docs/errors.md lists them), but the failure still goes through the
// interceptors as an API error, so that it is counted and logged: over the size limit
// is LIMIT_EXCEEDED, a message that does not decompress or never came is
// REQUEST_MALFORMED. io.EOF and a call's end are left as they are.
func transportReadError(err error) error {
	switch status.Code(err) {
	case codes.ResourceExhausted:
		return apierr.Wrap(err, codes.ResourceExhausted, apierr.ReasonResourceExhausted, "%s", status.Convert(err).Message())
	case codes.Internal:
		return apierr.Wrap(err, codes.InvalidArgument, apierr.ReasonRequestMalformed, "%s", status.Convert(err).Message())
	}
	return err
}

// requestCodec is the proto codec, except that a request it cannot unmarshal is noted
// against its message (for readErrors) instead of failing the call inside grpc-go.
type requestCodec struct {
	encoding.CodecV2
	notes *readNotes
}

func newRequestCodec() requestCodec {
	return requestCodec{CodecV2: encoding.GetCodecV2(encproto.Name), notes: &readNotes{}}
}

// Unmarshal implements encoding.CodecV2.
func (c requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if err := c.CodecV2.Unmarshal(data, v); err != nil {
		c.notes.m.Store(v, apierr.Wrap(err, codes.InvalidArgument, apierr.ReasonRequestMalformed,
			"the request message could not be read: %v", err))
	}
	return nil
}

// readNotes holds the unmarshal errors of messages between requestCodec and the
// wrapped handler that reads them, keyed by the message; an entry lives only for
// that moment.
type readNotes struct {
	m sync.Map
}

func (n *readNotes) take(m any) error {
	if err, ok := n.m.LoadAndDelete(m); ok {
		return err.(error)
	}
	return nil
}
