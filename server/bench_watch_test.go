package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
)

// BenchmarkWatchFanout is one writer appending events, one per ReportEvents, to a
// task that 1,000 WatchTask streams (over 8 connections) follow, each event written
// once every watcher has received the one before. The writer and the watchers are
// two processes of their own (this test binary again, see
// TestWatchFanoutHelperProcess), so that this process is the server's alone and
// neither client shares a Go scheduler with it or with the other. ns/op is from the
// write until the last watcher has the event; ack-p50-us is the median of the
// writer's acknowledgement latency; server-cpu-us/delivered is this process's CPU time
// (user and system) per delivered event.
//
//	go test ./server -run '^$' -bench WatchFanout -benchtime 1000x
func BenchmarkWatchFanout(b *testing.B) {
	const watchers = 1000
	in := servertest.Start(b, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lref := startLeased(b, in)
	taskID := lref.GetTaskId()
	ref, err := protojson.Marshal(lref)
	if err != nil {
		b.Fatal(err)
	}

	helper := func(role string, args ...string) (io.WriteCloser, *bufio.Scanner) {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestWatchFanoutHelperProcess$")
		cmd.Env = append(os.Environ(), "WATCH_FANOUT_HELPER="+role, "WATCH_FANOUT_ADDR="+in.GRPCAddr)
		for i, a := range args {
			cmd.Env = append(cmd.Env, fmt.Sprintf("WATCH_FANOUT_ARG%d=%s", i, a))
		}
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { stdin.Close(); cmd.Wait() })
		return stdin, bufio.NewScanner(stdout)
	}
	// next reads the helper's next number.
	next := func(out *bufio.Scanner) int64 {
		if !out.Scan() {
			b.Fatalf("helper process ended: %v", out.Err())
		}
		n, err := strconv.ParseInt(out.Text(), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	writer, acked := helper("write", string(ref))
	write := func() time.Duration {
		if _, err := io.WriteString(writer, "\n"); err != nil {
			b.Fatal(err)
		}
		return time.Duration(next(acked))
	}
	write()
	got, err := in.Client.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: taskID})
	if err != nil {
		b.Fatal(err)
	}
	// Each watcher starts with the last event written, from the store.
	_, delivered := helper("watch", taskID, strconv.FormatInt(got.GetTask().GetLastSequence()-1, 10), strconv.Itoa(watchers))
	if next(delivered) != 0 { // every watcher is live
		b.Fatal("watchers not ready")
	}
	write()
	for next(delivered) < 1 {
	}

	acks := make([]time.Duration, b.N)
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		acks[i] = write()
		for next(delivered) < int64(i+2) {
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(watchers*b.N), "server-cpu-us/delivered")
	slices.Sort(acks)
	b.ReportMetric(float64(acks[len(acks)/2])/float64(time.Microsecond), "ack-p50-us")
}

// TestWatchFanoutHelperProcess is a client process of BenchmarkWatchFanout, and skips
// unless that benchmark started it. As the writer it appends one event for each line
// it reads and prints each acknowledgement's latency in nanoseconds; as the watchers
// it opens them, prints 0 once every one is live, then n each time every watcher has
// received n events.
func TestWatchFanoutHelperProcess(t *testing.T) {
	role := os.Getenv("WATCH_FANOUT_HELPER")
	if role == "" {
		t.Skip("a helper process of BenchmarkWatchFanout")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dial := func() *grpc.ClientConn {
		c, err := grpc.NewClient(os.Getenv("WATCH_FANOUT_ADDR"), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	arg := func(i int) string { return os.Getenv(fmt.Sprintf("WATCH_FANOUT_ARG%d", i)) }
	out := bufio.NewWriter(os.Stdout)
	print := func(n int64) {
		fmt.Fprintln(out, n)
		if err := out.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	switch role {
	case "write":
		ref := &agentplanev1.LeaseRef{}
		if err := protojson.Unmarshal([]byte(arg(0)), ref); err != nil {
			t.Fatal(err)
		}
		runtime := agentplanev1.NewRuntimeServiceClient(dial())
		lines := bufio.NewScanner(os.Stdin)
		for i := 0; lines.Scan(); i++ {
			start := time.Now()
			m := client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, fmt.Sprintf("bench event %d", i))
			m.Node = "bench"
			_, err := runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref, Events: []*agentplanev1.RuntimeEvent{{
				Payload: &agentplanev1.RuntimeEvent_Message{Message: m},
			}}})
			if err != nil {
				t.Fatal(err)
			}
			print(int64(time.Since(start)))
		}
	case "watch":
		const conns = 8
		after, _ := strconv.ParseInt(arg(1), 10, 64)
		watchers, _ := strconv.Atoi(arg(2))
		var cs []*grpc.ClientConn
		for range conns {
			cs = append(cs, dial())
		}
		var mu sync.Mutex
		var total atomic.Int64
		var wg sync.WaitGroup
		for i := range watchers {
			stream, err := cs[i%conns].NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/agentplane.v1.TaskService/WatchTask",
				grpc.ForceCodecV2(sendOnlyCodec{}))
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.SendMsg(&agentplanev1.WatchTaskRequest{TaskId: arg(0), AfterSequence: after}); err != nil {
				t.Fatal(err)
			}
			if err := stream.CloseSend(); err != nil {
				t.Fatal(err)
			}
			if err := stream.RecvMsg(&emptyMsg{}); err != nil { // the event written before: live
				t.Fatal(err)
			}
			wg.Go(func() {
				for {
					if err := stream.RecvMsg(&emptyMsg{}); err != nil {
						if !errors.Is(err, io.EOF) && ctx.Err() == nil {
							t.Error(err)
						}
						return
					}
					if n := total.Add(1); n%int64(watchers) == 0 {
						mu.Lock()
						print(n / int64(watchers))
						mu.Unlock()
					}
				}
			})
		}
		mu.Lock()
		print(0)
		mu.Unlock()
		io.Copy(io.Discard, os.Stdin) // until the benchmark ends
		cancel()
		wg.Wait()
	}
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

// BenchmarkReportEventsBesideAStuckWatcher is 16 concurrent writers appending an
// event each per ReportEvents to one task, with nobody watching it and with one
// WatchTask stream on it whose client reads nothing after the first event (its
// server-side send blocks once gRPC's flow-control window is full). A watcher that
// falls behind is cut loose to catch up from the store, so the writers' acknowledgement
// latency (ack-p50-us, ack-p99-us) is the same with or without it, and so is the CPU
// time (cpu-us/op, of the server and the writers: one process). Before timing,
// 4,000 events fill the stuck watcher's window and its buffer of live events.
//
//	go test ./server -run '^$' -bench ReportEventsBesideAStuckWatcher -benchtime 5000x -count 3
func BenchmarkReportEventsBesideAStuckWatcher(b *testing.B) {
	for _, stuck := range []bool{false, true} {
		b.Run(fmt.Sprintf("stuck-watcher=%v", stuck), func(b *testing.B) {
			in := servertest.Start(b, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			lref := startLeased(b, in)
			if stuck {
				// Fixed flow-control windows (no BDP estimation, which would let the client's
				// transport take megabytes its reader never asks for): the server's send
				// blocks after 64 KiB.
				conn, err := grpc.NewClient(in.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
					grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { conn.Close() })
				stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/agentplane.v1.TaskService/WatchTask",
					grpc.ForceCodecV2(sendOnlyCodec{}))
				if err == nil {
					err = stream.SendMsg(&agentplanev1.WatchTaskRequest{TaskId: lref.GetTaskId()})
				}
				if err == nil {
					err = stream.CloseSend()
				}
				if err == nil {
					err = stream.RecvMsg(&emptyMsg{}) // the handler runs; nothing is read from here on
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			var n atomic.Int64
			report := func() (time.Duration, error) {
				m := client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, fmt.Sprintf("bench event %d", n.Add(1)))
				m.Node = "bench"
				start := time.Now()
				_, err := in.Client.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: lref, Events: []*agentplanev1.RuntimeEvent{{
					Payload: &agentplanev1.RuntimeEvent_Message{Message: m},
				}}})
				return time.Since(start), err
			}
			const writers = 16
			var wg sync.WaitGroup
			for range writers {
				wg.Go(func() {
					for range 4000 / writers {
						if _, err := report(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			var mu sync.Mutex
			acks := make([]time.Duration, 0, b.N)
			b.SetParallelism(writers / runtime.GOMAXPROCS(0))
			cpu0 := cpuTime()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var mine []time.Duration
				for pb.Next() {
					d, err := report()
					if err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, d)
				}
				mu.Lock()
				acks = append(acks, mine...)
				mu.Unlock()
			})
			b.StopTimer()
			if b.Failed() {
				return
			}
			reportCPU(b, cpu0)
			slices.Sort(acks)
			b.ReportMetric(float64(acks[len(acks)/2])/float64(time.Microsecond), "ack-p50-us")
			b.ReportMetric(float64(acks[len(acks)*99/100])/float64(time.Microsecond), "ack-p99-us")
		})
	}
}
