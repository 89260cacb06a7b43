package server_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
)

// TestIdleWatchHoldsOneServerGoroutine: an open WatchTask stream holds its handler's
// goroutine and nothing more on the server (the end at shutdown is a callback, not a
// goroutine waiting for it), so that ten thousand idle watches cost ten thousand
// goroutines' stacks, not twenty. The client's side of the streams, in this same
// process, holds well under one goroutine per stream: fewer than 1.8 per watch in all
// (2.4 with a goroutine per watch waiting for shutdown).
func TestIdleWatchHoldsOneServerGoroutine(t *testing.T) {
	in := servertest.Start(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lref := startLeased(t, in)
	got, err := in.Client.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: lref.GetTaskId()})
	if err != nil {
		t.Fatal(err)
	}
	watcher, err := client.Dial(ctx, in.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	settle := func() int {
		n := runtime.NumGoroutine()
		for range 50 { // until the count stops moving
			time.Sleep(20 * time.Millisecond)
			m := runtime.NumGoroutine()
			if m == n {
				return n
			}
			n = m
		}
		return n
	}
	before := settle()
	const watches = 200
	for range watches {
		stream, err := watcher.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: lref.GetTaskId(), AfterSequence: got.GetTask().GetLastSequence()})
		if err != nil {
			t.Fatal(err)
		}
		if msg, err := stream.Recv(); err != nil || msg.GetCaughtUp() == nil {
			t.Fatalf("the watch is not live: %v, %v", msg, err)
		}
	}
	per := float64(settle()-before) / watches
	t.Logf("%.2f goroutines per watch", per)
	if per > 1.8 {
		t.Fatalf("each idle watch holds %.2f goroutines in this process (the client's and the server's), want about 1", per)
	}
}
