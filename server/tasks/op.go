package tasks

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// Op is one change to one task inside one store transaction. It buffers the events
// it appends and writes them, with the task record, when the transaction function
// returns; after the commit it publishes them to watchers and, if the task was
// queued, wakes waiting runtimes.
//
// An Op is valid only inside the function it was given to. Its methods check limits
// and preconditions before anything is written, so a refused change costs the other
// callers sharing the commit nothing.
type Op struct {
	m   *Manager
	w   store.Writer
	now time.Time
	rec *storagev1.TaskRecord
	// spec is loaded on first use.
	spec *storagev1.TaskSpecRecord
	// epoch is the lease epoch runtime-reported events are attributed to.
	epoch  int64
	events []*storagev1.EventRecord
	// touched says the record must be written back.
	touched bool
	queued  bool
	// ended says the task reached a terminal state in this Op; endDecisions are the
	// decisions that resolved its pending interrupts then. The end hooks learn both
	// after the commit.
	ended        bool
	endDecisions []*agentplanev1.Decision
	// result is what a keyed call recorded for its retries (SetResult).
	result *storagev1.AppliedRequest
}

func (m *Manager) newOp(w store.Writer, now time.Time, rec *storagev1.TaskRecord) *Op {
	if m.wrap != nil {
		w = m.wrap(w)
	}
	return &Op{m: m, w: w, now: now, rec: rec}
}

// Task is the task record, to read and change; a change is written when the
// transaction function returns.
func (o *Op) Task() *storagev1.TaskRecord {
	o.touched = true
	return o.rec
}

// Spec is what the task was started with (read-only).
func (o *Op) Spec() (*storagev1.TaskSpecRecord, error) {
	if o.spec == nil {
		spec, err := o.w.GetTaskSpec(o.rec.GetTenant(), o.rec.GetTaskId())
		if err != nil {
			return nil, err
		}
		o.spec = spec
	}
	return o.spec, nil
}

// APITask is the task as the API shows it (the full view), with this Op's changes so
// far: what a call that changes a task returns, without reading it again after the
// commit. It shares sub-messages with the Op's records, so call it after the last change.
func (o *Op) APITask() (*agentplanev1.Task, error) {
	spec, err := o.Spec()
	if err != nil {
		return nil, err
	}
	if o.touched || len(o.events) > 0 {
		// As flush will store it.
		o.rec.UpdateTime = timestamppb.New(o.now)
	}
	return toAPITask(o.rec, spec, ViewFull), nil
}

// Writer is the transaction, for records the task owns (interrupts, verdicts,
// obligations). Do not write the task record or its events through it.
func (o *Op) Writer() store.Writer { return o.w }

// Now is the time of this change.
func (o *Op) Now() time.Time { return o.now }

// Epoch is the lease epoch of a fenced change (UpdateLeased), 0 otherwise.
func (o *Op) Epoch() int64 { return o.epoch }

// Append records a control-plane event (a state change, a lease change, a gate
// decision); Task().LastSequence is then its sequence. It is not subject to the
// history limits, which bound what callers and runtimes put into a task, so that a
// task at its limit can still be ended.
func (o *Op) Append(ev *agentplanev1.TaskEvent) error {
	_, err := o.append(ev, limitNone)
	return err
}

// AppendContent records an event that carries caller or runtime content (a message,
// a tool call or result, a note, an output). It is refused with RESOURCE_EXHAUSTED
// when it exceeds Config.MaxEventBytes or would take the task past
// Config.MaxTaskEvents or Config.MaxTaskHistoryBytes.
func (o *Op) AppendContent(ev *agentplanev1.TaskEvent) (int64, error) {
	return o.append(ev, limitAll)
}

// limit says which limits an append is subject to.
type limit int

const (
	// limitNone: control-plane events.
	limitNone limit = iota
	// limitSize: the per-event size only; for the output that ends a task, so that a
	// task at its history limit can still complete.
	limitSize
	// limitAll: caller and runtime content.
	limitAll
)

func (o *Op) append(ev *agentplanev1.TaskEvent, lim limit) (int64, error) {
	if ev.GetPayload() == nil {
		return 0, apierr.InvalidArgument(apierr.ReasonEventInvalid, "an event needs a payload")
	}
	if isTerminal(o.rec.GetState()) && len(o.events) > 0 && isTerminalEvent(o.events[len(o.events)-1].GetEvent()) {
		// The terminal event must stay the last one: watchers stop there.
		return 0, fmt.Errorf("tasks: event appended after the terminal event of task %s", o.rec.GetTaskId())
	}
	size := int64(proto.Size(ev))
	c := o.m.cfg
	if lim >= limitSize && size > c.MaxEventBytes {
		return 0, apierr.ResourceExhausted("event of %d bytes exceeds the %d-byte limit per event (limits.max_event_bytes)", size, c.MaxEventBytes)
	}
	if lim == limitAll {
		switch {
		case o.rec.GetLastSequence()+1 > c.MaxTaskEvents:
			return 0, apierr.ResourceExhausted("task %s already has %d events, the limit (limits.max_task_events); end it and start a new task",
				o.rec.GetTaskId(), o.rec.GetLastSequence())
		case o.rec.GetHistoryBytes()+size > c.MaxTaskHistoryBytes:
			return 0, apierr.ResourceExhausted("task %s would hold %d bytes of history, over the %d-byte limit (limits.max_task_history_bytes); end it and start a new task",
				o.rec.GetTaskId(), o.rec.GetHistoryBytes()+size, c.MaxTaskHistoryBytes)
		}
	}
	o.touched = true
	o.rec.LastSequence++
	o.rec.HistoryBytes += size
	var msg *agentplanev1.Message
	if msg = eventMessage(ev); msg != nil {
		addUsage(&o.rec.Usage, msg.GetUsage())
	}
	o.rec.UpdateTime = timestamppb.New(o.now)
	// The stored payload carries no id, sequence or time: the envelope and key do.
	payload := &agentplanev1.TaskEvent{Payload: ev.GetPayload()}
	var epoch int64
	if lim != limitNone {
		epoch = o.epoch
	}
	o.events = append(o.events, &storagev1.EventRecord{
		Sequence: o.rec.GetLastSequence(),
		Time:     timestamppb.New(o.now),
		Epoch:    epoch,
		Event:    payload,
	})
	seq := o.rec.GetLastSequence()
	// Budgets count what runtimes report under a lease (a fenced change has an epoch),
	// not usage a caller wrote into a message of its own.
	if msg.GetUsage() != nil && epoch != 0 {
		if err := o.chargeBudgets(msg); err != nil {
			return 0, err
		}
	}
	return seq, nil
}

// chargeBudgets counts a logged message's usage against the budgets, in this
// transaction, and records each warning it triggers: a BudgetWarning event after the
// message, and what Options.BudgetWarned writes.
func (o *Op) chargeBudgets(msg *agentplanev1.Message) error {
	warned, err := o.m.budgets.Charge(o.w, o.rec.GetTenant(), o.rec.GetAgentId(), msg.GetModel(), msg.GetUsage(), o.now)
	if err != nil {
		return err
	}
	for _, st := range warned {
		if err := o.Append(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_BudgetWarning{
			BudgetWarning: &agentplanev1.BudgetWarning{Budget: st},
		}}); err != nil {
			return err
		}
		if o.m.budgetWarned != nil {
			if err := o.m.budgetWarned(o.w, o.rec.GetTaskId(), st); err != nil {
				return err
			}
		}
		log, taskID := o.m.log, o.rec.GetTaskId()
		o.w.OnCommit(func() {
			log.Warn("budget warning", "budget", st.GetBudget(), "tenant", st.GetTenant(), "used_tokens", st.GetUsedTokens(),
				"limit_tokens", st.GetLimitTokens(), "used_cost_micros", st.GetUsedCostMicros(), "limit_cost_micros", st.GetLimitCostMicros(),
				"task_id", taskID)
		})
	}
	return nil
}

// transitions lists the allowed state changes.
var transitions = map[agentplanev1.TaskState][]agentplanev1.TaskState{
	agentplanev1.TaskState_TASK_STATE_SUBMITTED: {
		agentplanev1.TaskState_TASK_STATE_WORKING, agentplanev1.TaskState_TASK_STATE_FAILED, agentplanev1.TaskState_TASK_STATE_CANCELED,
	},
	agentplanev1.TaskState_TASK_STATE_WORKING: {
		agentplanev1.TaskState_TASK_STATE_SUBMITTED, // requeued: the lease was lost or given back for a retry
		agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED, agentplanev1.TaskState_TASK_STATE_COMPLETED,
		agentplanev1.TaskState_TASK_STATE_FAILED, agentplanev1.TaskState_TASK_STATE_CANCELED,
	},
	agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED: {
		agentplanev1.TaskState_TASK_STATE_SUBMITTED, // continued, or decided, with no lease held: queued
		agentplanev1.TaskState_TASK_STATE_WORKING,   // decided while its runtime still holds the lease
		agentplanev1.TaskState_TASK_STATE_COMPLETED,
		agentplanev1.TaskState_TASK_STATE_FAILED, agentplanev1.TaskState_TASK_STATE_CANCELED,
	},
}

// IsTerminal reports whether s is a state a task never leaves: completed, failed,
// canceled.
func IsTerminal(s agentplanev1.TaskState) bool { return isTerminal(s) }

func isTerminal(s agentplanev1.TaskState) bool {
	switch s {
	case agentplanev1.TaskState_TASK_STATE_COMPLETED, agentplanev1.TaskState_TASK_STATE_FAILED, agentplanev1.TaskState_TASK_STATE_CANCELED:
		return true
	}
	return false
}

func isTerminalEvent(ev *agentplanev1.TaskEvent) bool {
	sc := ev.GetStateChanged()
	return sc != nil && isTerminal(sc.GetToState())
}

// SetState moves the task to another state and records it. Reaching a terminal state
// also takes the task out of the queue, revokes a lease still held (the runtime's next
// heartbeat learns why), resolves pending interrupts (closePendingInterrupts) and
// drops undelivered continue messages; it must be the last change of the Op, since
// watchers stop at it. Setting the current state is a no-op; a move the lifecycle
// does not allow is an error.
func (o *Op) SetState(to agentplanev1.TaskState, reason string) error {
	from := o.rec.GetState()
	if from == to {
		return nil
	}
	if !slices.Contains(transitions[from], to) {
		return fmt.Errorf("tasks: task %s cannot move from %s to %s", o.rec.GetTaskId(), from, to)
	}
	o.touched = true
	o.rec.State = to
	if isTerminal(to) {
		o.ended = true
		o.rec.EndTime = timestamppb.New(o.now)
		o.rec.QueueTime = nil
		if l := o.rec.GetLease(); l != nil && !l.GetRevoked() {
			l.Revoked = true
		}
		o.rec.ContinueMessages, o.rec.ContinueToolResults, o.rec.ResumeInterruptIds, o.rec.OpenCallIds = nil, nil, nil, nil
		if err := o.closePendingInterrupts(stateWord(to)); err != nil {
			return err
		}
	}
	return o.Append(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_StateChanged{
		StateChanged: &agentplanev1.StateChanged{FromState: from, ToState: to, Reason: reason},
	}})
}

func stateWord(s agentplanev1.TaskState) string {
	switch s {
	case agentplanev1.TaskState_TASK_STATE_COMPLETED:
		return "completed"
	case agentplanev1.TaskState_TASK_STATE_FAILED:
		return "failed"
	case agentplanev1.TaskState_TASK_STATE_CANCELED:
		return "canceled"
	}
	return "ended"
}

// closePendingInterrupts resolves the pending interrupts of a task that ends (how:
// "completed", "failed", "canceled"): an ended task can no longer act on a decision,
// so the server rejects each (hitl.TaskEndedDecision), records it in the log before
// the terminal event, and marks the interrupt closed (closed_reason task.<how>), so
// that the inbox, GetInterrupt and the log all say what happened.
func (o *Op) closePendingInterrupts(how string) error {
	for _, id := range o.rec.GetPendingInterruptIds() {
		rec, err := o.w.GetInterrupt(o.rec.GetTenant(), id)
		if err != nil {
			return err
		}
		d := hitl.TaskEndedDecision(rec.GetInterrupt(), how, o.now)
		rec.Interrupt = hitl.Resolved(rec.GetInterrupt(), d)
		rec.ClosedReason = "task." + how
		if err := o.w.PutInterrupt(rec); err != nil {
			return err
		}
		if err := o.Append(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_InterruptResolved{
			InterruptResolved: hitl.InterruptResolvedEvent(d),
		}}); err != nil {
			return err
		}
		o.endDecisions = append(o.endDecisions, d)
	}
	o.rec.PendingInterruptIds = nil
	return nil
}

// Enqueue puts the task in the run queue (FIFO per tenant, or by fair share between
// keys where the queue says so); runtimes waiting in LeaseTasks are woken after the
// commit.
func (o *Op) Enqueue() error {
	o.touched = true
	o.rec.QueueTime = timestamppb.New(o.now)
	o.queued = true
	return o.fairTag()
}

// ReleaseLease ends the task's lease, recording why (released by the runtime, or
// expired). The task is then neither leased nor queued until the caller says so.
func (o *Op) ReleaseLease(kind agentplanev1.LeaseChangeKind) error {
	l := o.rec.GetLease()
	if l == nil {
		return nil
	}
	o.touched = true
	o.rec.Lease = nil
	return o.Append(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_Lease{Lease: &agentplanev1.LeaseChanged{
		Kind: kind, RuntimeId: l.GetRuntimeId(), LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch(), Attempt: o.rec.GetAttempt(),
		Unacknowledged: kind == agentplanev1.LeaseChangeKind_LEASE_CHANGE_KIND_EXPIRED && !l.GetAcknowledged(),
	}}})
}

// HandBack marks a clean hand-back by the runtime (a pause or a suspension): the
// lost-lease count starts over and what the runtime was handed has been consumed.
func (o *Op) HandBack() {
	o.touched = true
	o.rec.FailedAttempts = 0
	o.rec.ContinueMessages, o.rec.ContinueToolResults, o.rec.ResumeInterruptIds = nil, nil, nil
}

// Resume makes a task without a lease runnable again: back to SUBMITTED in the queue,
// until a runtime leases it (WORKING means a runtime holds it). Use it when what a
// task waited for has arrived (a decision, a user message) or its lease was lost.
func (o *Op) Resume(reason string) error {
	if err := o.SetState(agentplanev1.TaskState_TASK_STATE_SUBMITTED, reason); err != nil {
		return err
	}
	return o.Enqueue()
}

// lostAttempt counts a lease lost or failed with retry and either returns the task to
// the queue or, past Config.MaxAttempts, fails it. A task with pending interrupts is
// parked instead (INPUT_REQUIRED, unleased): the decision requeues it.
func (o *Op) lostAttempt(what string) error {
	o.touched = true
	o.rec.FailedAttempts++
	if int(o.rec.GetFailedAttempts()) >= o.m.cfg.MaxAttempts {
		o.rec.Failure = &agentplanev1.TaskFailure{
			Reason:  FailureAttemptsExhausted,
			Message: fmt.Sprintf("gave up after %d attempts in a row: %s", o.rec.GetFailedAttempts(), what),
		}
		return o.SetState(agentplanev1.TaskState_TASK_STATE_FAILED, FailureAttemptsExhausted)
	}
	if len(o.rec.GetPendingInterruptIds()) > 0 {
		return o.SetState(agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED, StateInterruptPending)
	}
	return o.Resume(StateLeaseRequeued)
}

// flush writes the record and the events and arranges what follows the commit.
func (o *Op) flush() error {
	if !o.touched && len(o.events) == 0 {
		return nil
	}
	if err := o.releaseSlot(); err != nil {
		return err
	}
	tenant, taskID := o.rec.GetTenant(), o.rec.GetTaskId()
	o.rec.UpdateTime = timestamppb.New(o.now)
	if err := o.w.PutTask(o.rec); err != nil {
		return err
	}
	if err := o.w.AppendEvents(tenant, taskID, o.events...); err != nil {
		return err
	}
	events, queued, ended, decisions, m := o.events, o.queued, o.ended, o.endDecisions, o.m
	queue := store.QueueOf(o.rec)
	o.w.OnCommit(func() {
		m.hub.publish(tenant, taskID, events)
		if queued {
			m.work.broadcast(queue)
		}
		if ended {
			m.taskEnded(tenant, taskID, decisions)
		}
	})
	return nil
}

// UpdateTask runs fn on one task of tenant in one store transaction and commits what
// it changed through the Op. fn may run more than once (see store.Store.Update): it
// must reset anything it captures at its start and take ids and times from outside or
// from the Op. A missing task (or another tenant's) is NOT_FOUND.
func (m *Manager) UpdateTask(ctx context.Context, tenant, taskID string, fn func(*Op) error) error {
	now := m.clock.Now()
	return m.store.Update(ctx, func(w store.Writer) error {
		rec, err := w.GetTask(tenant, taskID)
		if err != nil {
			return err
		}
		op := m.newOp(w, now, rec)
		if err := fn(op); err != nil {
			return err
		}
		return op.flush()
	})
}
