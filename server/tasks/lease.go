package tasks

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// Failure reasons set on TaskFailure.reason by the control plane (task.proto lists
// them; any other TaskFailure.reason is a runtime's).
const (
	// FailureAttemptsExhausted: the task's leases were lost (or failed with retry)
	// Config.MaxAttempts times in a row.
	FailureAttemptsExhausted = "lease.attempts_exhausted"
	// FailureRuntime is the default reason of FailTask.
	FailureRuntime = "runtime.error"
	// FailureModelCallRejected: a person rejected a model call that a spent budget
	// (on_limit approve) held for approval, or its deadline rejected it.
	FailureModelCallRejected = "budget.model_call_rejected"
)

// FailureReasons are the TaskFailure reasons the control plane itself writes.
var FailureReasons = []string{FailureAttemptsExhausted, FailureRuntime}

// Reasons written into StateChanged.reason. The comment on StateChanged.reason in
// task.proto lists the same closed set (a test keeps them equal); a move to FAILED
// carries the TaskFailure reason instead.
const (
	StateLeased            = "leased"
	StateLeaseRequeued     = "lease.requeued"
	StateInterruptRaised   = "interrupt.raised"
	StateInterruptPending  = "interrupt.pending"
	StateInterruptResolved = "interrupt.resolved"
	StateSuspended         = "task.suspended"
	StateTurnEnded         = "turn.ended"
	// StateToolOutputRequired: the turn ended waiting for client tool outputs.
	StateToolOutputRequired = "tool_output.required"
	StateContinued          = "continued"
	StateCompleted          = "completed"
	StateCanceled           = "canceled"
)

// StateReasons is every State* reason.
var StateReasons = []string{StateLeased, StateLeaseRequeued, StateInterruptRaised, StateInterruptPending,
	StateInterruptResolved, StateSuspended, StateTurnEnded, StateToolOutputRequired, StateContinued, StateCompleted, StateCanceled}

// maxLeaseBatch caps LeaseRequest.MaxTasks.
const maxLeaseBatch = 64

// MaxRuntimeQueues caps LeaseRequest.Queues.
const MaxRuntimeQueues = 16

// expireBatch bounds the leases one transaction expires.
const expireBatch = 128

// Lease ids carry the task's tenant, so that a runtime, which names only the task and
// the lease, is routed to the tenant's keys without a global index: "<tenant, base64>.<random>".
// They are opaque to runtimes; a forged one routes to a lease that does not match.

func encodeLeaseID(tenant, random string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(tenant)) + "." + random
}

// LeaseTenant returns the tenant a lease id was issued in, so that the service layer
// can check it against a tenant-scoped runtime's principal.
func LeaseTenant(leaseID string) (string, bool) {
	enc, _, ok := strings.Cut(leaseID, ".")
	if !ok {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(b) == 0 {
		return "", false
	}
	return string(b), true
}

func leaseLost(format string, args ...any) error {
	return apierr.FailedPrecondition(apierr.ReasonLeaseLost, format+"; stop working on the task", args...)
}

type fenceResult int

const (
	fenceOK fenceResult = iota
	fenceStale
	fenceRevoked
	fenceExpired
)

func fence(rec *storagev1.TaskRecord, ref *agentplanev1.LeaseRef, now time.Time) fenceResult {
	l := rec.GetLease()
	switch {
	case l == nil || l.GetLeaseId() != ref.GetLeaseId() || l.GetEpoch() != ref.GetEpoch():
		return fenceStale
	case l.GetRevoked():
		return fenceRevoked
	case !now.Before(l.GetDeadline().AsTime()):
		return fenceExpired
	}
	return fenceOK
}

// fenceError is the refusal of a lease that does not pass fence.
func fenceError(rec *storagev1.TaskRecord, ref *agentplanev1.LeaseRef, f fenceResult) error {
	switch {
	case f == fenceRevoked:
		return leaseLost("task %s was canceled (%s)", rec.GetTaskId(), rec.GetCancellation().GetReason())
	case f == fenceExpired:
		return leaseLost("lease %s of task %s expired at %s without a heartbeat",
			ref.GetLeaseId(), rec.GetTaskId(), rec.GetLease().GetDeadline().AsTime().Format(time.RFC3339Nano))
	case isTerminal(rec.GetState()):
		// The runtime's lease ended with the task: say why, not just that it is stale.
		return terminalError(rec, "nothing more can be written to it; stop working on the task")
	}
	return leaseLost("lease %s (epoch %d) is not the current lease of task %s (epoch %d)",
		ref.GetLeaseId(), ref.GetEpoch(), rec.GetTaskId(), rec.GetEpoch())
}

// UpdateLeased runs fn on the task named by ref, in one transaction, only while ref is
// the task's current lease: a stale or revoked lease is FAILED_PRECONDITION with reason
// LEASE_LOST (TASK_TERMINAL once the task has completed or failed) and fn does not run; an expired one is also LEASE_LOST, and the expiry
// (requeue or failure) is committed in the same transaction. Events fn appends with
// AppendContent are attributed to the lease's epoch. fn may run more than once (see
// UpdateTask).
func (m *Manager) UpdateLeased(ctx context.Context, ref *agentplanev1.LeaseRef, fn func(*Op) error) error {
	return m.updateLeased(ctx, ref, false, Request{}, fn, nil)
}

// UpdateLeasedOrCanceled is UpdateLeased that also runs fn when the lease was revoked
// because a caller canceled the task (Op.Canceled says so), so that a waiting runtime
// learns why it must stop instead of being told LEASE_LOST.
func (m *Manager) UpdateLeasedOrCanceled(ctx context.Context, ref *agentplanev1.LeaseRef, fn func(*Op) error) error {
	return m.updateLeased(ctx, ref, true, Request{}, fn, nil)
}

// Canceled says the lease of a fenced change was revoked by a cancellation (see
// UpdateLeasedOrCanceled).
func (o *Op) Canceled() bool { return o.rec.GetLease().GetRevoked() }

// readFenced reads the task a lease names, for a read made under that lease (a history
// read, a delta): the task must exist and the lease must pass the fence.
func readFenced(r store.Reader, tenant string, ref *agentplanev1.LeaseRef, now time.Time) (*storagev1.TaskRecord, error) {
	rec, err := r.GetTask(tenant, ref.GetTaskId())
	if store.IsNotFound(err) {
		return nil, leaseLost("task %q does not exist", ref.GetTaskId())
	}
	if err != nil {
		return nil, err
	}
	if f := fence(rec, ref, now); f != fenceOK {
		return nil, fenceError(rec, ref, f)
	}
	return rec, nil
}

// updateLeased fences ref and runs fn (see UpdateLeased). A call made under req that
// the task already applied is answered by replay, before fencing. Any call that passes
// the fence acknowledges the lease.
func (m *Manager) updateLeased(ctx context.Context, ref *agentplanev1.LeaseRef, allowRevoked bool, req Request, fn func(*Op) error, replay Replay) error {
	tenant, ok := LeaseTenant(ref.GetLeaseId())
	if !ok {
		return leaseLost("lease id %q was not issued by this control plane", ref.GetLeaseId())
	}
	now := m.clock.Now()
	var lost error
	err := m.store.Update(ctx, func(w store.Writer) error {
		lost = nil
		rec, err := w.GetTask(tenant, ref.GetTaskId())
		if store.IsNotFound(err) {
			return leaseLost("task %q does not exist", ref.GetTaskId())
		}
		if err != nil {
			return err
		}
		op := m.newOp(w, now, rec)
		op.epoch = ref.GetEpoch()
		if a, err := op.applied(req); err != nil || a != nil {
			if err != nil {
				return err
			}
			return replay(op, a)
		}
		switch f := fence(rec, ref, now); f {
		case fenceStale:
			return fenceError(rec, ref, f)
		case fenceRevoked:
			if !allowRevoked {
				return fenceError(rec, ref, f)
			}
		case fenceExpired:
			// Worded before expire, which releases the lease. The runtime got the
			// lease (it calls under it): losing it counts.
			lost = fenceError(rec, ref, fenceExpired)
			rec.GetLease().Acknowledged = true
			if err := op.expire(); err != nil {
				return err
			}
			return op.flush()
		}
		if l := rec.GetLease(); !l.GetAcknowledged() && !l.GetRevoked() {
			op.touched = true
			l.Acknowledged = true
		}
		if err := fn(op); err != nil {
			return err
		}
		op.remember(req, true)
		return op.flush()
	})
	if err != nil {
		return err
	}
	return lost
}

// acknowledge marks ref as acknowledged by its runtime, for a call that does not write
// (ReadTaskHistory). It is fenced like a write.
func (m *Manager) acknowledge(ctx context.Context, ref *agentplanev1.LeaseRef) error {
	return m.UpdateLeased(ctx, ref, func(*Op) error { return nil })
}

// expire ends an overdue lease: the task returns to the queue or, past
// Config.MaxAttempts, fails. A lease its runtime never acknowledged (the LeaseTasks
// response was lost, or the runtime died before its first call) was only offered: it
// counts no attempt, and the next lease has the same attempt number.
func (o *Op) expire() error {
	l := o.rec.GetLease()
	if err := o.ReleaseLease(agentplanev1.LeaseChangeKind_LEASE_CHANGE_KIND_EXPIRED); err != nil {
		return err
	}
	if !l.GetAcknowledged() {
		o.rec.Attempt--
		if len(o.rec.GetPendingInterruptIds()) > 0 {
			return o.SetState(agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED, StateInterruptPending)
		}
		return o.Resume(StateLeaseRequeued)
	}
	return o.lostAttempt(fmt.Sprintf("the lease held by runtime %q expired at %s without a heartbeat",
		l.GetRuntimeId(), l.GetDeadline().AsTime().Format(time.RFC3339)))
}

// grant leases the task to a runtime.
func (o *Op) grant(runtimeID, leaseID string) error {
	o.touched = true
	o.rec.Epoch++
	o.rec.Attempt++
	o.rec.QueueTime, o.rec.FairTime = nil, nil
	o.rec.Lease = &storagev1.LeaseRecord{
		LeaseId:   leaseID,
		Epoch:     o.rec.GetEpoch(),
		RuntimeId: runtimeID,
		GrantTime: timestamppb.New(o.now),
		Deadline:  timestamppb.New(o.now.Add(o.m.cfg.LeaseTTL)),
	}
	if err := o.SetState(agentplanev1.TaskState_TASK_STATE_WORKING, StateLeased); err != nil {
		return err
	}
	return o.Append(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_Lease{Lease: &agentplanev1.LeaseChanged{
		Kind: agentplanev1.LeaseChangeKind_LEASE_CHANGE_KIND_GRANTED, RuntimeId: runtimeID, LeaseId: leaseID,
		Epoch: o.rec.GetEpoch(), Attempt: o.rec.GetAttempt(),
	}}})
}

// leaseProto is what the runtime is handed with a fresh lease. Handing it the
// decisions of its turn (resolved_interrupts) does not spend them: a decision is
// spent when the runtime reports its call (useDecision sets consumed_epoch and drops
// it from resume_interrupt_ids), so a lease lost before that hands the same decisions
// to the next one, and no grant has to be undone. Marking them at grant would record only who last held the task,
// which the log's lease events already say.
func (o *Op) leaseProto() (*agentplanev1.Lease, error) {
	spec, err := o.Spec()
	if err != nil {
		return nil, err
	}
	l := o.rec.GetLease()
	out := &agentplanev1.Lease{
		LeaseId:             l.GetLeaseId(),
		Epoch:               l.GetEpoch(),
		Deadline:            l.GetDeadline(),
		Task:                toAPITask(o.rec, spec, ViewFull),
		Spec:                spec.GetResolvedSpec(),
		HistoryCursor:       o.rec.GetLastSequence(),
		Attempt:             o.rec.GetAttempt(),
		ContinueMessages:    o.rec.GetContinueMessages(),
		ContinueToolResults: o.rec.GetContinueToolResults(),
		McpServers:          spec.GetMcpServers(),
		A2APeers:            spec.GetA2APeers(),
		TraceContext:        o.rec.GetTraceContext(),
		CheckModelCalls:     o.m.budgets.GatesModelCalls(o.rec.GetTenant(), o.rec.GetAgentId()),
	}
	for _, ids := range []struct {
		ids []string
		dst *[]*agentplanev1.Interrupt
	}{{o.rec.GetResumeInterruptIds(), &out.ResolvedInterrupts}, {o.rec.GetPendingInterruptIds(), &out.PendingInterrupts}} {
		for _, id := range ids.ids {
			in, err := o.w.GetInterrupt(o.rec.GetTenant(), id)
			if err != nil {
				return nil, err
			}
			*ids.dst = append(*ids.dst, in.GetInterrupt())
		}
	}
	return out, nil
}

// LeaseRequest asks for work.
type LeaseRequest struct {
	// RuntimeID names the runtime process (required).
	RuntimeID string
	// MaxTasks is how many tasks it can take now: 0 means 1; capped at 64.
	MaxTasks int
	// Wait is how long to wait for work: 0 means do not wait; capped by
	// Config.MaxLeaseWait.
	Wait time.Duration
	// Tenant restricts the lease to one tenant's tasks; "" serves every tenant, shared
	// as Config.Flow.Fairness says (round robin by default), by priority then FIFO
	// within each.
	Tenant string
	// Queues are the run queues the runtime serves (at most 16); none means only
	// store.DefaultQueue. Tasks of other queues are never leased to it.
	Queues []string
}

// LeaseTasks grants up to MaxTasks queued tasks to a runtime, waiting up to Wait for
// some to be queued. It wakes as soon as a commit queues a task (no polling), and
// expires overdue leases before it looks, so a task whose runtime died is handed on
// without waiting for the maintenance loop. Each lease is a new epoch of its task.
// No work within Wait is an empty result, not an error.
func (m *Manager) LeaseTasks(ctx context.Context, req LeaseRequest) ([]*agentplanev1.Lease, error) {
	switch {
	case req.RuntimeID == "" || len(req.RuntimeID) > 255:
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "runtime_id is required (1 to 255 bytes)")
	case req.MaxTasks < 0:
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "max_tasks may not be negative")
	case req.Wait < 0:
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "wait may not be negative")
	case len(req.Queues) > MaxRuntimeQueues:
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "%d queues; a runtime serves at most %d", len(req.Queues), MaxRuntimeQueues)
	}
	queues := []string{store.DefaultQueue}
	if len(req.Queues) > 0 {
		queues = make([]string, 0, len(req.Queues))
		for i, q := range req.Queues {
			if err := CheckQueue(fmt.Sprintf("queues[%d]", i), q); err != nil {
				return nil, err
			}
			if !slices.Contains(queues, q) {
				queues = append(queues, q)
			}
		}
	}
	req.Queues = queues
	req.MaxTasks = min(max(req.MaxTasks, 1), maxLeaseBatch)
	req.Wait = min(req.Wait, m.cfg.MaxLeaseWait)
	deadline := time.Now().Add(req.Wait)
	var timer *time.Timer
	// Registered before the first look, so a task queued between a look and the wait
	// still wakes us.
	wake, unregister := m.work.register(req.Queues)
	defer unregister()
	var recheck time.Duration
	for {
		leases, contended, err := m.claim(ctx, req)
		if err != nil || len(leases) > 0 {
			return leases, err
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return nil, nil
		}
		wait := remaining
		if contended {
			// Work is queued, but another transaction held it and the look skipped
			// it (a store that locks rows, on PostgreSQL). Its holder may end without
			// queueing anything, which wakes nobody: look again soon.
			recheck = min(max(2*recheck, contendedRecheck), maxContendedRecheck)
			wait = min(wait, recheck)
		} else {
			recheck = 0
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-wake:
		case <-timer.C:
			if !time.Now().Before(deadline) {
				return nil, nil
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// contendedRecheck and maxContendedRecheck bound how soon, and how late, a long poll
// that found queued work held by another transaction looks again, doubling between.
const (
	contendedRecheck    = 20 * time.Millisecond
	maxContendedRecheck = time.Second
)

type queued struct {
	tenant, taskID string
	at             time.Time // the queue order time (schema.QueueOrder)
}

// claim grants what is queued now, in one transaction. contended says that work was
// queued but none was granted: the rows were held by other transactions (or taken by
// them meanwhile), or every task looked at waits for a concurrency slot or a lease
// token, which a commit elsewhere may free without queueing anything.
func (m *Manager) claim(ctx context.Context, req LeaseRequest) (leases []*agentplanev1.Lease, contended bool, err error) {
	now := m.clock.Now()
	hasQueued, due, err := m.hasWork(ctx, req.Tenant, req.Queues, now)
	if err != nil || (!hasQueued && !due) {
		return nil, false, err
	}
	m.rrMu.Lock()
	start := m.rrTenant
	m.rrMu.Unlock()
	suffixes := make([]string, req.MaxTasks)
	for i := range suffixes {
		suffixes[i] = newID()
	}
	var (
		granted    []string // the tenant of each lease
		backlogged []string
		waits      []queueWait
		fairs      []fairServed
	)
	err = m.store.Update(ctx, func(w store.Writer) error {
		leases, granted, waits, fairs = nil, nil, nil, nil
		if due {
			if _, err := m.expireDue(w, now, expireBatch); err != nil {
				return err
			}
		}
		full := map[string]bool{}
		var tried map[[2]string]bool // the first look's picks, for the second look only
		// A first look reads as far as the queues' policies say; when it passed over
		// tasks that wait for a slot of their own concurrency cap (which a queue
		// without policies does not expect), a second look reads flowScanWindow
		// further, so that the tasks behind them are not held up.
		for widen := false; ; widen = true {
			picks, tenants, err := m.pickQueued(w, req, start, now, widen)
			if err != nil {
				return err
			}
			if !widen {
				backlogged = tenants
			}
			passed, err := m.grantPicks(w, req, now, picks, tried, full, suffixes, &leases, &granted, &waits, &fairs)
			if err != nil {
				return err
			}
			if widen || !passed || len(leases) == req.MaxTasks || m.anyLimits(req.Queues) {
				return nil
			}
			// The first look granted fewer than MaxTasks: it tried every pick.
			tried = make(map[[2]string]bool, len(picks))
			for _, p := range picks {
				tried[[2]string{p.tenant, p.taskID}] = true
			}
		}
	})
	if err != nil {
		return nil, false, err
	}
	if len(granted) > 0 {
		m.rrMu.Lock()
		m.rrTenant = granted[len(granted)-1]
		if m.cfg.Flow.Fairness.Mode == config.FairWeighted {
			m.fair.granted(granted, backlogged, m.cfg.Flow.Fairness.Weight)
		}
		m.rrMu.Unlock()
	}
	m.served(fairs)
	if m.onWait != nil {
		for _, w := range waits {
			m.onWait(m.metricQueue(w.queue), w.wait)
		}
	}
	return leases, hasQueued && len(leases) == 0, nil
}

// grantPicks grants the picks not in tried, in order, until the claim holds MaxTasks
// leases; passed says that flow control passed one over.
func (m *Manager) grantPicks(w store.Writer, req LeaseRequest, now time.Time, picks []queued, tried map[[2]string]bool, full map[string]bool,
	suffixes []string, leases *[]*agentplanev1.Lease, granted *[]string, waits *[]queueWait, fairs *[]fairServed) (passed bool, err error) {
	for _, p := range picks {
		if len(*leases) == req.MaxTasks {
			break
		}
		if tried[[2]string{p.tenant, p.taskID}] {
			continue
		}
		rec, err := w.GetTask(p.tenant, p.taskID)
		if err != nil {
			return passed, err
		}
		op := m.newOp(w, now, rec)
		if m.limitsLease(rec) {
			ok, err := op.admit(full)
			if err != nil {
				return passed, err
			}
			if !ok {
				passed = true
				continue
			}
		}
		if qt := rec.GetQueueTime(); qt != nil {
			*waits = append(*waits, queueWait{store.QueueOf(rec), now.Sub(qt.AsTime())})
		}
		if ft := rec.GetFairTime(); ft != nil {
			*fairs = append(*fairs, fairServed{p.tenant, store.QueueOf(rec), ft.AsTime()})
		}
		if err := op.grant(req.RuntimeID, encodeLeaseID(p.tenant, suffixes[len(*leases)])); err != nil {
			return passed, err
		}
		l, err := op.leaseProto()
		if err != nil {
			return passed, err
		}
		if err := op.flush(); err != nil {
			return passed, err
		}
		*leases = append(*leases, l)
		*granted = append(*granted, p.tenant)
	}
	return passed, nil
}

// metricQueue is the queue label of a metric: the queue when it is the default one
// or has flow policies in the configuration, else "other", so that queue names
// runtimes choose do not multiply the series.
func (m *Manager) metricQueue(queue string) string {
	if queue == store.DefaultQueue || m.flow[queue] != nil {
		return queue
	}
	return "other"
}

type queueWait struct {
	queue string
	wait  time.Duration
}

// hasWork is a read-only look for tasks queued in queues and for overdue leases, so
// that idle long polls do not queue empty write transactions, and a claim reads (and
// so conflicts with writers of) the lease deadlines only when one is overdue.
func (m *Manager) hasWork(ctx context.Context, tenant string, queues []string, now time.Time) (queued, due bool, err error) {
	err = m.store.View(ctx, func(r store.Reader) error {
		found := false
		stopAtFirst := func(store.IndexEntry) (bool, error) { found = true; return false, nil }
		lookIn := func(t string) (bool, error) {
			for _, q := range queues {
				if err := r.ScanQueue(t, q, store.IndexRange{Until: queueHorizon(now)}, stopAtFirst); err != nil || found {
					return false, err
				}
			}
			return true, nil
		}
		if tenant != "" {
			if _, err := lookIn(tenant); err != nil {
				return err
			}
		} else if err := r.Tenants(store.IndexQueue, "", lookIn); err != nil {
			return err
		}
		queued = found
		var err error
		due, err = leasesDue(r, now)
		return err
	})
	return queued, due, err
}

// leasesDue reports whether a lease of any tenant is overdue at now.
func leasesDue(r store.Reader, now time.Time) (bool, error) {
	found := false
	err := r.Tenants(store.IndexLeaseDeadlines, "", func(t string) (bool, error) {
		err := r.ScanIndex(store.IndexLeaseDeadlines, t, store.IndexRange{Until: now}, func(store.IndexEntry) (bool, error) {
			found = true
			return false, nil
		})
		return !found, err
	})
	return found, err
}

// flowScanWindow is how many tasks past the first MaxTasks a claim reads of a queue
// with a concurrency cap or a lease rate, to find tasks whose key has room while
// those ahead of them wait.
const flowScanWindow = 256

// maxFairTenants bounds the tenants one claim compares under the weighted and fifo
// fairness modes (the scan starts after the tenant served last, so the others come
// round).
const maxFairTenants = 1024

// pickQueued lists the tasks a claim may grant, in the order to try them, and the
// tenants that had work. Round robin (the default): FIFO within a tenant's queue,
// round robin across them, tenants starting after the one served last. Weighted:
// the tenants' heads in weighted fair-share order (fairShare). FIFO: every head in
// queue order, whoever's. Each queue read is a range scan of that queue alone; a
// queue with flow limits (or any queue, when widen) is read flowScanWindow further.
func (m *Manager) pickQueued(r store.Reader, req LeaseRequest, start string, now time.Time, widen bool) ([]queued, []string, error) {
	n := req.MaxTasks
	mode := m.cfg.Flow.Fairness.Mode
	var heads [][]queued
	byTenant := map[string][]queued{}
	var tenants []string
	collect := func(t string) error {
		mine := []queued(nil)
		for _, name := range req.Queues {
			limit := n
			if widen || m.flow[name].limitsLeases() {
				limit += flowScanWindow
			}
			var q []queued
			err := r.ScanQueue(t, name, store.IndexRange{Until: queueHorizon(now)}, func(e store.IndexEntry) (bool, error) {
				q = append(q, queued{t, e.ID, e.At})
				return len(q) < limit, nil
			})
			if len(q) > 0 {
				heads = append(heads, q)
				mine = append(mine, q...)
			}
			if err != nil {
				return err
			}
		}
		if len(mine) > 0 {
			tenants = append(tenants, t)
			if mode == config.FairWeighted || mode == config.FairFIFO {
				slices.SortStableFunc(mine, func(a, b queued) int { return a.at.Compare(b.at) })
				byTenant[t] = mine
			}
		}
		return nil
	}
	if req.Tenant != "" {
		if err := collect(req.Tenant); err != nil {
			return nil, nil, err
		}
	} else {
		seen := map[string]bool{}
		enough := func() bool {
			if mode == config.FairWeighted || mode == config.FairFIFO {
				return len(tenants) >= maxFairTenants
			}
			return len(heads) >= n && !widen && !m.anyLimits(req.Queues)
		}
		visit := func(t string) (bool, error) {
			if seen[t] {
				return false, nil
			}
			seen[t] = true
			return !enough(), collect(t)
		}
		if err := r.Tenants(store.IndexQueue, start, visit); err != nil {
			return nil, nil, err
		}
		if !enough() {
			if err := r.Tenants(store.IndexQueue, "", visit); err != nil {
				return nil, nil, err
			}
		}
	}
	switch mode {
	case config.FairWeighted:
		m.rrMu.Lock()
		defer m.rrMu.Unlock()
		return m.fair.order(byTenant, m.cfg.Flow.Fairness.Weight), tenants, nil
	case config.FairFIFO:
		var all []queued
		for _, t := range tenants {
			all = append(all, byTenant[t]...)
		}
		slices.SortStableFunc(all, func(a, b queued) int { return a.at.Compare(b.at) })
		return all, tenants, nil
	}
	var picks []queued
	for round := 0; ; round++ {
		took := false
		for _, q := range heads {
			if round < len(q) {
				picks = append(picks, q[round])
				took = true
			}
		}
		if !took {
			break
		}
	}
	return picks, tenants, nil
}

// anyLimits says whether one of queues has a concurrency cap or a lease rate: a claim
// then reads more tenants than it needs tasks, since some may wait.
func (m *Manager) anyLimits(queues []string) bool {
	for _, q := range queues {
		if m.flow[q].limitsLeases() {
			return true
		}
	}
	return false
}

// expireDue expires up to limit overdue leases across tenants.
func (m *Manager) expireDue(w store.Writer, now time.Time, limit int) (int, error) {
	var due []queued
	err := w.Tenants(store.IndexLeaseDeadlines, "", func(t string) (bool, error) {
		err := w.ScanIndex(store.IndexLeaseDeadlines, t, store.IndexRange{Until: now}, func(e store.IndexEntry) (bool, error) {
			due = append(due, queued{t, e.ID, e.At})
			return len(due) < limit, nil
		})
		return len(due) < limit, err
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range due {
		rec, err := w.GetTask(d.tenant, d.taskID)
		if store.IsNotFound(err) {
			continue // purged meanwhile
		}
		if err != nil {
			return 0, err
		}
		// The record, not the index entry, decides: a lease another replica expired,
		// or a runtime renewed, since the index was read is left alone, whatever
		// isolation the store gives the index read.
		if l := rec.GetLease(); l == nil || l.GetRevoked() || l.GetDeadline() == nil || l.GetDeadline().AsTime().After(now) {
			continue
		}
		op := m.newOp(w, now, rec)
		if err := op.expire(); err != nil {
			return 0, err
		}
		if err := op.flush(); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

// ExpireLeases expires every lease whose deadline has passed, returning each task to
// the queue (or failing it past Config.MaxAttempts). The maintenance loop calls it;
// LeaseTasks and every fenced write also expire lazily. It writes only when a read
// finds a lease overdue, so that the loop of every replica sharing a database costs
// a read when there is nothing to do. Replicas expiring the same lease at once do
// not both expire it: each expiry reads the lease in its write transaction, and the
// store applies those one after the other.
func (m *Manager) ExpireLeases(ctx context.Context) (int, error) {
	total := 0
	for {
		now := m.clock.Now()
		var due bool
		if err := m.store.View(ctx, func(r store.Reader) (err error) {
			due, err = leasesDue(r, now)
			return err
		}); err != nil || !due {
			return total, err
		}
		n := 0
		err := m.store.Update(ctx, func(w store.Writer) error {
			var err error
			n, err = m.expireDue(w, now, expireBatch)
			return err
		})
		total += n
		if err != nil || n < expireBatch {
			return total, err
		}
	}
}
