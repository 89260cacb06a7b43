package cli

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

// fakeCP is a control plane with canned answers for the user and admin commands
// (TaskService, HitlService, AdminService). It records every request so that tests
// check what ctl sent, and it can drop a watch stream to test reconnection.
type fakeCP struct {
	agentplanev1.UnimplementedTaskServiceServer
	agentplanev1.UnimplementedHitlServiceServer
	agentplanev1.UnimplementedAdminServiceServer

	mu   sync.Mutex
	reqs []proto.Message

	err         error // when set, every unary call fails with it
	task        *agentplanev1.Task
	taskPages   []*agentplanev1.ListTasksResponse // answered in order of page token "", "1", "2", ...
	verdicts    []*agentplanev1.ListVerdictsResponse
	obligations []*agentplanev1.ListObligationsResponse
	interrupt   *agentplanev1.Interrupt
	inbox       *agentplanev1.ListInterruptsResponse
	stats       *agentplanev1.GetStatsResponse
	purge       *agentplanev1.PurgeTasksResponse

	events   []*agentplanev1.TaskEvent // the task's log
	drops    []int64                   // each watch stream ends with UNAVAILABLE after this sequence, in order
	watchEOF bool                      // streams end cleanly instead (after the last event)

	backup      [][]byte
	backupTotal int64
}

// grpcErrOf converts an apierr into the status error a server sends.
func grpcErrOf(e *apierr.Error) error {
	st, _ := apierr.ToStatus(e)
	return st.Err()
}

func startFakeCP(t *testing.T, f *fakeCP) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	agentplanev1.RegisterTaskServiceServer(srv, f)
	agentplanev1.RegisterHitlServiceServer(srv, f)
	agentplanev1.RegisterAdminServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// record notes a request and returns the canned error, if any.
func (f *fakeCP) record(req proto.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	return f.err
}

// requests returns the recorded requests of type T.
func requests[T proto.Message](f *fakeCP) []T {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []T
	for _, r := range f.reqs {
		if m, ok := r.(T); ok {
			out = append(out, m)
		}
	}
	return out
}

func page[T any](pages []T, token string) (T, error) {
	var zero T
	i := 0
	if token != "" {
		i = int(token[0] - '0')
	}
	if i >= len(pages) {
		return zero, status.Error(codes.InvalidArgument, "bad page token")
	}
	return pages[i], nil
}

func (f *fakeCP) StartTask(_ context.Context, req *agentplanev1.StartTaskRequest) (*agentplanev1.StartTaskResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return &agentplanev1.StartTaskResponse{Task: f.task, Created: req.GetRequestId() != "again"}, nil
}

func (f *fakeCP) GetTask(_ context.Context, req *agentplanev1.GetTaskRequest) (*agentplanev1.GetTaskResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return &agentplanev1.GetTaskResponse{Task: f.task}, nil
}

func (f *fakeCP) CancelTask(_ context.Context, req *agentplanev1.CancelTaskRequest) (*agentplanev1.CancelTaskResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return &agentplanev1.CancelTaskResponse{Task: f.task}, nil
}

func (f *fakeCP) ContinueTask(_ context.Context, req *agentplanev1.ContinueTaskRequest) (*agentplanev1.ContinueTaskResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return &agentplanev1.ContinueTaskResponse{Task: f.task}, nil
}

func (f *fakeCP) ListTasks(_ context.Context, req *agentplanev1.ListTasksRequest) (*agentplanev1.ListTasksResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return page(f.taskPages, req.GetPageToken())
}

func (f *fakeCP) ListVerdicts(_ context.Context, req *agentplanev1.ListVerdictsRequest) (*agentplanev1.ListVerdictsResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return page(f.verdicts, req.GetPageToken())
}

func (f *fakeCP) ListObligations(_ context.Context, req *agentplanev1.ListObligationsRequest) (*agentplanev1.ListObligationsResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return page(f.obligations, req.GetPageToken())
}

// WatchTask replays events after the requested sequence; the n-th stream is cut
// with UNAVAILABLE after sequence drops[n], when there is such an entry.
func (f *fakeCP) WatchTask(req *agentplanev1.WatchTaskRequest, stream grpc.ServerStreamingServer[agentplanev1.WatchTaskResponse]) error {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	drop := int64(-1)
	if len(f.drops) > 0 {
		drop, f.drops = f.drops[0], f.drops[1:]
	}
	f.mu.Unlock()
	for _, ev := range f.events {
		if ev.GetSequence() <= req.GetAfterSequence() {
			continue
		}
		if drop >= 0 && ev.GetSequence() > drop {
			return status.Error(codes.Unavailable, "connection reset by the test")
		}
		if err := stream.Send(&agentplanev1.WatchTaskResponse{Kind: &agentplanev1.WatchTaskResponse_Event{Event: ev}}); err != nil {
			return err
		}
	}
	if drop >= 0 {
		return status.Error(codes.Unavailable, "connection reset by the test")
	}
	if f.watchEOF {
		return nil
	}
	<-stream.Context().Done() // a live task: follow until the client goes
	return nil
}

func (f *fakeCP) ListInterrupts(_ context.Context, req *agentplanev1.ListInterruptsRequest) (*agentplanev1.ListInterruptsResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return f.inbox, nil
}

func (f *fakeCP) GetInterrupt(_ context.Context, req *agentplanev1.GetInterruptRequest) (*agentplanev1.GetInterruptResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return &agentplanev1.GetInterruptResponse{Interrupt: f.interrupt}, nil
}

func (f *fakeCP) ResolveInterrupt(_ context.Context, req *agentplanev1.ResolveInterruptRequest) (*agentplanev1.ResolveInterruptResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return &agentplanev1.ResolveInterruptResponse{Interrupt: f.interrupt}, nil
}

func (f *fakeCP) RevokeApprovalLink(_ context.Context, req *agentplanev1.RevokeApprovalLinkRequest) (*agentplanev1.RevokeApprovalLinkResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return &agentplanev1.RevokeApprovalLinkResponse{LinkId: req.GetLinkId(), ExpireTime: timestamppb.New(time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC))}, nil
}

func (f *fakeCP) Backup(req *agentplanev1.BackupRequest, stream grpc.ServerStreamingServer[agentplanev1.BackupResponse]) error {
	if err := f.record(req); err != nil {
		return err
	}
	for i, chunk := range f.backup {
		resp := &agentplanev1.BackupResponse{Chunk: chunk}
		if i == 0 {
			resp.TotalBytes = f.backupTotal
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeCP) GetStats(_ context.Context, req *agentplanev1.GetStatsRequest) (*agentplanev1.GetStatsResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return f.stats, nil
}

func (f *fakeCP) PurgeTasks(_ context.Context, req *agentplanev1.PurgeTasksRequest) (*agentplanev1.PurgeTasksResponse, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return f.purge, nil
}
