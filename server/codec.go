package server

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// codec is gRPC's protobuf codec, which also sends an encoded message as it is: one
// WatchTask event goes to every stream that follows its task, and encoding it once for
// all of them (tasks.Event.Encoded) instead of once per stream was a fifth of the
// server's CPU with 1,000 watchers.
type codec struct{ encoding.CodecV2 }

// encoded is a response message in its wire form, which must not be modified.
type encoded []byte

func newCodec() codec { return codec{encoding.GetCodecV2(proto.Name)} }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(encoded); ok {
		// A SliceBuffer is never returned to a pool, so the bytes may be shared.
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return c.CodecV2.Marshal(v)
}
