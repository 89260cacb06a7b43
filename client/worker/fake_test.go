package worker

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

// fakeRuntime is an in-memory RuntimeService with just the behaviour the SDK relies
// on: a queue of leases, fenced writes refused with lease.lost for leases marked lost,
// heartbeats that extend by ttl and report cancellation, a scripted gate, and
// decisions delivered on AwaitDecision when the test resolves an interrupt.
type fakeRuntime struct {
	agentplanev1.UnimplementedRuntimeServiceServer

	ttl time.Duration

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every recorded call
	queue     []*agentplanev1.Lease
	leaseErrs []error // returned by the next LeaseTasks calls, in order
	maxAsked  []int32
	inFlight  int // leases granted and not ended
	peak      int // most leases held at once
	lost      map[string]bool
	canceled  map[string]string // task id -> reason
	beats     map[string]int    // lease id -> heartbeats
	events    map[string][]*agentplanev1.RuntimeEvent
	ends      map[string]string // task id -> completed, failed, retried, paused, suspended
	failures  map[string]*agentplanev1.FailTaskRequest
	outputs   map[string]*agentplanev1.TaskOutput
	pauses    map[string]*agentplanev1.PauseTaskRequest
	verdicts  []*agentplanev1.RecordVerdictRequest
	checks    []*agentplanev1.CheckToolCallRequest
	gate      func(*agentplanev1.CheckToolCallRequest) *agentplanev1.CheckToolCallResponse
	decisions map[string]*agentplanev1.Decision // interrupt id -> decision, once resolved
	awaiting  map[string]int                    // interrupt id -> open AwaitDecision streams
	dropAwait int                               // the next AwaitDecision streams fail with UNAVAILABLE
	beatErr   error                             // when set, every heartbeat fails with it
}

func newFake(t *testing.T) (*fakeRuntime, agentplanev1.RuntimeServiceClient) {
	t.Helper()
	f := &fakeRuntime{
		ttl:       time.Minute,
		changed:   make(chan struct{}),
		lost:      map[string]bool{},
		canceled:  map[string]string{},
		beats:     map[string]int{},
		events:    map[string][]*agentplanev1.RuntimeEvent{},
		ends:      map[string]string{},
		failures:  map[string]*agentplanev1.FailTaskRequest{},
		outputs:   map[string]*agentplanev1.TaskOutput{},
		pauses:    map[string]*agentplanev1.PauseTaskRequest{},
		decisions: map[string]*agentplanev1.Decision{},
		awaiting:  map[string]int{},
	}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	agentplanev1.RegisterRuntimeServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
	})
	return f, agentplanev1.NewRuntimeServiceClient(conn)
}

func grpcErr(e *apierr.Error) error {
	st, _ := apierr.ToStatus(e)
	return st.Err()
}

// notify must be called with f.mu held.
func (f *fakeRuntime) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// waitFor blocks until cond (called with f.mu held) is true, failing the test after
// a deadline. It wakes on every recorded call rather than sleeping.
func (f *fakeRuntime) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		f.mu.Lock()
		ok, ch := cond(), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// enqueue makes a task available for leasing.
func (f *fakeRuntime) enqueue(taskID string, mutate func(*agentplanev1.Lease)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := &agentplanev1.Lease{
		LeaseId: fmt.Sprintf("%s-l%d", taskID, len(f.queue)+len(f.ends)+1),
		Epoch:   1,
		Attempt: 1,
		Task:    &agentplanev1.Task{TaskId: taskID, Input: "input of " + taskID, State: agentplanev1.TaskState_TASK_STATE_WORKING},
	}
	if mutate != nil {
		mutate(l)
	}
	f.queue = append(f.queue, l)
	f.notify()
}

func (f *fakeRuntime) LeaseTasks(ctx context.Context, req *agentplanev1.LeaseTasksRequest) (*agentplanev1.LeaseTasksResponse, error) {
	timeout := time.After(req.GetWait().AsDuration())
	for {
		f.mu.Lock()
		if len(f.leaseErrs) > 0 {
			err := f.leaseErrs[0]
			f.leaseErrs = f.leaseErrs[1:]
			f.notify()
			f.mu.Unlock()
			return nil, err
		}
		if len(f.queue) > 0 {
			f.maxAsked = append(f.maxAsked, req.GetMaxTasks())
			n := min(int(max(req.GetMaxTasks(), 1)), len(f.queue))
			granted := f.queue[:n]
			f.queue = f.queue[n:]
			for _, l := range granted {
				if l.Deadline == nil {
					l.Deadline = timestamppb.New(time.Now().Add(f.ttl))
				}
			}
			f.inFlight += n
			f.peak = max(f.peak, f.inFlight)
			f.notify()
			f.mu.Unlock()
			return &agentplanev1.LeaseTasksResponse{Leases: granted}, nil
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-timeout:
			return &agentplanev1.LeaseTasksResponse{}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// fenced checks a lease under f.mu.
func (f *fakeRuntime) fenced(ref *agentplanev1.LeaseRef) error {
	if f.lost[ref.GetLeaseId()] {
		return grpcErr(apierr.FailedPrecondition(apierr.ReasonLeaseLost, "lease %s of task %s is no longer held", ref.GetLeaseId(), ref.GetTaskId()))
	}
	if _, ended := f.ends[ref.GetTaskId()]; ended {
		return grpcErr(apierr.FailedPrecondition(apierr.ReasonLeaseLost, "lease %s was released", ref.GetLeaseId()))
	}
	return nil
}

func (f *fakeRuntime) Heartbeat(_ context.Context, req *agentplanev1.HeartbeatRequest) (*agentplanev1.HeartbeatResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.notify()
	if err := f.fenced(req.GetLease()); err != nil {
		return nil, err
	}
	if f.beatErr != nil {
		return nil, f.beatErr
	}
	f.beats[req.GetLease().GetLeaseId()]++
	reason, canceled := f.canceled[req.GetLease().GetTaskId()]
	return &agentplanev1.HeartbeatResponse{Deadline: timestamppb.New(time.Now().Add(f.ttl)), Canceled: canceled, CancelReason: reason}, nil
}

func (f *fakeRuntime) ReportEvents(_ context.Context, req *agentplanev1.ReportEventsRequest) (*agentplanev1.ReportEventsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.notify()
	if err := f.fenced(req.GetLease()); err != nil {
		return nil, err
	}
	id := req.GetLease().GetTaskId()
	f.events[id] = append(f.events[id], req.GetEvents()...)
	return &agentplanev1.ReportEventsResponse{LastSequence: int64(len(f.events[id]))}, nil
}

func (f *fakeRuntime) CheckToolCall(_ context.Context, req *agentplanev1.CheckToolCallRequest) (*agentplanev1.CheckToolCallResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.notify()
	if err := f.fenced(req.GetLease()); err != nil {
		return nil, err
	}
	f.checks = append(f.checks, req)
	if f.gate == nil {
		return &agentplanev1.CheckToolCallResponse{Outcome: agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW}, nil
	}
	return f.gate(req), nil
}

func (f *fakeRuntime) AwaitDecision(req *agentplanev1.AwaitDecisionRequest, stream grpc.ServerStreamingServer[agentplanev1.AwaitDecisionResponse]) error {
	id := req.GetInterruptId()
	f.mu.Lock()
	if err := f.fenced(req.GetLease()); err != nil {
		f.mu.Unlock()
		return err
	}
	if f.dropAwait > 0 {
		f.dropAwait--
		f.notify()
		f.mu.Unlock()
		return status.Error(codes.Unavailable, "stream dropped by the test")
	}
	f.awaiting[id]++
	f.notify()
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.awaiting[id]--
		f.notify()
		f.mu.Unlock()
	}()
	for {
		f.mu.Lock()
		dec, ch := f.decisions[id], f.changed
		f.mu.Unlock()
		if dec != nil {
			return stream.Send(&agentplanev1.AwaitDecisionResponse{Decision: dec})
		}
		select {
		case <-ch:
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
}

func (f *fakeRuntime) resolve(interruptID string, dec *agentplanev1.Decision) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.decisions[interruptID] = dec
	f.notify()
}

// end records how a lease ended, under f.mu.
func (f *fakeRuntime) end(ref *agentplanev1.LeaseRef, how string) error {
	if err := f.fenced(ref); err != nil {
		return err
	}
	f.ends[ref.GetTaskId()] = how
	f.inFlight--
	f.notify()
	return nil
}

func (f *fakeRuntime) SuspendTask(_ context.Context, req *agentplanev1.SuspendTaskRequest) (*agentplanev1.SuspendTaskResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &agentplanev1.SuspendTaskResponse{}, f.end(req.GetLease(), "suspended")
}

func (f *fakeRuntime) PauseTask(_ context.Context, req *agentplanev1.PauseTaskRequest) (*agentplanev1.PauseTaskResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.end(req.GetLease(), "paused"); err != nil {
		return nil, err
	}
	f.pauses[req.GetLease().GetTaskId()] = req
	return &agentplanev1.PauseTaskResponse{Interrupt: &agentplanev1.Interrupt{InterruptId: "pause-1", Kind: agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE}}, nil
}

func (f *fakeRuntime) CompleteTask(_ context.Context, req *agentplanev1.CompleteTaskRequest) (*agentplanev1.CompleteTaskResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.end(req.GetLease(), "completed"); err != nil {
		return nil, err
	}
	f.outputs[req.GetLease().GetTaskId()] = req.GetOutput()
	return &agentplanev1.CompleteTaskResponse{}, nil
}

func (f *fakeRuntime) FailTask(_ context.Context, req *agentplanev1.FailTaskRequest) (*agentplanev1.FailTaskResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	how := "failed"
	if req.GetRetry() {
		how = "retried"
	}
	if err := f.end(req.GetLease(), how); err != nil {
		return nil, err
	}
	f.failures[req.GetLease().GetTaskId()] = req
	return &agentplanev1.FailTaskResponse{}, nil
}

func (f *fakeRuntime) RecordVerdict(_ context.Context, req *agentplanev1.RecordVerdictRequest) (*agentplanev1.RecordVerdictResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.notify()
	if err := f.fenced(req.GetLease()); err != nil {
		return nil, err
	}
	f.verdicts = append(f.verdicts, proto.CloneOf(req))
	return &agentplanev1.RecordVerdictResponse{Verdict: &agentplanev1.Verdict{VerdictId: "v1", Node: req.GetNode(), Result: req.GetResult()}}, nil
}

// endOf returns how a task ended ("" while it runs).
func (f *fakeRuntime) endOf(taskID string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ends[taskID]
}
