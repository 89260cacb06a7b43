package approvals

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/tasks"
)

// awaitRecheck is how often a waiting AwaitDecision looks at the store although no
// decision was announced: it ends the wait of a runtime whose lease expired or was
// taken over (decisions and task ends are announced, see Service.taskEnded), and
// bounds the cost of a missed announcement.
const awaitRecheck = 10 * time.Second

// AwaitDecision waits for the decision on interrupt id of the caller's task
// (interactive delivery) and sends it: the runtime runs exactly decision.arguments_json
// (approve, edit) or nothing (reject). It sends the decision as soon as the resolving
// transaction commits, without another store round trip when the decision was made
// while this lease held the task. A decision already made is sent at once, also to a
// later lease of the same task (a runtime taking over after a lost lease); a deadline
// that passed is applied first. While there is no decision it sends one pending
// message first, then a keepalive after every Config.StreamKeepalive without one.
//
// The wait ends (returning nil) after the decision, or after a canceled message when
// a caller canceled the task during the wait. It ends with ctx's error, with LEASE_LOST
// when the lease is no longer the task's, and with FAILED_PRECONDITION (TASK_TERMINAL)
// when the task ended otherwise. An interrupt of another task is NOT_FOUND; a
// chat-mode pause has no decision to wait for (FAILED_PRECONDITION). An error of send
// ends it too.
func (s *Service) AwaitDecision(ctx context.Context, ref *agentplanev1.LeaseRef, id string, send func(*agentplanev1.AwaitDecisionResponse) error) error {
	if id == "" {
		return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "interrupt_id is required")
	}
	tenant, ok := tasks.LeaseTenant(ref.GetLeaseId())
	if !ok {
		// Let the task domain word the refusal.
		_, err := s.decisionFor(ctx, ref, "", id)
		return err
	}
	decided := func(d *agentplanev1.Decision) error {
		return send(&agentplanev1.AwaitDecisionResponse{Kind: &agentplanev1.AwaitDecisionResponse_Decision{Decision: d}})
	}
	// Registered before the first look, so a decision committed between the look and
	// the wait is not missed.
	w := s.waiters.add(waitKey(tenant, id))
	defer s.waiters.remove(w)
	timer := time.NewTimer(s.recheck)
	defer timer.Stop()
	var keepalive <-chan time.Time
	if s.cfg.StreamKeepalive > 0 {
		t := time.NewTicker(s.cfg.StreamKeepalive)
		defer t.Stop()
		keepalive = t.C
	}
	first := true
	for {
		st, err := s.decisionFor(ctx, ref, tenant, id)
		switch {
		case err != nil:
			return err
		case st.canceled:
			return send(&agentplanev1.AwaitDecisionResponse{Kind: &agentplanev1.AwaitDecisionResponse_Canceled{
				Canceled: &agentplanev1.AwaitCanceled{Reason: st.cancelReason},
			}})
		case st.decision != nil:
			return decided(st.decision)
		case first:
			first = false
			if err := send(&agentplanev1.AwaitDecisionResponse{Kind: &agentplanev1.AwaitDecisionResponse_Pending{
				Pending: &agentplanev1.AwaitPending{Deadline: st.deadline},
			}}); err != nil {
				return err
			}
		}
	wait:
		for {
			select {
			case n := <-w.ch:
				if n.epoch == ref.GetEpoch() && n.epoch != 0 {
					// Decided while this lease held the task: no store round trip. If
					// the lease was lost since, the report of the call is fenced anyway.
					return decided(n.decision)
				}
				break wait
			case <-timer.C:
				timer.Reset(s.recheck)
				break wait
			case <-keepalive:
				if err := send(&agentplanev1.AwaitDecisionResponse{Kind: &agentplanev1.AwaitDecisionResponse_Keepalive{
					Keepalive: &agentplanev1.StreamKeepalive{Time: timestamppb.New(s.clock.Now())},
				}}); err != nil {
					return err
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// awaitState is what decisionFor found.
type awaitState struct {
	// decision is set once the interrupt is resolved.
	decision *agentplanev1.Decision
	// deadline is the pending interrupt's deadline, if it has one.
	deadline *timestamppb.Timestamp
	// canceled says a caller canceled the task; cancelReason is their reason.
	canceled     bool
	cancelReason string
}

// decisionFor looks at the interrupt under the caller's lease: pending (no decision)
// or resolved, or the task canceled under the lease. Being handed a decision is not
// using it: any lease of the task may be handed it again (a runtime taking over after
// a lost lease), and it is spent when the runtime reports the call
// (tasks.ReportEvents).
func (s *Service) decisionFor(ctx context.Context, ref *agentplanev1.LeaseRef, tenant, id string) (awaitState, error) {
	var st awaitState
	err := s.tasks.UpdateLeasedOrCanceled(ctx, ref, func(op *tasks.Op) error {
		st = awaitState{}
		// A rejected model call failed the task (failModelCall), revoking the lease: the
		// waiting runtime is handed the rejection, not told of a cancellation.
		if op.Canceled() && op.Task().GetFailure().GetReason() != tasks.FailureModelCallRejected {
			st.canceled, st.cancelReason = true, op.Task().GetCancellation().GetReason()
			return nil
		}
		rec, err := getInterrupt(op.Writer(), tenant, id)
		if store.IsNotFound(err) || (err == nil && rec.GetInterrupt().GetTaskId() != ref.GetTaskId()) {
			return store.ErrInterruptNotFound(id)
		}
		if err != nil {
			return err
		}
		if err := checkOpen(rec); err != nil {
			return err
		}
		in := rec.GetInterrupt()
		if in.GetKind() == agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE {
			return apierr.FailedPrecondition(apierr.ReasonTaskState,
				"interrupt %s is a chat-mode pause: it has no decision to wait for; the task resumes on ContinueTask", id)
		}
		if in.GetState() == agentplanev1.InterruptState_INTERRUPT_STATE_PENDING {
			resolved, ok, err := s.applyDeadline(op, rec)
			if ok {
				st.decision = resolved.GetDecision()
			}
			st.deadline = in.GetDeadline()
			return err
		}
		st.decision = in.GetDecision()
		return nil
	})
	if err != nil {
		return awaitState{}, err
	}
	return st, nil
}

// SuspendTask gives up the caller's lease while interrupts are pending (durable
// delivery): the task waits in INPUT_REQUIRED without a lease, and the decision that
// clears the last pending interrupt queues it again; the next lease carries the
// decisions (Lease.resolved_interrupts). When nothing is pending any more (the
// decision came first) the task is queued at once. It is a clean hand-back: the lost
// lease count starts over. The task is returned as it is after the change.
//
// The decisions reach every later lease of the turn until they are spent: a decision
// is spent (InterruptRecord.consumed_epoch) by the report of its call, not by a
// delivery, and from then on the report in the history stands for it.
//
// A retry of a suspension made under req returns the task as it is now.
func (s *Service) SuspendTask(ctx context.Context, ref *agentplanev1.LeaseRef, req tasks.Request) (*agentplanev1.Task, error) {
	var out *agentplanev1.Task
	err := s.tasks.UpdateLeasedOnce(ctx, ref, req, func(op *tasks.Op) error {
		out = nil
		task := op.Task()
		// Not HandBack: the decisions of this turn must still reach the next lease.
		task.FailedAttempts = 0
		if err := op.ReleaseLease(agentplanev1.LeaseChangeKind_LEASE_CHANGE_KIND_RELEASED); err != nil {
			return err
		}
		var err error
		if len(task.GetPendingInterruptIds()) > 0 {
			err = op.SetState(agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED, tasks.StateSuspended)
		} else {
			err = op.Resume(tasks.StateInterruptResolved)
		}
		if err != nil {
			return err
		}
		out, err = op.APITask()
		return err
	}, func(op *tasks.Op, _ *storagev1.AppliedRequest) error {
		var err error
		out, err = op.APITask()
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// notice announces a decision to waiters: the decision and the epoch of the lease
// that held the task when it was made (0: none).
type notice struct {
	decision *agentplanev1.Decision
	epoch    int64
}

type waiter struct {
	key string
	ch  chan notice
}

// waiters is the registry of AwaitDecision calls, keyed by tenant and interrupt.
type waiters struct {
	mu sync.Mutex
	m  map[string]map[*waiter]struct{}
}

func newWaiters() *waiters { return &waiters{m: map[string]map[*waiter]struct{}{}} }

func waitKey(tenant, id string) string { return tenant + "\x00" + id }

func (ws *waiters) add(key string) *waiter {
	w := &waiter{key: key, ch: make(chan notice, 1)}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	set := ws.m[key]
	if set == nil {
		set = map[*waiter]struct{}{}
		ws.m[key] = set
	}
	set[w] = struct{}{}
	return w
}

func (ws *waiters) remove(w *waiter) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if set := ws.m[w.key]; set != nil {
		delete(set, w)
		if len(set) == 0 {
			delete(ws.m, w.key)
		}
	}
}

// notify hands n to every waiter of key without blocking: an interrupt is decided
// once, so a waiter's one-slot channel is never full of another decision.
func (ws *waiters) notify(key string, n notice) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.m[key] {
		select {
		case w.ch <- n:
		default:
		}
	}
}

// count is the number of waiters, for tests.
func (ws *waiters) count() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	n := 0
	for _, set := range ws.m {
		n += len(set)
	}
	return n
}
