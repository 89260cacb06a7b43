package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/client/worker/workertest"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// running is a worker started by startWorker.
type running struct {
	w    *Worker
	done chan error
}

// wait returns Run's result, failing the test if Run does not return.
func (r running) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("worker did not return")
		return nil
	}
}

// startWorker runs a worker with fast test timings; mutate adjusts the options.
func startWorker(t *testing.T, rt agentplanev1.RuntimeServiceClient, h HandlerFunc, mutate func(*Options)) running {
	t.Helper()
	o := Options{
		RuntimeID: "rt-test",
		PollWait:  200 * time.Millisecond,
		Backoff:   Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond},
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if mutate != nil {
		mutate(&o)
	}
	w, err := New(rt, h, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := running{w: w, done: make(chan error, 1)}
	go func() { r.done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-w.done
	})
	return r
}

func once(o *Options) { o.MaxTasks = 1 }

// snapshot copies the fake's state (maps and slices shared, so read it only after the
// worker is done with the task).
func snapshot(f *workertest.Server) workertest.State {
	var s workertest.State
	f.Do(func(st *workertest.State) { s = *st })
	return s
}

func TestCompleteReportsUnderTheLease(t *testing.T) {
	f := workertest.New(t)
	rt := f.Runtime()
	f.Enqueue("t1", func(l *agentplanev1.Lease) { l.LeaseId, l.Epoch = "lease-7", 7 })
	r := startWorker(t, rt, func(ctx context.Context, task *Task) error {
		if task.ID() != "t1" || task.InputText() != "input of t1" || task.Ref().GetEpoch() != 7 {
			return errors.New("lease not exposed")
		}
		if err := task.Say(ctx, "hello"); err != nil {
			return err
		}
		if err := task.Note(ctx, "thinking", map[string]string{"k": "v"}); err != nil {
			return err
		}
		return task.Complete(ctx, &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "done")})
	}, once)
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	s := snapshot(f)
	if s.Ends["t1"] != "completed" || client.MessageText(s.Outputs["t1"].GetMessage()) != "done" {
		t.Fatalf("want completed with output, got %q %v (failure %v)", s.Ends["t1"], s.Outputs["t1"], s.Failures["t1"])
	}
	ev := s.Events["t1"]
	if len(ev) != 2 || client.MessageText(ev[0].GetMessage()) != "hello" || ev[0].GetMessage().GetRole() != agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT || ev[1].GetNote().GetAttributes()["k"] != "v" {
		t.Fatalf("events: %v", ev)
	}
}

func TestHandlerResultDecidesTheEnd(t *testing.T) {
	for _, tc := range []struct {
		name        string
		retryOnErr  bool
		handler     HandlerFunc
		wantEnd     string
		wantReason  string
		wantMessage string
	}{
		{name: "error fails", handler: func(context.Context, *Task) error { return errors.New("model unreachable") },
			wantEnd: "failed", wantReason: "runtime.error", wantMessage: "model unreachable"},
		{name: "error retries when configured", retryOnErr: true, handler: func(context.Context, *Task) error { return errors.New("flaky") },
			wantEnd: "retried", wantReason: "runtime.error"},
		{name: "failure chooses reason and retry", handler: func(context.Context, *Task) error {
			return &Failure{Reason: "tool.unavailable", Message: "search is down", Retry: true}
		}, wantEnd: "retried", wantReason: "tool.unavailable", wantMessage: "search is down"},
		{name: "panic fails", handler: func(context.Context, *Task) error { panic("boom") },
			wantEnd: "failed", wantReason: "runtime.panic", wantMessage: "boom"},
		{name: "explicit fail is not repeated", handler: func(ctx context.Context, task *Task) error {
			if err := task.Fail(ctx, "bad.input", "cannot parse", false); err != nil {
				return err
			}
			return errors.New("ignored after the task ended")
		}, wantEnd: "failed", wantReason: "bad.input", wantMessage: "cannot parse"},
		{name: "nil without ending writes nothing", handler: func(context.Context, *Task) error { return nil }, wantEnd: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := workertest.New(t)
			rt := f.Runtime()
			f.Enqueue("t1", nil)
			r := startWorker(t, rt, tc.handler, func(o *Options) { o.MaxTasks = 1; o.RetryOnError = tc.retryOnErr })
			if err := r.wait(t); err != nil {
				t.Fatal(err)
			}
			s := snapshot(f)
			if got := s.Ends["t1"]; got != tc.wantEnd {
				t.Fatalf("end: got %q want %q", got, tc.wantEnd)
			}
			if tc.wantEnd == "" {
				return
			}
			fr := s.Failures["t1"]
			if fr.GetReason() != tc.wantReason || !strings.Contains(fr.GetMessage(), tc.wantMessage) {
				t.Fatalf("failure: %v", fr)
			}
		})
	}
}

func TestHeartbeatDelay(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name     string
		left     time.Duration
		fraction float64
		want     time.Duration
	}{
		{"third of ttl", 30 * time.Second, 1.0 / 3, 10 * time.Second},
		{"half", 10 * time.Second, 0.5, 5 * time.Second},
		{"deadline passed", -time.Second, 1.0 / 3, minHeartbeatDelay},
		{"nearly expired", time.Millisecond, 1.0 / 3, minHeartbeatDelay},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := heartbeatDelay(now, now.Add(tc.left), tc.fraction); got != tc.want {
				t.Fatalf("got %v want %v", got, tc.want)
			}
		})
	}
}

func TestHeartbeatsKeepTheLease(t *testing.T) {
	f := workertest.New(t)
	rt := f.Runtime()
	f.Do(func(s *workertest.State) { s.TTL = 150 * time.Millisecond })
	f.Enqueue("t1", func(l *agentplanev1.Lease) { l.LeaseId = "L" })
	proceed := make(chan struct{})
	r := startWorker(t, rt, func(ctx context.Context, task *Task) error {
		select {
		case <-proceed:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		return task.Complete(ctx, &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "ok")})
	}, once)
	// Three heartbeats span more than two lease lifetimes: the lease survived only
	// because each one extended it.
	f.WaitFor(t, "three heartbeats", func(s *workertest.State) bool { return s.Beats["L"] >= 3 })
	close(proceed)
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	if got := f.End("t1"); got != "completed" {
		t.Fatalf("end %q", got)
	}
}

func TestTaskContextStops(t *testing.T) {
	for _, tc := range []struct {
		name    string
		arrange func(s *workertest.State)
		act     func(ctx context.Context, f *workertest.Server, task *Task) error // before waiting on ctx
		want    error
		message string
	}{
		{name: "heartbeat reports cancellation", arrange: func(s *workertest.State) { s.Canceled["t1"] = "user changed their mind" },
			want: ErrCanceled, message: "user changed their mind"},
		{name: "heartbeat refused with LEASE_LOST", arrange: func(s *workertest.State) { s.Lost["L"] = true },
			want: ErrLeaseLost, message: "no longer held"},
		{name: "no heartbeat succeeds before the deadline",
			arrange: func(s *workertest.State) { s.BeatErr = status.Error(codes.Unavailable, "network down") },
			want:    ErrLeaseLost, message: "no heartbeat succeeded"},
		// The lease is lost after the first heartbeat acknowledged it.
		{name: "write refused with LEASE_LOST", arrange: func(s *workertest.State) { s.TTL = time.Minute },
			act: func(ctx context.Context, f *workertest.Server, task *Task) error {
				f.Do(func(s *workertest.State) { s.Lost["L"] = true })
				if err := task.Say(ctx, "hi"); !errors.Is(err, ErrLeaseLost) {
					return errors.New("Say: want ErrLeaseLost")
				}
				return nil
			},
			want: ErrLeaseLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := workertest.New(t)
			rt := f.Runtime()
			f.Do(func(s *workertest.State) {
				s.TTL = 60 * time.Millisecond
				tc.arrange(s)
			})
			f.Enqueue("t1", func(l *agentplanev1.Lease) { l.LeaseId = "L" })
			var cause error
			r := startWorker(t, rt, func(ctx context.Context, task *Task) error {
				if tc.act != nil {
					if err := tc.act(ctx, f, task); err != nil {
						return err
					}
				}
				<-ctx.Done()
				cause = context.Cause(ctx)
				return cause
			}, once)
			if err := r.wait(t); err != nil {
				t.Fatal(err)
			}
			if !errors.Is(cause, tc.want) || !strings.Contains(cause.Error(), tc.message) {
				t.Fatalf("cause %v, want %v containing %q", cause, tc.want, tc.message)
			}
			if end := f.End("t1"); end != "" {
				t.Fatalf("the worker wrote %q for a task it no longer holds", end)
			}
		})
	}
}

func gateInterrupts(id string) func(*agentplanev1.CheckToolCallRequest) *agentplanev1.CheckToolCallResponse {
	return func(req *agentplanev1.CheckToolCallRequest) *agentplanev1.CheckToolCallResponse {
		return &agentplanev1.CheckToolCallResponse{
			Outcome:   agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT,
			Interrupt: &agentplanev1.Interrupt{InterruptId: id, CallId: req.GetCallId(), State: agentplanev1.InterruptState_INTERRUPT_STATE_PENDING},
		}
	}
}

func mustValue(t *testing.T, v any) *structpb.Value {
	t.Helper()
	pv, err := structpb.NewValue(v)
	if err != nil {
		t.Fatal(err)
	}
	return pv
}

func TestInteractiveDecision(t *testing.T) {
	for _, tc := range []struct {
		name      string
		decision  *agentplanev1.Decision
		drops     int
		wantAllow bool
		wantTo    string
		wantWhy   string
	}{
		{name: "approve runs the original args", decision: &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_APPROVE},
			wantAllow: true, wantTo: "a@example.com"},
		{name: "edit runs the edited args, after a dropped stream", drops: 2,
			decision:  &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_EDIT, ArgumentsJson: `{"to":"b@example.com"}`},
			wantAllow: true, wantTo: "b@example.com"},
		{name: "reject shows the model reason", decision: &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_REJECT, Reason: proto.String("no"), ModelReason: proto.String("<untrusted>no</untrusted>")},
			wantWhy: "<untrusted>no</untrusted>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := workertest.New(t)
			rt := f.Runtime()
			f.Do(func(s *workertest.State) { s.Gate = gateInterrupts("i1"); s.DropAwaits = tc.drops })
			f.Enqueue("t1", nil)
			var gate *Gate
			r := startWorker(t, rt, func(ctx context.Context, task *Task) error {
				var err error
				gate, err = task.ToolCall(ctx, Call{ID: "c1", Name: "send_email", ArgumentsJSON: `{"to":"a@example.com"}`, Node: "mailer"})
				if err != nil {
					return err
				}
				if gate.Allowed {
					if err := task.ToolResult(ctx, gate.Call, mustValue(t, "sent"), false); err != nil {
						return err
					}
				}
				return task.Complete(ctx, &agentplanev1.TaskOutput{})
			}, once)
			f.WaitFor(t, "a runtime awaiting the decision", func(s *workertest.State) bool { return s.Awaiting["i1"] > 0 })
			f.Resolve("i1", tc.decision)
			if err := r.wait(t); err != nil {
				t.Fatal(err)
			}
			if f.End("t1") != "completed" {
				t.Fatalf("end %q (failure %v)", f.End("t1"), snapshot(f).Failures["t1"])
			}
			if gate.Allowed != tc.wantAllow || gate.Reason != tc.wantWhy || gate.Interrupt.GetInterruptId() != "i1" {
				t.Fatalf("gate %+v", gate)
			}
			ev := snapshot(f).Events["t1"]
			if !tc.wantAllow {
				// A rejected call is reported with its original arguments and an error
				// result carrying the reason the model is shown.
				if len(ev) != 2 || ev[0].GetToolCall().GetArgumentsJson() != `{"to":"a@example.com"}` || !ev[1].GetToolResult().GetIsError() ||
					ev[1].GetToolResult().GetResult().GetStringValue() != tc.wantWhy {
					t.Fatalf("a rejected call was reported as %v", ev)
				}
				return
			}
			if len(ev) != 2 || ev[0].GetToolCall().GetArgumentsJson() != `{"to":"`+tc.wantTo+`"}` || ev[1].GetToolResult().GetCallId() != "c1" {
				t.Fatalf("events %v", ev)
			}
		})
	}
}

func TestGateAnswersWithoutInterrupt(t *testing.T) {
	for _, tc := range []struct {
		name      string
		resp      *agentplanev1.CheckToolCallResponse
		wantAllow bool
		wantWhy   string
	}{
		{name: "allow", resp: &agentplanev1.CheckToolCallResponse{Outcome: agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW}, wantAllow: true},
		{name: "reject with synthesized decision", resp: &agentplanev1.CheckToolCallResponse{
			Outcome:  agentplanev1.GateOutcome_GATE_OUTCOME_REJECT,
			Decision: &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_REJECT, Reason: proto.String("hitl disabled")},
		}, wantWhy: "hitl disabled"},
		{name: "reject falls back to the gate reason", resp: &agentplanev1.CheckToolCallResponse{
			Outcome: agentplanev1.GateOutcome_GATE_OUTCOME_REJECT, Reason: "hitl.disabled",
		}, wantWhy: "hitl.disabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := workertest.New(t)
			rt := f.Runtime()
			f.Do(func(s *workertest.State) {
				s.Gate = func(*agentplanev1.CheckToolCallRequest) *agentplanev1.CheckToolCallResponse { return tc.resp }
			})
			f.Enqueue("t1", nil)
			var gate *Gate
			r := startWorker(t, rt, func(ctx context.Context, task *Task) error {
				var err error
				if gate, err = task.ToolCall(ctx, Call{ID: "c1", Name: "search", ArgumentsJSON: `"q"`, Description: "web search"}); err != nil {
					return err
				}
				return task.Complete(ctx, nil)
			}, once)
			if err := r.wait(t); err != nil {
				t.Fatal(err)
			}
			if gate == nil || gate.Allowed != tc.wantAllow || gate.Reason != tc.wantWhy {
				t.Fatalf("gate %+v", gate)
			}
			if tc.wantAllow && gate.ArgumentsJSON != `"q"` {
				t.Fatalf("allowed args %v", gate.ArgumentsJSON)
			}
			if c := snapshot(f).Checks[0]; c.GetToolDescription() != "web search" || c.GetCallId() != "c1" {
				t.Fatalf("check request %v", c)
			}
		})
	}
}

func TestDurableSuspendThenResume(t *testing.T) {
	f := workertest.New(t)
	rt := f.Runtime()
	f.Do(func(s *workertest.State) { s.Gate = gateInterrupts("i1") })
	f.Enqueue("t1", nil)
	var mu sync.Mutex
	var results []error
	args := `{"amount": 12345678901234567}`
	r := startWorker(t, rt, func(ctx context.Context, task *Task) error {
		// The handler replays from the start on every lease, as a stateless runtime would.
		gate, err := task.ToolCall(ctx, Call{ID: "pay-1", Name: "pay", ArgumentsJSON: args})
		mu.Lock()
		results = append(results, err)
		mu.Unlock()
		if err != nil {
			return err
		}
		return task.Complete(ctx, &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, gate.Decision.GetType().String())})
	}, func(o *Options) { o.MaxTasks = 2; o.Delivery = Durable })

	f.WaitFor(t, "the suspension", func(s *workertest.State) bool { return s.Ends["t1"] == workertest.Suspended })
	f.Requeue("t1", func(l *agentplanev1.Lease) {
		l.ResolvedInterrupts = []*agentplanev1.Interrupt{{
			InterruptId: "i1", CallId: "pay-1", Kind: agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL,
			State:    agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED,
			Decision: &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_APPROVE, ArgumentsJson: args},
		}}
	})
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	s := snapshot(f)
	if len(results) != 2 || !errors.Is(results[0], ErrSuspended) || results[1] != nil {
		t.Fatalf("ToolCall results %v", results)
	}
	if len(s.Checks) != 1 {
		t.Fatalf("the resumed call asked the gate again: %d checks", len(s.Checks))
	}
	if s.Ends["t1"] != "completed" || client.MessageText(s.Outputs["t1"].GetMessage()) != "DECISION_TYPE_APPROVE" || s.Failures["t1"] != nil {
		t.Fatalf("end %q output %v failure %v", s.Ends["t1"], s.Outputs["t1"], s.Failures["t1"])
	}
	if ev := s.Events["t1"]; len(ev) != 1 || ev[0].GetToolCall().GetCallId() != "pay-1" {
		t.Fatalf("events %v", ev)
	}
}

func TestPauseThenContinue(t *testing.T) {
	f := workertest.New(t)
	rt := f.Runtime()
	f.Enqueue("t1", nil)
	r := startWorker(t, rt, func(ctx context.Context, task *Task) error {
		if msgs := task.ContinueMessages(); len(msgs) > 0 {
			if err := task.Say(ctx, "you said "+client.MessageText(msgs[0])); err != nil {
				return err
			}
			return task.Complete(ctx, nil)
		}
		it, err := task.Pause(ctx, "anything else?", "chat")
		if err != nil {
			return err
		}
		if it.GetKind() != agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE {
			return errors.New("pause returned no auto-pause interrupt")
		}
		if err := task.Say(ctx, "too late"); !errors.Is(err, ErrEnded) {
			return errors.New("a write after Pause was not refused locally")
		}
		return nil
	}, func(o *Options) { o.MaxTasks = 2 })
	f.WaitFor(t, "the pause", func(s *workertest.State) bool { return s.Ends["t1"] == workertest.Paused })
	if p := snapshot(f).Pauses["t1"]; client.MessageText(p.GetMessage()) != "anything else?" || p.GetNode() != "chat" {
		t.Errorf("pause request %v", p)
	}
	f.Requeue("t1", func(l *agentplanev1.Lease) { l.ContinueMessages = []*agentplanev1.Message{client.UserText("more")} })
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	s := snapshot(f)
	if s.Ends["t1"] != "completed" || len(s.Events["t1"]) != 1 || client.MessageText(s.Events["t1"][0].GetMessage()) != "you said more" {
		t.Fatalf("end %q events %v", s.Ends["t1"], s.Events["t1"])
	}
}

func TestRecordVerdictFillsTheLease(t *testing.T) {
	f := workertest.New(t)
	rt := f.Runtime()
	f.Enqueue("t1", func(l *agentplanev1.Lease) { l.LeaseId = "L" })
	req := &agentplanev1.RecordVerdictRequest{Node: "reviewer", Result: &agentplanev1.VerdictResult{Verdict: "pass"}, Raised: []string{"cite sources"}}
	r := startWorker(t, rt, func(ctx context.Context, task *Task) error {
		resp, err := task.RecordVerdict(ctx, req)
		if err != nil {
			return err
		}
		if resp.GetVerdict().GetVerdictId() != "v1" {
			return errors.New("verdict response lost")
		}
		return task.Complete(ctx, nil)
	}, once)
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	vs := snapshot(f).Verdicts
	if len(vs) != 1 || vs[0].GetLease().GetLeaseId() != "L" || vs[0].GetRaised()[0] != "cite sources" {
		t.Fatalf("verdicts %v", vs)
	}
	if req.GetLease() != nil {
		t.Fatal("RecordVerdict modified the caller's request")
	}
}

func TestCapacityBoundsConcurrency(t *testing.T) {
	f := workertest.New(t)
	rt := f.Runtime()
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		f.Enqueue(id, nil)
	}
	release := make(chan struct{})
	r := startWorker(t, rt, func(ctx context.Context, task *Task) error {
		select {
		case <-release:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		return task.Complete(ctx, nil)
	}, func(o *Options) { o.Capacity = 2; o.MaxTasks = 5 })
	f.WaitFor(t, "two tasks running", func(s *workertest.State) bool { return s.InFlight == 2 })
	close(release)
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	s := snapshot(f)
	if s.Peak != 2 || len(s.Ends) != 5 {
		t.Fatalf("peak %d ends %v", s.Peak, s.Ends)
	}
	for _, n := range s.MaxAsked {
		if n < 1 || n > 2 {
			t.Fatalf("asked for %d tasks with capacity 2 (%v)", n, s.MaxAsked)
		}
	}
}

func TestLeaseErrors(t *testing.T) {
	t.Run("transient errors are retried", func(t *testing.T) {
		f := workertest.New(t)
		rt := f.Runtime()
		f.Do(func(s *workertest.State) {
			s.LeaseErrs = []error{status.Error(codes.Unavailable, "restarting"), status.Error(codes.Unavailable, "restarting")}
		})
		f.Enqueue("t1", nil)
		r := startWorker(t, rt, func(ctx context.Context, task *Task) error { return task.Complete(ctx, nil) }, once)
		if err := r.wait(t); err != nil {
			t.Fatal(err)
		}
		if f.End("t1") != "completed" {
			t.Fatal("task not completed after the server came back")
		}
	})
	t.Run("a permanent error stops the worker", func(t *testing.T) {
		f := workertest.New(t)
		rt := f.Runtime()
		f.Do(func(s *workertest.State) {
			s.LeaseErrs = []error{status.Error(codes.Unimplemented, "RuntimeService.LeaseTasks is not implemented")}
		})
		r := startWorker(t, rt, func(context.Context, *Task) error { return nil }, nil)
		err := r.wait(t)
		if status.Code(err) != codes.Unimplemented {
			t.Fatalf("want UNIMPLEMENTED, got %v", err)
		}
	})
}

func TestStop(t *testing.T) {
	t.Run("drains running tasks and leases no more", func(t *testing.T) {
		f := workertest.New(t)
		rt := f.Runtime()
		f.Enqueue("t1", nil)
		f.Enqueue("t2", nil)
		started, release := make(chan struct{}), make(chan struct{})
		r := startWorker(t, rt, func(ctx context.Context, task *Task) error {
			close(started)
			<-release
			return task.Complete(ctx, nil)
		}, nil)
		<-started
		stopped := make(chan error, 1)
		go func() { stopped <- r.w.Stop(context.Background()) }()
		// Stop cannot return while the handler is blocked; release it and Stop must.
		close(release)
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		// Stop returned, so the task must have ended already (drained, not abandoned).
		s := snapshot(f)
		ends, queued := s.Ends["t1"], len(s.Queue)
		if ends != "completed" || queued != 1 {
			t.Fatalf("after Stop: t1 %q, queue %d", ends, queued)
		}
		if err := r.wait(t); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("past the drain deadline tasks are canceled and handed back", func(t *testing.T) {
		f := workertest.New(t)
		rt := f.Runtime()
		f.Enqueue("t1", nil)
		started := make(chan struct{})
		var cause error
		r := startWorker(t, rt, func(ctx context.Context, task *Task) error {
			close(started)
			<-ctx.Done()
			cause = context.Cause(ctx)
			return cause
		}, nil)
		<-started
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := r.w.Stop(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Stop: %v", err)
		}
		if !errors.Is(cause, ErrStopping) {
			t.Fatalf("cause %v", cause)
		}
		s := snapshot(f)
		if s.Ends["t1"] != "retried" || s.Failures["t1"].GetReason() != "runtime.stopping" {
			t.Fatalf("end %q failure %v", s.Ends["t1"], s.Failures["t1"])
		}
	})
}

func TestOptionsValidation(t *testing.T) {
	rt := workertest.New(t).Runtime()
	h := HandlerFunc(func(context.Context, *Task) error { return nil })
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"missing runtime id", Options{}},
		{"negative capacity", Options{RuntimeID: "r", Capacity: -1}},
		{"fraction of one", Options{RuntimeID: "r", HeartbeatFraction: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(rt, h, tc.o); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	for _, tc := range []struct {
		failures int
		lo, hi   time.Duration
	}{
		{1, 50 * time.Millisecond, 100 * time.Millisecond},
		{3, 200 * time.Millisecond, 400 * time.Millisecond},
		{30, 500 * time.Millisecond, time.Second},
	} {
		for range 50 {
			if d := b.Delay(tc.failures); d < tc.lo || d > tc.hi {
				t.Fatalf("Delay(%d) = %v, want in [%v, %v]", tc.failures, d, tc.lo, tc.hi)
			}
		}
	}
}

// TestModelCallSkippedWithoutTheFlag: a lease that does not say check_model_calls
// makes ModelCall answer at once, without asking (the fake server does not implement
// CheckModelCall: a call would fail).
func TestModelCallSkippedWithoutTheFlag(t *testing.T) {
	f := workertest.New(t)
	f.Enqueue("t1", nil)
	r := startWorker(t, f.Runtime(), func(ctx context.Context, task *Task) error {
		if err := task.ModelCall(ctx, ModelCall{ID: "m1", Node: "agent"}); err != nil {
			return err
		}
		return task.Complete(ctx, nil)
	}, once)
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	if s := snapshot(f); s.Ends["t1"] != "completed" {
		t.Fatalf("want completed, got %q (failure %v)", s.Ends["t1"], s.Failures["t1"])
	}
}
