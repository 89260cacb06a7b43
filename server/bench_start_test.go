package server_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
)

// BenchmarkStartTaskGRPC is StartTask over loopback gRPC with 64 concurrent callers
// on a real bbolt file (ctl bench start measures the same from outside the process),
// alone and beside 1,000 open WatchTask streams (on a task that stays quiet), each of
// which holds a gRPC handler goroutine for as long as it is open.
//
//	go test ./server -run '^$' -bench StartTaskGRPC -cpuprofile cpu.out
func BenchmarkStartTaskGRPC(b *testing.B) {
	agent := &agentplanev1.AgentSpec{ApiVersion: "qar/v1", Kind: "AgentSpec", Model: "m",
		Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "Answer briefly."}}}
	spec := specwire.MustStruct(agent) // once, as ctl bench start does: the client's cost is not the server's
	for _, watchers := range []int{0, 1000} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			in := servertest.Start(b, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if watchers > 0 {
				openQuietWatches(ctx, b, in, agent, watchers)
			}
			var n atomic.Int64
			b.SetParallelism(32) // 64 callers on 2 cores
			cpu0 := cpuTime()
			defer func() { reportCPU(b, cpu0) }()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					_, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
						RequestId: fmt.Sprintf("r%d", i), Source: &agentplanev1.StartTaskRequest_Spec{Spec: spec}, Input: client.UserText("bench"),
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// openQuietWatches opens n WatchTask streams, over their own connection, on a new task
// that gets no further events, and returns once the server has answered every one.
func openQuietWatches(ctx context.Context, b *testing.B, in *servertest.Instance, agent *agentplanev1.AgentSpec, n int) {
	started, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(agent)}, Input: client.UserText("watched")})
	if err != nil {
		b.Fatal(err)
	}
	conn, err := grpc.NewClient(in.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	for range n {
		stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/agentplane.v1.TaskService/WatchTask",
			grpc.ForceCodecV2(sendOnlyCodec{}))
		if err != nil {
			b.Fatal(err)
		}
		if err := stream.SendMsg(&agentplanev1.WatchTaskRequest{TaskId: started.GetTask().GetTaskId()}); err != nil {
			b.Fatal(err)
		}
		if err := stream.CloseSend(); err != nil {
			b.Fatal(err)
		}
		if err := stream.RecvMsg(&emptyMsg{}); err != nil { // the submitted event: the handler runs
			b.Fatal(err)
		}
	}
}

// BenchmarkHealthGRPC is the health check, an RPC that does nothing, with 64
// concurrent callers over one loopback connection: the floor under every other call
// (ctl bench health measures the same from outside the process).
func BenchmarkHealthGRPC(b *testing.B) {
	in := servertest.Start(b, nil)
	conn, err := grpc.NewClient(in.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	b.SetParallelism(32) // 64 callers on 2 cores
	cpu0 := cpuTime()
	defer reportCPU(b, cpu0)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// reportCPU reports the process's CPU time per operation since cpu0, client and server
// together: on a machine shared with other work it varies far less than the time.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
}
