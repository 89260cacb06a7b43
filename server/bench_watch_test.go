package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
)

// BenchmarkWatchFanout is one writer appending events, one per ReportEvents, to a
// task that 1,000 WatchTask streams follow, over loopback gRPC (8 connections); each
// event is written once every watcher has received the one before. ns/op is from the
// write until the last watcher has the event; ack-p50-us is the median of the writer's
// acknowledgement latency; cpu-us/delivered is the process's CPU time (user and
// system) per delivered event. The watchers do not decode what they receive, so the
// client's share of that CPU is the transport's alone.
//
//	go test ./server -run '^$' -bench WatchFanout -benchtime 1000x
func BenchmarkWatchFanout(b *testing.B) {
	const watchers, conns = 1000, 8
	in := servertest.Start(b, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Spec: &agentplanev1.StartTaskRequest_Agent{Agent: &agentplanev1.AgentSpec{ApiVersion: "qar/v1", Kind: "AgentSpec", Model: "m",
			Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "Answer briefly."}}}},
		Input: "bench",
	})
	if err != nil {
		b.Fatal(err)
	}
	taskID := started.GetTask().GetTaskId()
	leased, err := in.Client.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "bench", MaxTasks: 1})
	if err != nil || len(leased.GetLeases()) != 1 {
		b.Fatalf("lease: %v %v", leased, err)
	}
	l := leased.GetLeases()[0]
	ref := &agentplanev1.LeaseRef{TaskId: taskID, LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
	report := func(i int) int64 {
		resp, err := in.Client.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref, Events: []*agentplanev1.RuntimeEvent{{
			Payload: &agentplanev1.RuntimeEvent_Message{Message: &agentplanev1.ChatMessage{
				Role: agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, Text: fmt.Sprintf("bench event %d", i), Node: "bench"}},
		}}})
		if err != nil {
			b.Fatal(err)
		}
		return resp.GetLastSequence()
	}
	after := report(-1)

	var cs []*grpc.ClientConn
	for range conns {
		c, err := grpc.NewClient(in.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	var delivered atomic.Int64
	progress := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for i := range watchers {
		stream, err := cs[i%conns].NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/agentplane.v1.TaskService/WatchTask",
			grpc.ForceCodecV2(sendOnlyCodec{}))
		if err != nil {
			b.Fatal(err)
		}
		if err := stream.SendMsg(&agentplanev1.WatchTaskRequest{TaskId: taskID, AfterSequence: after}); err != nil {
			b.Fatal(err)
		}
		if err := stream.CloseSend(); err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if err := stream.RecvMsg(&emptyMsg{}); err != nil {
					if !errors.Is(err, io.EOF) && ctx.Err() == nil {
						b.Error(err)
					}
					return
				}
				delivered.Add(1)
				select {
				case progress <- struct{}{}:
				default:
				}
			}
		}()
	}
	waitFor := func(want int64) {
		deadline := time.After(time.Minute)
		for delivered.Load() < want {
			select {
			case <-progress:
			case <-deadline:
				b.Fatalf("delivered %d of %d events", delivered.Load(), want)
			}
		}
	}
	report(-2) // every watcher is live once it has this one
	waitFor(watchers)

	delivered.Store(0)
	acks := make([]time.Duration, b.N)
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		report(i)
		acks[i] = time.Since(start)
		waitFor(int64(watchers * (i + 1)))
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(watchers*b.N), "cpu-us/delivered")
	slices.Sort(acks)
	b.ReportMetric(float64(acks[len(acks)/2])/float64(time.Microsecond), "ack-p50-us")
	cancel()
	wg.Wait()
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sendOnlyCodec marshals requests as protobuf and discards responses undecoded.
type sendOnlyCodec struct{}

func (sendOnlyCodec) Marshal(m any) (mem.BufferSlice, error) {
	b, err := proto.Marshal(m.(proto.Message))
	return mem.BufferSlice{mem.SliceBuffer(b)}, err
}
func (sendOnlyCodec) Unmarshal(mem.BufferSlice, any) error { return nil }
func (sendOnlyCodec) Name() string                         { return "proto" }
