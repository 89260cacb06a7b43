package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

func runFanout(args []string) error {
	fs := flag.NewFlagSet("millionbench fanout", flag.ContinueOnError)
	bin := fs.String("controlplane", "", "the control plane binary (go build ./cmd/controlplane)")
	dataDir := fs.String("data-dir", "", "the control plane's data directory (a fresh one, or a tools/millionstore store)")
	etcdBin := fs.String("etcd", "", "the etcd binary (../shared/bench/etcd-peer.sh builds one)")
	etcdDir := fs.String("etcd-data-dir", "", "etcd's data directory (default: a temporary one)")
	watchers := fs.Int("watchers", 1000, "watchers of the one task or key")
	conns := fs.Int("conns", 8, "client connections the watchers share")
	writes := fs.Int("writes", 1000, "timed writes per round")
	rounds := fs.Int("rounds", 3, "rounds, each agentplane then etcd")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bin == "" || *dataDir == "" || *etcdBin == "" {
		return errors.New("--controlplane, --data-dir and --etcd are required")
	}
	ctx := context.Background()
	for r := range *rounds {
		ap, err := fanoutAgentplane(ctx, *bin, *dataDir, *watchers, *conns, *writes)
		if err != nil {
			return err
		}
		et, err := fanoutEtcd(ctx, *etcdBin, *etcdDir, *watchers, *conns, *writes)
		if err != nil {
			return err
		}
		a50, a99 := percentiles(ap)
		e50, e99 := percentiles(et)
		fmt.Printf("round %d: %d watchers, %d writes: agentplane p50=%s ms p99=%s ms; etcd p50=%s ms p99=%s ms; agentplane/etcd p50=%.2f p99=%.2f\n",
			r+1, *watchers, *writes, ms(a50), ms(a99), ms(e50), ms(e99), float64(a50)/float64(e50), float64(a99)/float64(e99))
	}
	return nil
}

// probe is the delivery measurement both servers get: watchers opened by open (each
// returning once its stream is live), then, for each write, the time from its start
// until every watcher has received it. recv is a watcher's loop: it calls got for
// each delivery and returns when its stream ends.
type probe struct {
	watchers int
	writes   int
	// open opens watcher i and returns its receive loop once it is live.
	open func(ctx context.Context, i int) (recv func(got func()) error, err error)
	// write writes once and returns when the write is acknowledged.
	write func(ctx context.Context, i int) error
}

func (p probe) run(ctx context.Context) ([]time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex
		pending int
		done    = make(chan struct{}, 1)
		last    time.Time
		wg      sync.WaitGroup
		failure atomic.Value
	)
	got := func() {
		mu.Lock()
		pending--
		if pending == 0 {
			last = time.Now()
			done <- struct{}{}
		}
		mu.Unlock()
	}
	for i := range p.watchers {
		recv, err := p.open(ctx, i)
		if err != nil {
			return nil, fmt.Errorf("watcher %d: %w", i, err)
		}
		wg.Go(func() {
			if err := recv(got); err != nil && ctx.Err() == nil {
				failure.Store(err)
			}
		})
	}
	defer wg.Wait()
	defer cancel()
	lat := make([]time.Duration, 0, p.writes)
	for i := range p.writes + 10 { // 10 untimed, to warm up
		mu.Lock()
		pending = p.watchers
		mu.Unlock()
		start := time.Now()
		if err := p.write(ctx, i); err != nil {
			return nil, err
		}
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			if err, _ := failure.Load().(error); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("write %d: not every watcher received it within 30 s", i)
		}
		if i >= 10 {
			mu.Lock()
			lat = append(lat, last.Sub(start))
			mu.Unlock()
		}
	}
	return lat, nil
}

// fanoutAgentplane runs the probe against a control plane on dataDir.
func fanoutAgentplane(ctx context.Context, bin, dataDir string, watchers, conns, writes int) ([]time.Duration, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	srv, _, err := startServer(ctx, bin, dataDir, port)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	return probeAgentplane(ctx, srv.addr, watchers, conns, writes)
}

// probeAgentplane runs the probe against the control plane at addr: 1 task, leased by
// the probe, watched by every watcher; each write is one ReportEvents of one
// assistant message.
func probeAgentplane(ctx context.Context, addr string, watchers, conns, writes int) ([]time.Duration, error) {
	c, err := client.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	queue := "fanout-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	doc := []byte(`{"apiVersion":"qar/v1","kind":"AgentSpec","instructions":"Be brief.","model":"m"}`)
	if _, err := c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{Queue: queue,
		Source: &agentplanev1.StartTaskRequest_Document{Document: doc}, Input: client.UserText("hi")}); err != nil {
		return nil, err
	}
	resp, err := c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "fanout", Queues: []string{queue}})
	if err != nil || len(resp.GetLeases()) != 1 {
		return nil, fmt.Errorf("leasing the probe's task: %v, %v", resp, err)
	}
	l := resp.GetLeases()[0]
	ref := &agentplanev1.LeaseRef{TaskId: l.GetTask().GetTaskId(), LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
	// Heartbeats keep the lease while the probe runs (it may outlast the lease's TTL).
	hctx, stopBeats := context.WithCancel(ctx)
	defer stopBeats()
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
				_, _ = c.Runtime.Heartbeat(hctx, &agentplanev1.HeartbeatRequest{Lease: ref})
			}
		}
	}()
	got, err := c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: ref.GetTaskId()})
	if err != nil {
		return nil, err
	}
	after := got.GetTask().GetLastSequence()
	cs, err := dialN(addr, conns)
	if err != nil {
		return nil, err
	}
	defer closeAll(cs)
	return probe{watchers: watchers, writes: writes,
		open: func(ctx context.Context, i int) (func(func()) error, error) {
			stream, err := cs[i%len(cs)].NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, agentplanev1.TaskService_WatchTask_FullMethodName,
				grpc.ForceCodecV2(rawCodec{}))
			if err == nil {
				err = stream.SendMsg(&agentplanev1.WatchTaskRequest{TaskId: ref.GetTaskId(), AfterSequence: after})
			}
			if err == nil {
				err = stream.CloseSend()
			}
			return follow(stream, err,
				func(b []byte) bool { return topField(b) == 2 }, // live once caught up
				func(b []byte) bool { return topField(b) == 1 }) // an event, not a keepalive
		},
		write: func(ctx context.Context, i int) error {
			m := client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, fmt.Sprintf("fanout event %d", i))
			_, err := c.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref, Events: []*agentplanev1.RuntimeEvent{{
				Payload: &agentplanev1.RuntimeEvent_Message{Message: m}}}})
			return err
		},
	}.run(ctx)
}

// follow reads stream (opened, unless err) until a message live says makes it live,
// then returns its receive loop for the probe: got for each message event says is one.
func follow(stream grpc.ClientStream, err error, live, event func([]byte) bool) (func(got func()) error, error) {
	for err == nil {
		var b []byte
		if err = stream.RecvMsg(&b); err == nil && live(b) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	return func(got func()) error {
		for {
			var b []byte
			if err := stream.RecvMsg(&b); err != nil {
				return err
			}
			if event(b) {
				got()
			}
		}
	}, nil
}

// topField is the number of the first field of an encoded message (0 if none): which
// arm of a oneof a response carries, read without decoding it.
func topField(b []byte) protowire.Number {
	n, _, l := protowire.ConsumeTag(b)
	if l < 0 {
		return 0
	}
	return n
}

// rawCodec sends proto messages (or raw bytes) and receives raw bytes, undecoded.
type rawCodec struct{}

func (rawCodec) Marshal(m any) (mem.BufferSlice, error) {
	switch v := m.(type) {
	case []byte:
		return mem.BufferSlice{mem.SliceBuffer(v)}, nil
	case proto.Message:
		b, err := proto.Marshal(v)
		return mem.BufferSlice{mem.SliceBuffer(b)}, err
	}
	return nil, fmt.Errorf("rawCodec: cannot marshal %T", m)
}

func (rawCodec) Unmarshal(data mem.BufferSlice, m any) error {
	p, ok := m.(*[]byte)
	if !ok {
		return fmt.Errorf("rawCodec: cannot unmarshal into %T", m)
	}
	*p = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }
