package server_test

import "google.golang.org/grpc/mem"

// emptyMsg and rawCodec let a test call any method with an empty request and discard
// the response, without knowing its message types.
type emptyMsg struct{}

type rawCodec struct{}

func (rawCodec) Marshal(any) (mem.BufferSlice, error) { return mem.BufferSlice{}, nil }
func (rawCodec) Unmarshal(mem.BufferSlice, any) error { return nil }
func (rawCodec) Name() string                         { return "proto" }
