package worker

import (
	"context"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker/workertest"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// lossy passes calls to the fake and loses the response of the first ReportEvents and
// the first CompleteTask (UNAVAILABLE after the fake applied them); a repeated call
// with a request id it already saw is answered as the control plane would, from the
// first call, without reaching the fake again.
type lossy struct {
	agentplanev1.RuntimeServiceClient
	mu   sync.Mutex
	seen map[string]int // calls per request id
}

func (l *lossy) again(id string) (repeat bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen[id]++
	return l.seen[id] > 1
}

func (l *lossy) ReportEvents(ctx context.Context, in *agentplanev1.ReportEventsRequest, opts ...grpc.CallOption) (*agentplanev1.ReportEventsResponse, error) {
	if l.again(in.GetRequestId()) {
		return &agentplanev1.ReportEventsResponse{LastSequence: 1}, nil
	}
	if _, err := l.RuntimeServiceClient.ReportEvents(ctx, in, opts...); err != nil {
		return nil, err
	}
	return nil, status.Error(codes.Unavailable, "response lost")
}

func (l *lossy) CompleteTask(ctx context.Context, in *agentplanev1.CompleteTaskRequest, opts ...grpc.CallOption) (*agentplanev1.CompleteTaskResponse, error) {
	if l.again(in.GetRequestId()) {
		return &agentplanev1.CompleteTaskResponse{}, nil
	}
	if _, err := l.RuntimeServiceClient.CompleteTask(ctx, in, opts...); err != nil {
		return nil, err
	}
	return nil, status.Error(codes.DeadlineExceeded, "response lost")
}

// TestWritesAreRepeatedWithTheirRequestID: a write whose response is lost is made
// again with the same request id, and the handler sees the repeat's success; each
// write has an id of its own. The first heartbeat goes out before the handler runs,
// acknowledging the lease.
func TestWritesAreRepeatedWithTheirRequestID(t *testing.T) {
	f := workertest.New(t)
	rt := &lossy{RuntimeServiceClient: f.Runtime(), seen: map[string]int{}}
	f.Enqueue("t1", func(l *agentplanev1.Lease) { l.LeaseId = "L" })
	beatsAtStart := -1
	r := startWorker(t, rt, func(ctx context.Context, task *Task) error {
		f.Do(func(s *workertest.State) { beatsAtStart = s.Beats["L"] })
		if err := task.Say(ctx, "hello"); err != nil {
			return err
		}
		return task.Complete(ctx, &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "done")})
	}, once)
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	s := snapshot(f)
	if s.Ends["t1"] != "completed" || len(s.Events["t1"]) != 1 {
		t.Fatalf("end %q, events %v; want completed with one message (failure %v)", s.Ends["t1"], s.Events["t1"], s.Failures["t1"])
	}
	if len(rt.seen) != 2 {
		t.Fatalf("request ids %v; want one per write", rt.seen)
	}
	for id, n := range rt.seen {
		if id == "" || n != 2 {
			t.Fatalf("request ids %v; want each sent twice", rt.seen)
		}
	}
	if beatsAtStart < 1 {
		t.Fatal("the handler ran before the lease was acknowledged by a heartbeat")
	}
}
