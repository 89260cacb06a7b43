package client_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// flaky is a TaskService whose CancelTask applies the call, then loses the first
// response (UNAVAILABLE), as a connection dropped on the way back would.
type flaky struct {
	agentplanev1.UnimplementedTaskServiceServer
	mu  sync.Mutex
	ids []string
}

func (f *flaky) CancelTask(_ context.Context, req *agentplanev1.CancelTaskRequest) (*agentplanev1.CancelTaskResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ids = append(f.ids, req.GetRequestId())
	if len(f.ids) == 1 {
		return nil, status.Error(codes.Unavailable, "response lost")
	}
	return &agentplanev1.CancelTaskResponse{Task: &agentplanev1.Task{TaskId: req.GetTaskId()}}, nil
}

func (f *flaky) PauseNothing() {}

// TestRetriesCarryTheSameRequestID: a mutating call sent without a request_id gets
// one, and its retry after UNAVAILABLE carries the same id, so the server can answer
// it from the first call; the caller's request is not modified.
func TestRetriesCarryTheSameRequestID(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	f := &flaky{}
	agentplanev1.RegisterTaskServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, lis.Addr().String(), client.WithRetry(client.Retry{Initial: time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := &agentplanev1.CancelTaskRequest{TaskId: "t1"}
	resp, err := c.Tasks.CancelTask(ctx, req)
	if err != nil || resp.GetTask().GetTaskId() != "t1" {
		t.Fatalf("CancelTask = %v, %v; want the retry's success", resp, err)
	}
	if len(f.ids) != 2 || f.ids[0] == "" || f.ids[0] != f.ids[1] {
		t.Fatalf("request ids sent: %q; want one id, twice", f.ids)
	}
	if req.GetRequestId() != "" {
		t.Fatal("the caller's request was modified")
	}

	// Retrying off: the lost response is the caller's to handle.
	f.ids = nil
	c2, err := client.Dial(ctx, lis.Addr().String(), client.WithRetry(client.Retry{Attempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Tasks.CancelTask(ctx, &agentplanev1.CancelTaskRequest{TaskId: "t1", RequestId: "mine"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("CancelTask without retries = %v; want UNAVAILABLE", err)
	}
	if len(f.ids) != 1 || f.ids[0] != "mine" {
		t.Fatalf("request ids sent: %q", f.ids)
	}
}
