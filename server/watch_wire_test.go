package server_test

import (
	"bytes"
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
)

// TestWatchTaskWireBytes: a live WatchTask event, encoded once for every stream, is on
// the wire byte for byte what gRPC's protobuf codec writes for the same response, and
// what a stream replaying it from the store receives.
func TestWatchTaskWireBytes(t *testing.T) {
	in := servertest.Start(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(&agentplanev1.AgentSpec{ApiVersion: "qar/v1", Kind: "AgentSpec", Model: "m",
			Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "hi"}}})},
		Input: client.UserText("wire"),
	})
	if err != nil {
		t.Fatal(err)
	}
	taskID := started.GetTask().GetTaskId()
	conn, err := grpc.NewClient(in.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	watch := func(after int64) grpc.ClientStream {
		stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/agentplane.v1.TaskService/WatchTask",
			grpc.ForceCodecV2(rawBytesCodec{}))
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.SendMsg(&agentplanev1.WatchTaskRequest{TaskId: taskID, AfterSequence: after}); err != nil {
			t.Fatal(err)
		}
		if err := stream.CloseSend(); err != nil {
			t.Fatal(err)
		}
		return stream
	}
	recv := func(stream grpc.ClientStream) []byte {
		var b rawBytes
		if err := stream.RecvMsg(&b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	live := watch(0)
	recv(live) // the submitted event, from the store
	recv(live) // caught_up: the watch is live
	leased, err := in.Client.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "wire", MaxTasks: 1})
	if err != nil || len(leased.GetLeases()) != 1 {
		t.Fatalf("lease: %v %v", leased, err)
	}
	var sent [][]byte
	var last int64
	for {
		b := recv(live)
		resp := &agentplanev1.WatchTaskResponse{}
		if err := proto.Unmarshal(b, resp); err != nil {
			t.Fatal(err)
		}
		if resp.GetEvent() == nil {
			continue // a keepalive
		}
		sent = append(sent, b)
		want, err := encoding.GetCodecV2(protocodec.Name).Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, want.Materialize()) {
			t.Fatalf("live event %d: wire bytes\n%x\nwant the codec's\n%x", resp.GetEvent().GetSequence(), b, want.Materialize())
		}
		if last = resp.GetEvent().GetSequence(); last == leased.GetLeases()[0].GetTask().GetLastSequence() {
			break
		}
	}
	replay := watch(1)
	for i, b := range sent {
		if r := recv(replay); !bytes.Equal(b, r) {
			t.Fatalf("event %d: live\n%x\nreplayed\n%x", i+2, b, r)
		}
	}
}

// rawBytes is a response kept in its wire form.
type rawBytes []byte

// rawBytesCodec marshals requests as protobuf and keeps responses as bytes.
type rawBytesCodec struct{ sendOnlyCodec }

func (rawBytesCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*rawBytes) = data.Materialize()
	return nil
}
