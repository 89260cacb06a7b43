package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// breakingWatch is a TaskService whose WatchTask sends the events after after_sequence
// up to its current end, then breaks the stream with err (UNAVAILABLE, as a server
// going away does), recording the after_sequence of every opening.
type breakingWatch struct {
	agentplanev1.UnimplementedTaskServiceServer
	mu     sync.Mutex
	opened []int64
	end    int64 // events 1..end exist
	err    error
	final  bool // the task ended: the stream ends OK after event end
}

func (b *breakingWatch) WatchTask(req *agentplanev1.WatchTaskRequest, stream agentplanev1.TaskService_WatchTaskServer) error {
	b.mu.Lock()
	b.opened = append(b.opened, req.GetAfterSequence())
	end, err, final := b.end, b.err, b.final
	b.mu.Unlock()
	// A replay that starts one event early, as a server may: the client drops the repeat.
	for seq := max(req.GetAfterSequence(), 1); seq <= end; seq++ {
		if err := stream.Send(&agentplanev1.WatchTaskResponse{Kind: &agentplanev1.WatchTaskResponse_Event{Event: &agentplanev1.TaskEvent{Sequence: seq}}}); err != nil {
			return err
		}
	}
	if final {
		return nil
	}
	return err
}

func serveTasks(t *testing.T, srv agentplanev1.TaskServiceServer) *client.Client {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	agentplanev1.RegisterTaskServiceServer(g, srv)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	c, err := client.Dial(context.Background(), lis.Addr().String(), client.WithRetry(client.Retry{Initial: time.Millisecond, Max: time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestWatchResumesAfterTheLastEvent: a stream broken by UNAVAILABLE is reopened after the
// last event delivered, each event comes once, and the watch ends with io.EOF when the
// task's stream ends.
func TestWatchResumesAfterTheLastEvent(t *testing.T) {
	b := &breakingWatch{end: 2, err: status.Error(codes.Unavailable, "server going away")}
	c := serveTasks(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := c.Watch(ctx, "t1", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for {
		m, err := w.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		got = append(got, m.GetEvent().GetSequence())
		if len(got) == 2 {
			b.mu.Lock()
			b.end, b.final = 4, true // the next opening finds two more events and the end
			b.mu.Unlock()
		}
	}
	if want := []int64{1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("events %v; want %v", got, want)
	}
	if want := []int64{0, 2}; !slices.Equal(b.opened, want) {
		t.Errorf("openings after %v; want %v", b.opened, want)
	}
}

// TestWatchGivesUp: WatchReconnects reopenings in a row without a message (or more, until
// they have taken WatchReconnects times the longest pause), then the last error; an
// error with a reason that is not retryable ends the watch at once.
func TestWatchGivesUp(t *testing.T) {
	b := &breakingWatch{err: status.Error(codes.Unavailable, "down")}
	c := serveTasks(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := c.Watch(ctx, "t1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("Recv = %v; want the last UNAVAILABLE", err)
	}
	if len(b.opened) < 1+client.WatchReconnects {
		t.Errorf("%d openings; want 1 + at least %d reopenings", len(b.opened), client.WatchReconnects)
	}

	nf := &breakingWatch{err: status.Error(codes.InvalidArgument, "after_sequence beyond the end")}
	w, err = serveTasks(t, nf).Watch(ctx, "t1", 0)
	if err == nil {
		_, err = w.Recv()
	}
	if status.Code(err) != codes.InvalidArgument || len(nf.opened) != 1 {
		t.Errorf("Recv = %v after %d openings; want INVALID_ARGUMENT after one", err, len(nf.opened))
	}
}

// holdingWatch is a TaskService whose WatchTask sends the events after after_sequence
// up to its current end and then holds the stream open (until the task ends: then it
// ends the stream after event end).
type holdingWatch struct {
	agentplanev1.UnimplementedTaskServiceServer
	mu    sync.Mutex
	end   int64
	final bool
}

func (h *holdingWatch) WatchTask(req *agentplanev1.WatchTaskRequest, stream agentplanev1.TaskService_WatchTaskServer) error {
	h.mu.Lock()
	end, final := h.end, h.final
	h.mu.Unlock()
	for seq := req.GetAfterSequence() + 1; seq <= end; seq++ {
		if err := stream.Send(&agentplanev1.WatchTaskResponse{Kind: &agentplanev1.WatchTaskResponse_Event{Event: &agentplanev1.TaskEvent{Sequence: seq}}}); err != nil {
			return err
		}
	}
	if final {
		return nil
	}
	<-stream.Context().Done()
	return stream.Context().Err()
}

// TestWatchSurvivesAnOutage: a server stopped for 6 s and then started again on the
// same address costs a watch with the default policy nothing. Meanwhile gRPC's channel
// backs off reconnecting (1 s, growing 1.6 times each time, jittered), so it may try
// again only seconds after the server is back, and it fails every reopening before that
// at once: counted alone, the 10 reopenings (their pauses 6.5 to 13.1 s in all) were
// used up first. Here the channel waits 15 s before its second connect (the wait the
// default backoff reaches after five failed connects, without jitter), so that the
// outcome does not depend on the draw: past 13.1 s, within the 20 s budget.
func TestWatchSurvivesAnOutage(t *testing.T) {
	h := &holdingWatch{end: 2}
	serve := func(lis net.Listener) *grpc.Server {
		g := grpc.NewServer()
		agentplanev1.RegisterTaskServiceServer(g, h)
		go func() { _ = g.Serve(lis) }()
		t.Cleanup(g.Stop)
		return g
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	first := serve(lis)
	c, err := client.Dial(context.Background(), addr, client.WithDialOptions(grpc.WithConnectParams(grpc.ConnectParams{
		Backoff: backoff.Config{BaseDelay: 15 * time.Second, Multiplier: 1, MaxDelay: 15 * time.Second},
	}))) // the default retry policy
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := c.Watch(ctx, "t1", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for len(got) < 2 {
		m, err := w.Recv()
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		got = append(got, m.GetEvent().GetSequence())
	}
	first.Stop()
	h.mu.Lock()
	h.end, h.final = 4, true // the restarted server has two more events and the end
	h.mu.Unlock()
	restarted := make(chan error, 1)
	go func() {
		time.Sleep(6 * time.Second) // the outage
		lis, err := net.Listen("tcp", addr)
		if err == nil {
			serve(lis)
		}
		restarted <- err
	}()
	for {
		m, err := w.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %v: %v (the watch gave up during the outage)", got, err)
		}
		got = append(got, m.GetEvent().GetSequence())
	}
	if err := <-restarted; err != nil {
		t.Fatalf("restarting on %s: %v", addr, err)
	}
	if want := []int64{1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("events %v; want %v", got, want)
	}
}
