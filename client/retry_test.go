package client_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

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

// TestRetryTableIsTheAPIs: the generated table (api_gen.go) has every agentplane.v1 RPC
// with the idempotency_level and request_id its descriptor has, so a proto change
// that was not regenerated fails here too, not only in CI's freshness check.
func TestRetryTableIsTheAPIs(t *testing.T) {
	n := 0
	protoregistry.GlobalFiles.RangeFilesByPackage("agentplane.v1", func(f protoreflect.FileDescriptor) bool {
		for i := range f.Services().Len() {
			s := f.Services().Get(i)
			for j := range s.Methods().Len() {
				m := s.Methods().Get(j)
				n++
				method := "/" + string(s.FullName()) + "/" + string(m.Name())
				level := m.Options().(*descriptorpb.MethodOptions).GetIdempotencyLevel()
				err := status.Error(codes.Unavailable, "transport")
				if got, want := client.Retryable(method, err), level != descriptorpb.MethodOptions_IDEMPOTENCY_UNKNOWN; got != want {
					t.Errorf("%s (%s): Retryable after UNAVAILABLE = %v", method, level, got)
				}
				if m.Input().Fields().ByName("request_id") != nil && level != descriptorpb.MethodOptions_IDEMPOTENT {
					t.Errorf("%s has a request_id but is %s", method, level)
				}
			}
		}
		return true
	})
	if n < 30 {
		t.Fatalf("only %d RPCs found in agentplane.v1", n)
	}
}

// TestRetryable: a declared reason decides by its retryable flag, whatever its code; an
// error without one by its code; a call without an idempotency level never.
func TestRetryable(t *testing.T) {
	withReason := func(c codes.Code, reason string) error {
		st, err := status.New(c, "m").WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "agentplane.dev"})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	const (
		get    = "/agentplane.v1.TaskService/GetTask"
		start  = "/agentplane.v1.TaskService/StartTask"
		retryD = "/agentplane.v1.AdminService/RetryWebhookDeadLetter"
	)
	for _, tc := range []struct {
		method string
		err    error
		want   bool
	}{
		{get, status.Error(codes.Unavailable, "x"), true},
		{start, status.Error(codes.DeadlineExceeded, "x"), true},
		{start, status.Error(codes.Internal, "x"), false},
		{start, status.Error(codes.ResourceExhausted, "x"), false},
		{retryD, status.Error(codes.Unavailable, "x"), false},
		{retryD, withReason(codes.Unavailable, client.ReasonStoreUnavailable), false},
		{start, withReason(codes.ResourceExhausted, client.ReasonLimitConcurrency), true},
		{start, withReason(codes.ResourceExhausted, client.ReasonLimitExceeded), false},
		{get, withReason(codes.Unavailable, client.ReasonServerUnavailable), true},
		{get, withReason(codes.NotFound, client.ReasonTaskNotFound), false},
		{get, withReason(codes.Unavailable, "some.other_domains_reason"), true},
		{"/other.Service/Call", status.Error(codes.Unavailable, "x"), false},
	} {
		if got := client.Retryable(tc.method, tc.err); got != tc.want {
			t.Errorf("Retryable(%s, %v) = %v, want %v", tc.method, tc.err, got, tc.want)
		}
	}
	if client.ReasonName(client.ReasonLeaseLost) != "LEASE_LOST" || !client.RetryableReason(client.ReasonStoreUnavailable) || client.RetryableReason(client.ReasonLeaseLost) {
		t.Error("the generated reason table disagrees with errors.proto")
	}
}
