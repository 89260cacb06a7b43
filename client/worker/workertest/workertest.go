package workertest

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Ends recorded in State.Ends.
const (
	Completed = "completed"
	Failed    = "failed"
	Retried   = "retried" // FailTask with retry=true
	Paused    = "paused"
	Suspended = "suspended"
	Canceled  = "canceled" // CancelTask while queued
)

// State is what the fake holds and recorded. Read or change it inside Server.Do or
// Server.WaitFor.
type State struct {
	// TTL is the lease lifetime granted by leases and heartbeats; default 1 minute.
	TTL time.Duration
	// Gate answers CheckToolCall; nil allows every call.
	Gate func(*agentplanev1.CheckToolCallRequest) *agentplanev1.CheckToolCallResponse
	// Queue holds the leases waiting for a runtime. A runtime is granted only those of
	// the run queues it serves (Task.queue; "" and none mean "default").
	Queue []*agentplanev1.Lease
	// LeaseErrs are returned by the next LeaseTasks calls, in order.
	LeaseErrs []error
	// BeatErr, when set, fails every heartbeat.
	BeatErr error
	// DropAwaits makes the next AwaitDecision streams fail with UNAVAILABLE.
	DropAwaits int

	// MaxAsked records LeaseTasksRequest.max_tasks of every poll that was granted.
	MaxAsked []int32
	// InFlight is the number of leases granted and not ended; Peak its maximum.
	InFlight, Peak int
	// Lost marks lease ids whose writes are refused with LEASE_LOST.
	Lost map[string]bool
	// Canceled marks task ids (with a reason) that heartbeats report as canceled.
	Canceled map[string]string
	// Beats counts heartbeats by lease id.
	Beats map[string]int
	// Events are the runtime events reported, by task id.
	Events map[string][]*agentplanev1.RuntimeEvent
	// Ends says how each task's last lease ended, by task id.
	Ends map[string]string
	// Failures, Outputs and Pauses are the requests that ended tasks, by task id.
	Failures map[string]*agentplanev1.FailTaskRequest
	Outputs  map[string]*agentplanev1.TaskOutput
	Pauses   map[string]*agentplanev1.PauseTaskRequest
	// Verdicts and Checks are the RecordVerdict and CheckToolCall requests, in order.
	Verdicts []*agentplanev1.RecordVerdictRequest
	Checks   []*agentplanev1.CheckToolCallRequest
	// Decisions holds resolved interrupts' decisions by interrupt id.
	Decisions map[string]*agentplanev1.Decision
	// Awaiting counts open AwaitDecision streams by interrupt id.
	Awaiting map[string]int
	// Obligations is each task's ledger, as RecordVerdict raised and resolved them.
	Obligations map[string][]*agentplanev1.Obligation
	// Recorded are the verdict_recorded events RecordVerdict added to each task's log
	// (by task id), in order; ReadTaskHistory interleaves them with Events.
	Recorded map[string][]Recorded
	// Started are the StartTask requests, in order; Resolutions the ResolveInterrupt ones.
	Started     []*agentplanev1.StartTaskRequest
	Resolutions []*agentplanev1.ResolveInterruptRequest

	leases map[string]*agentplanev1.Lease // last lease granted, by task id
}

// Recorded is a verdict_recorded event in a task's log: it follows the first After
// reported events (State.Events).
type Recorded struct {
	After int
	Event *agentplanev1.VerdictRecorded
}

// history is the task's log as the control plane keeps it: the reported events with
// the verdict_recorded events interleaved, sequences from 1.
func (s *State) history(taskID string) []*agentplanev1.TaskEvent {
	events, recorded := s.Events[taskID], s.Recorded[taskID]
	out := make([]*agentplanev1.TaskEvent, 0, len(events)+len(recorded))
	add := func(te *agentplanev1.TaskEvent) {
		te.TaskId, te.Sequence = taskID, int64(len(out)+1)
		out = append(out, te)
	}
	for i := 0; i <= len(events); i++ {
		for len(recorded) > 0 && recorded[0].After <= i {
			add(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_VerdictRecorded{VerdictRecorded: recorded[0].Event}})
			recorded = recorded[1:]
		}
		if i == len(events) {
			break
		}
		te := &agentplanev1.TaskEvent{}
		switch p := events[i].GetPayload().(type) {
		case *agentplanev1.RuntimeEvent_Message:
			te.Payload = &agentplanev1.TaskEvent_Message{Message: p.Message}
		case *agentplanev1.RuntimeEvent_ToolCall:
			te.Payload = &agentplanev1.TaskEvent_ToolCall{ToolCall: p.ToolCall}
		case *agentplanev1.RuntimeEvent_ToolResult:
			te.Payload = &agentplanev1.TaskEvent_ToolResult{ToolResult: p.ToolResult}
		case *agentplanev1.RuntimeEvent_Note:
			te.Payload = &agentplanev1.TaskEvent_Note{Note: p.Note}
		}
		add(te)
	}
	return out
}

// lastSequence is the sequence of the task's newest event.
func (s *State) lastSequence(taskID string) int64 {
	return int64(len(s.Events[taskID]) + len(s.Recorded[taskID]))
}

// Server is the fake.
type Server struct {
	agentplanev1.UnimplementedRuntimeServiceServer
	agentplanev1.UnimplementedTaskServiceServer
	agentplanev1.UnimplementedHitlServiceServer

	addr string
	conn *grpc.ClientConn

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever something is recorded
	s       State
}

// New starts a fake on a loopback port, stopped when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	f := &Server{changed: make(chan struct{}), s: State{
		TTL:       time.Minute,
		Lost:      map[string]bool{},
		Canceled:  map[string]string{},
		Beats:     map[string]int{},
		Events:    map[string][]*agentplanev1.RuntimeEvent{},
		Ends:      map[string]string{},
		Failures:  map[string]*agentplanev1.FailTaskRequest{},
		Outputs:   map[string]*agentplanev1.TaskOutput{},
		Pauses:    map[string]*agentplanev1.PauseTaskRequest{},
		Decisions: map[string]*agentplanev1.Decision{},
		Awaiting:  map[string]int{},
		leases:    map[string]*agentplanev1.Lease{},

		Obligations: map[string][]*agentplanev1.Obligation{},
		Recorded:    map[string][]Recorded{},
	}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	agentplanev1.RegisterRuntimeServiceServer(srv, f)
	agentplanev1.RegisterTaskServiceServer(srv, f)
	agentplanev1.RegisterHitlServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	f.addr = lis.Addr().String()
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	f.conn = conn
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
	})
	return f
}

// Addr is the fake's gRPC address.
func (f *Server) Addr() string { return f.addr }

// Conn is a client connection to the fake.
func (f *Server) Conn() *grpc.ClientConn { return f.conn }

// Runtime is a RuntimeService client of the fake.
func (f *Server) Runtime() agentplanev1.RuntimeServiceClient {
	return agentplanev1.NewRuntimeServiceClient(f.conn)
}

// Do runs fn with the state locked, then wakes waiters.
func (f *Server) Do(fn func(s *State)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.s)
	f.notify()
}

// WaitFor blocks until cond (called with the state locked) holds, failing the test
// after 10 seconds. It wakes on every recorded call.
func (f *Server) WaitFor(t testing.TB, what string, cond func(s *State) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		f.mu.Lock()
		ok, ch := cond(&f.s), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("workertest: timed out waiting for %s", what)
		}
	}
}

// notify must be called with f.mu held.
func (f *Server) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Enqueue makes a new task available for leasing: attempt 1, epoch 1, input
// "input of ID"; mutate adjusts the lease.
func (f *Server) Enqueue(taskID string, mutate func(*agentplanev1.Lease)) {
	f.Do(func(s *State) {
		l := &agentplanev1.Lease{
			LeaseId: taskID + "-lease-1",
			Epoch:   1,
			Attempt: 1,
			Task:    &agentplanev1.Task{TaskId: taskID, Input: client.UserText("input of " + taskID), State: agentplanev1.TaskState_TASK_STATE_WORKING},
		}
		if mutate != nil {
			mutate(l)
		}
		s.Queue = append(s.Queue, l)
	})
}

// Requeue queues a task again after its lease ended, as the control plane does after
// a suspension is decided, a pause is continued or a retry: the next epoch and
// attempt, the history cursor at the end of what was reported; mutate adds what the
// new lease carries (resolved interrupts, continue messages).
func (f *Server) Requeue(taskID string, mutate func(*agentplanev1.Lease)) {
	f.Do(func(s *State) {
		prev := s.leases[taskID]
		l := proto.CloneOf(prev)
		l.Epoch++
		l.Attempt++
		l.LeaseId = fmt.Sprintf("%s-lease-%d", taskID, l.GetEpoch())
		l.Deadline = nil
		l.HistoryCursor = s.lastSequence(taskID)
		l.ResolvedInterrupts, l.PendingInterrupts, l.ContinueMessages = nil, nil, nil
		if mutate != nil {
			mutate(l)
		}
		delete(s.Ends, taskID)
		s.Queue = append(s.Queue, l)
	})
}

// Resolve records a decision for an interrupt; open AwaitDecision streams get it.
func (f *Server) Resolve(interruptID string, dec *agentplanev1.Decision) {
	f.Do(func(s *State) { s.Decisions[interruptID] = dec })
}

// End returns how a task's last lease ended, "" while it runs.
func (f *Server) End(taskID string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.s.Ends[taskID]
}

// grpcErr is the error the real server answers: code, declared reason, message.
func grpcErr(c codes.Code, r reasons.Reason, format string, args ...any) error {
	return reasons.Status(c, r, fmt.Sprintf(format, args...), nil).Err()
}

// LeaseTasks grants up to max_tasks queued leases, waiting up to wait for one.
func (f *Server) LeaseTasks(ctx context.Context, req *agentplanev1.LeaseTasksRequest) (*agentplanev1.LeaseTasksResponse, error) {
	timeout := time.NewTimer(req.GetWait().AsDuration())
	defer timeout.Stop()
	for {
		f.mu.Lock()
		s := &f.s
		if len(s.LeaseErrs) > 0 {
			err := s.LeaseErrs[0]
			s.LeaseErrs = s.LeaseErrs[1:]
			f.notify()
			f.mu.Unlock()
			return nil, err
		}
		serves := func(l *agentplanev1.Lease) bool {
			q := cmp.Or(l.GetTask().GetQueue(), "default")
			return slices.Contains(req.GetQueues(), q) || len(req.GetQueues()) == 0 && q == "default"
		}
		var granted, rest []*agentplanev1.Lease
		for _, l := range s.Queue {
			if serves(l) && len(granted) < int(max(req.GetMaxTasks(), 1)) {
				granted = append(granted, l)
			} else {
				rest = append(rest, l)
			}
		}
		if n := len(granted); n > 0 {
			s.MaxAsked = append(s.MaxAsked, req.GetMaxTasks())
			s.Queue = rest
			for _, l := range granted {
				if l.Deadline == nil {
					l.Deadline = timestamppb.New(time.Now().Add(s.TTL))
				}
				s.leases[l.GetTask().GetTaskId()] = l
			}
			s.InFlight += n
			s.Peak = max(s.Peak, s.InFlight)
			f.notify()
			f.mu.Unlock()
			return &agentplanev1.LeaseTasksResponse{Leases: granted}, nil
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-timeout.C:
			return &agentplanev1.LeaseTasksResponse{}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// fenced checks a lease ref; called with f.mu held.
func (f *Server) fenced(ref *agentplanev1.LeaseRef) error {
	if f.s.Lost[ref.GetLeaseId()] {
		return grpcErr(codes.FailedPrecondition, agentplanev1.ErrorReason_ERROR_REASON_LEASE_LOST, "lease %s of task %s is no longer held", ref.GetLeaseId(), ref.GetTaskId())
	}
	cur := f.s.leases[ref.GetTaskId()]
	if cur == nil || cur.GetLeaseId() != ref.GetLeaseId() || cur.GetEpoch() != ref.GetEpoch() {
		return grpcErr(codes.FailedPrecondition, agentplanev1.ErrorReason_ERROR_REASON_LEASE_LOST, "lease %s (epoch %d) of task %s is not the current lease", ref.GetLeaseId(), ref.GetEpoch(), ref.GetTaskId())
	}
	if _, ended := f.s.Ends[ref.GetTaskId()]; ended {
		return grpcErr(codes.FailedPrecondition, agentplanev1.ErrorReason_ERROR_REASON_LEASE_LOST, "lease %s was released", ref.GetLeaseId())
	}
	return nil
}

// record runs fn under the lock if ref is the current lease, and wakes waiters.
func (f *Server) record(ref *agentplanev1.LeaseRef, fn func(s *State) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.notify()
	if err := f.fenced(ref); err != nil {
		return err
	}
	return fn(&f.s)
}

// Heartbeat extends the lease by TTL and reports cancellation.
func (f *Server) Heartbeat(_ context.Context, req *agentplanev1.HeartbeatRequest) (*agentplanev1.HeartbeatResponse, error) {
	var resp *agentplanev1.HeartbeatResponse
	err := f.record(req.GetLease(), func(s *State) error {
		if s.BeatErr != nil {
			return s.BeatErr
		}
		s.Beats[req.GetLease().GetLeaseId()]++
		reason, canceled := s.Canceled[req.GetLease().GetTaskId()]
		resp = &agentplanev1.HeartbeatResponse{Deadline: timestamppb.New(time.Now().Add(s.TTL)), Canceled: canceled, CancelReason: reason}
		return nil
	})
	return resp, err
}

// ReportEvents appends events.
func (f *Server) ReportEvents(_ context.Context, req *agentplanev1.ReportEventsRequest) (*agentplanev1.ReportEventsResponse, error) {
	var last int64
	err := f.record(req.GetLease(), func(s *State) error {
		id := req.GetLease().GetTaskId()
		s.Events[id] = append(s.Events[id], req.GetEvents()...)
		last = s.lastSequence(id)
		return nil
	})
	return &agentplanev1.ReportEventsResponse{LastSequence: last}, err
}

// CheckToolCall asks State.Gate.
func (f *Server) CheckToolCall(_ context.Context, req *agentplanev1.CheckToolCallRequest) (*agentplanev1.CheckToolCallResponse, error) {
	resp := &agentplanev1.CheckToolCallResponse{Outcome: agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW}
	err := f.record(req.GetLease(), func(s *State) error {
		s.Checks = append(s.Checks, req)
		if s.Gate != nil {
			resp = s.Gate(req)
		}
		return nil
	})
	return resp, err
}

// AwaitDecision sends the interrupt's decision once Resolve records it.
func (f *Server) AwaitDecision(req *agentplanev1.AwaitDecisionRequest, stream grpc.ServerStreamingServer[agentplanev1.AwaitDecisionResponse]) error {
	id := req.GetInterruptId()
	err := f.record(req.GetLease(), func(s *State) error {
		if s.DropAwaits > 0 {
			s.DropAwaits--
			return status.Error(codes.Unavailable, "workertest: decision stream dropped")
		}
		s.Awaiting[id]++
		return nil
	})
	if err != nil {
		return err
	}
	defer f.Do(func(s *State) { s.Awaiting[id]-- })
	for {
		f.mu.Lock()
		dec, ch := f.s.Decisions[id], f.changed
		f.mu.Unlock()
		if dec != nil {
			return stream.Send(&agentplanev1.AwaitDecisionResponse{Kind: &agentplanev1.AwaitDecisionResponse_Decision{Decision: dec}})
		}
		select {
		case <-ch:
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
}

// end records how a lease ended; called inside record.
func end(s *State, ref *agentplanev1.LeaseRef, how string) {
	s.Ends[ref.GetTaskId()] = how
	s.InFlight--
}

// SuspendTask releases the lease.
func (f *Server) SuspendTask(_ context.Context, req *agentplanev1.SuspendTaskRequest) (*agentplanev1.SuspendTaskResponse, error) {
	err := f.record(req.GetLease(), func(s *State) error { end(s, req.GetLease(), Suspended); return nil })
	return &agentplanev1.SuspendTaskResponse{}, err
}

// PauseTask releases the lease and returns a synthetic pause interrupt.
func (f *Server) PauseTask(_ context.Context, req *agentplanev1.PauseTaskRequest) (*agentplanev1.PauseTaskResponse, error) {
	err := f.record(req.GetLease(), func(s *State) error {
		end(s, req.GetLease(), Paused)
		s.Pauses[req.GetLease().GetTaskId()] = req
		return nil
	})
	it := &agentplanev1.Interrupt{
		InterruptId: "pause-" + req.GetLease().GetLeaseId(), TaskId: req.GetLease().GetTaskId(),
		Kind: agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE, State: agentplanev1.InterruptState_INTERRUPT_STATE_PENDING,
	}
	return &agentplanev1.PauseTaskResponse{Interrupt: it}, err
}

// CompleteTask ends the task.
func (f *Server) CompleteTask(_ context.Context, req *agentplanev1.CompleteTaskRequest) (*agentplanev1.CompleteTaskResponse, error) {
	err := f.record(req.GetLease(), func(s *State) error {
		end(s, req.GetLease(), Completed)
		s.Outputs[req.GetLease().GetTaskId()] = req.GetOutput()
		return nil
	})
	return &agentplanev1.CompleteTaskResponse{}, err
}

// FailTask ends the task, or records a retry.
func (f *Server) FailTask(_ context.Context, req *agentplanev1.FailTaskRequest) (*agentplanev1.FailTaskResponse, error) {
	err := f.record(req.GetLease(), func(s *State) error {
		how := Failed
		if req.GetRetry() {
			how = Retried
		}
		end(s, req.GetLease(), how)
		s.Failures[req.GetLease().GetTaskId()] = req
		return nil
	})
	return &agentplanev1.FailTaskResponse{}, err
}

// RecordVerdict records the request and keeps the task's obligations ledger: raised
// obligations get ids ob-1, ob-2, ... per task; resolutions of ids that are not open
// are dropped and named back. Like the control plane, it appends a verdict_recorded
// event carrying the verdict (its raised obligations and applied resolutions) to the
// task's log.
func (f *Server) RecordVerdict(_ context.Context, req *agentplanev1.RecordVerdictRequest) (*agentplanev1.RecordVerdictResponse, error) {
	var resp *agentplanev1.RecordVerdictResponse
	err := f.record(req.GetLease(), func(s *State) error {
		s.Verdicts = append(s.Verdicts, proto.CloneOf(req))
		taskID := req.GetLease().GetTaskId()
		v := &agentplanev1.Verdict{
			VerdictId: fmt.Sprintf("v%d", len(s.Verdicts)), TaskId: taskID, Node: req.GetNode(),
			Result: req.GetResult(), Approved: req.GetResult().GetVerdict() == "pass", EndsTurn: req.GetEndsTurn(),
		}
		ledger := s.Obligations[taskID]
		for _, r := range req.GetResolved() {
			i := slices.IndexFunc(ledger, func(o *agentplanev1.Obligation) bool {
				return o.GetObligationId() == r.GetObligationId() && o.GetState() == agentplanev1.ObligationState_OBLIGATION_STATE_OPEN
			})
			if i < 0 {
				v.DroppedObligationIds = append(v.DroppedObligationIds, r.GetObligationId())
				continue
			}
			ledger[i].State = agentplanev1.ObligationState_OBLIGATION_STATE_ADDRESSED
			if r.GetHow() == agentplanev1.ResolutionHow_RESOLUTION_HOW_WITHDRAWN {
				ledger[i].State = agentplanev1.ObligationState_OBLIGATION_STATE_WITHDRAWN
			}
			ledger[i].ResolvedInVerdictId = v.GetVerdictId()
			v.Resolved = append(v.Resolved, r)
		}
		for _, text := range req.GetRaised() {
			o := &agentplanev1.Obligation{ObligationId: fmt.Sprintf("ob-%d", len(ledger)+1), Text: text, State: agentplanev1.ObligationState_OBLIGATION_STATE_OPEN, RaisedBy: req.GetNode(), RaisedInVerdictId: v.GetVerdictId()}
			ledger = append(ledger, o)
			v.Raised = append(v.Raised, o)
		}
		s.Obligations[taskID] = ledger
		v.Sequence = s.lastSequence(taskID) + 1
		s.Recorded[taskID] = append(s.Recorded[taskID], Recorded{After: len(s.Events[taskID]), Event: &agentplanev1.VerdictRecorded{Verdict: proto.CloneOf(v)}})
		resp = &agentplanev1.RecordVerdictResponse{Verdict: v}
		for _, o := range ledger {
			if o.GetState() == agentplanev1.ObligationState_OBLIGATION_STATE_OPEN {
				resp.OpenObligations = append(resp.OpenObligations, o)
			}
		}
		return nil
	})
	return resp, err
}

// ReadTaskHistory returns, under a current lease, the task's log (the events runtimes
// reported and the verdicts recorded) as TaskEvents with sequences from 1, after after_sequence, in pages of
// page_size (default 256).
func (f *Server) ReadTaskHistory(_ context.Context, req *agentplanev1.ReadTaskHistoryRequest) (*agentplanev1.ReadTaskHistoryResponse, error) {
	resp := &agentplanev1.ReadTaskHistoryResponse{}
	err := f.record(req.GetLease(), func(s *State) error {
		events := s.history(req.GetLease().GetTaskId())
		resp.LastSequence = int64(len(events))
		size := int(req.GetPageSize())
		if size <= 0 {
			size = 256
		}
		for i := int(req.GetAfterSequence()); i < len(events) && len(resp.Events) < size; i++ {
			events[i].Time = timestamppb.Now()
			resp.Events = append(resp.Events, events[i])
		}
		return nil
	})
	return resp, err
}

// StartTask queues a lease for a new task (id task-N), or returns the task an earlier
// call with the same request id started.
func (f *Server) StartTask(_ context.Context, req *agentplanev1.StartTaskRequest) (*agentplanev1.StartTaskResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.notify()
	if id := req.GetRequestId(); id != "" {
		for i, prev := range f.s.Started {
			if prev.GetRequestId() == id {
				return &agentplanev1.StartTaskResponse{Task: f.startedTask(i)}, nil
			}
		}
	}
	f.s.Started = append(f.s.Started, req)
	task := f.startedTask(len(f.s.Started) - 1)
	l := &agentplanev1.Lease{LeaseId: task.GetTaskId() + "-lease-1", Epoch: 1, Attempt: 1, Task: task}
	if a := fakeAgent(req.GetSpec()); a != nil {
		l.Spec = &agentplanev1.ResolvedSpec{Spec: &agentplanev1.ResolvedSpec_Agent{Agent: a}}
	}
	f.s.Queue = append(f.s.Queue, l)
	return &agentplanev1.StartTaskResponse{Task: task, Created: true}, nil
}

// fakeAgent is the typed agent of a StartTask spec object, as far as this fake reads
// one: its apiVersion, kind, name and model (a real server validates and decodes the
// whole spec). A spec that is not an AgentSpec, a document or an agent_id gives nil:
// the lease then has no spec.
func fakeAgent(s *structpb.Struct) *agentplanev1.AgentSpec {
	f := s.GetFields()
	if f["kind"].GetStringValue() != "AgentSpec" {
		return nil
	}
	a := &agentplanev1.AgentSpec{ApiVersion: f["apiVersion"].GetStringValue(), Kind: "AgentSpec", Model: f["model"].GetStringValue()}
	if n, ok := f["name"]; ok {
		a.Name = proto.String(n.GetStringValue())
	}
	return a
}

// startedTask is the task of the i-th StartTask call; called with f.mu held.
func (f *Server) startedTask(i int) *agentplanev1.Task {
	req := f.s.Started[i]
	return &agentplanev1.Task{
		TaskId: fmt.Sprintf("task-%d", i+1), State: agentplanev1.TaskState_TASK_STATE_SUBMITTED, RequestId: req.GetRequestId(),
		Input: req.GetInput(), Labels: req.GetLabels(), CreateTime: timestamppb.Now(), InterruptPolicy: req.GetInterruptPolicy(),
		Queue: cmp.Or(req.GetQueue(), "default"),
	}
}

// CancelTask cancels a task still queued (recorded in Ends as Canceled); a leased one
// is marked for its heartbeats (State.Canceled).
func (f *Server) CancelTask(_ context.Context, req *agentplanev1.CancelTaskRequest) (*agentplanev1.CancelTaskResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.notify()
	id := req.GetTaskId()
	for i, l := range f.s.Queue {
		if l.GetTask().GetTaskId() == id {
			f.s.Queue = slices.Delete(f.s.Queue, i, i+1)
			f.s.Ends[id] = Canceled
			return &agentplanev1.CancelTaskResponse{Task: l.GetTask()}, nil
		}
	}
	if l := f.s.leases[id]; l != nil {
		f.s.Canceled[id] = req.GetReason()
		return &agentplanev1.CancelTaskResponse{Task: l.GetTask()}, nil
	}
	return nil, grpcErr(codes.NotFound, agentplanev1.ErrorReason_ERROR_REASON_TASK_NOT_FOUND, "task %s not found", id)
}

// ResolveInterrupt records a decision as a reviewer's; AwaitDecision streams get it.
// Approve carries no args here: a runtime runs the call's own args.
func (f *Server) ResolveInterrupt(_ context.Context, req *agentplanev1.ResolveInterruptRequest) (*agentplanev1.ResolveInterruptResponse, error) {
	dec := &agentplanev1.Decision{InterruptId: req.GetInterruptId(), DecidedBy: "owner", DecideTime: timestamppb.Now(), Source: agentplanev1.DecisionSource_DECISION_SOURCE_HUMAN}
	switch d := req.GetDecision().(type) {
	case *agentplanev1.ResolveInterruptRequest_Approve:
		dec.Type, dec.Reason = agentplanev1.DecisionType_DECISION_TYPE_APPROVE, d.Approve.Reason
	case *agentplanev1.ResolveInterruptRequest_Reject:
		dec.Type, dec.Reason = agentplanev1.DecisionType_DECISION_TYPE_REJECT, &d.Reject.Reason
	case *agentplanev1.ResolveInterruptRequest_Edit:
		dec.Type, dec.Reason, dec.ArgumentsJson = agentplanev1.DecisionType_DECISION_TYPE_EDIT, d.Edit.Reason, d.Edit.GetArgumentsJson()
	default:
		return nil, status.Error(codes.InvalidArgument, "workertest: no decision")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.notify()
	if _, done := f.s.Decisions[req.GetInterruptId()]; done {
		return nil, grpcErr(codes.FailedPrecondition, agentplanev1.ErrorReason_ERROR_REASON_INTERRUPT_ALREADY_RESOLVED, "interrupt %s is already resolved", req.GetInterruptId())
	}
	f.s.Resolutions = append(f.s.Resolutions, req)
	f.s.Decisions[req.GetInterruptId()] = dec
	it := &agentplanev1.Interrupt{InterruptId: req.GetInterruptId(), State: agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED, Decision: dec}
	return &agentplanev1.ResolveInterruptResponse{Interrupt: it}, nil
}
