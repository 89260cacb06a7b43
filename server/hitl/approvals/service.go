package approvals

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/budget"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/pagetoken"
	"github.com/agentplane/agentplane/server/tasks"
)

// Config is what approvals need from the deployment's configuration.
type Config struct {
	// DefaultTimeout is an interrupt's deadline when its task sets none; 0 means none.
	DefaultTimeout time.Duration
	// DeadlineApprove applies approve, instead of reject, when a deadline passes.
	DeadlineApprove bool
	// MaxUntrustedBytes caps an untrusted reason when the spec sets no cap.
	MaxUntrustedBytes int64
	// TrustReasons makes reasons trusted when the spec does not say; the default is
	// untrusted (fenced and capped).
	TrustReasons bool
	// StreamKeepalive is how often a silent AwaitDecision stream sends a keepalive; 0
	// sends none.
	StreamKeepalive time.Duration
	// Groups and Rules are the approvers' groups and the approval rules (quorum,
	// separation of duties, escalation); New compiles them.
	Groups []config.ApproverGroup
	Rules  []config.ApprovalRule
}

// ConfigFrom takes the approvals settings from the deployment configuration.
func ConfigFrom(c config.Config) Config {
	return Config{
		DefaultTimeout:    c.HITL.DefaultTimeout.D(),
		DeadlineApprove:   c.HITL.DeadlineDecision == "approve",
		MaxUntrustedBytes: c.HITL.MaxUntrustedBytes,
		StreamKeepalive:   c.Limits.StreamKeepaliveInterval.D(),
		Groups:            c.HITL.Groups,
		Rules:             c.HITL.Rules,
	}
}

// Options builds a Service.
type Options struct {
	// Tasks is the task domain; every change goes through its Op, so task state, the
	// event log and the lease fence stay its business.
	Tasks *tasks.Manager
	// Store is the store Tasks runs on, for reads.
	Store store.Store
	// Gate answers CheckToolCall. Required (it carries gates.AlwaysGated).
	Gate *hitl.Gate
	// ValidateArgs checks edited arguments (spec.ValidateArgs). Required.
	ValidateArgs hitl.ArgsValidator
	// Budgets are the ones Tasks counts (tasks.Options.Budgets): CheckModelCall holds
	// the model calls of a spent budget whose on_limit is approve. nil: none.
	Budgets *budget.Budgets
	Config  Config
	// Clock must be the one Tasks uses. Defaults to the system clock.
	Clock tasks.Clock
	// Logger defaults to slog.Default.
	Logger *slog.Logger
}

// Service is the durable human-in-the-loop flow. Safe for concurrent use.
type Service struct {
	tasks    *tasks.Manager
	store    store.Store
	gate     *hitl.Gate
	rules    *Rules
	validate hitl.ArgsValidator
	budgets  *budget.Budgets
	cfg      Config
	clock    tasks.Clock
	log      *slog.Logger
	tokens   *pagetoken.Codec
	waiters  *waiters
	// recheck is awaitRecheck; tests lengthen it to prove a wait ends by announcement.
	recheck time.Duration

	// kick wakes the deadline loop when an earlier deadline may exist.
	kick chan struct{}

	loopMu   sync.Mutex
	stopLoop func()
	loopDone chan struct{}
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now().UTC() }

// New returns a Service. It starts no goroutine: call Start for deadline expiry.
func New(opts Options) (*Service, error) {
	switch {
	case opts.Tasks == nil || opts.Store == nil:
		return nil, errors.New("approvals: Options.Tasks and Options.Store are required")
	case opts.Gate == nil:
		return nil, errors.New("approvals: Options.Gate is required")
	case opts.ValidateArgs == nil:
		return nil, errors.New("approvals: Options.ValidateArgs is required")
	case opts.Config.DefaultTimeout < 0 || opts.Config.MaxUntrustedBytes < 1:
		return nil, errors.New("approvals: Config needs a non-negative default timeout and a positive max_untrusted_bytes")
	}
	rules, err := NewRules(opts.Config.Groups, opts.Config.Rules)
	if err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	}
	if opts.Clock == nil {
		opts.Clock = systemClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Service{
		tasks:    opts.Tasks,
		store:    opts.Store,
		gate:     opts.Gate,
		rules:    rules,
		validate: opts.ValidateArgs,
		budgets:  opts.Budgets,
		cfg:      opts.Config,
		clock:    opts.Clock,
		log:      opts.Logger,
		tokens:   pagetoken.New(opts.Store.TokenKey()),
		waiters:  newWaiters(),
		recheck:  awaitRecheck,
		kick:     make(chan struct{}, 1),
	}
	opts.Tasks.OnTaskEnd(s.taskEnded)
	return s, nil
}

// taskEnded wakes the runtimes waiting on interrupts of a task that just ended: their
// AwaitDecision looks again at once and is refused (the lease ended with the task),
// instead of noticing at its next re-check.
func (s *Service) taskEnded(tenant, _ string, resolved []*agentplanev1.Decision) {
	for _, d := range resolved {
		s.waiters.notify(waitKey(tenant, d.GetInterruptId()), notice{decision: d})
	}
}

// reasonPolicy is how reasons reach the model at node.
func (s *Service) reasonPolicy(spec *storagev1.TaskSpecRecord, node string) hitl.ReasonPolicy {
	return hitl.ReasonPolicyFor(hitl.HitlReasonTrust(spec.GetResolvedSpec(), node),
		hitl.ReasonDefaults{Trusted: s.cfg.TrustReasons, MaxUntrustedBytes: s.cfg.MaxUntrustedBytes})
}

// timeout is the deadline span of the task's interrupts.
func (s *Service) timeout(spec *storagev1.TaskSpecRecord) time.Duration {
	if d := spec.GetInterruptTimeout(); d != nil && d.AsDuration() > 0 {
		return d.AsDuration()
	}
	return s.cfg.DefaultTimeout
}

// getInterrupt reads tenant's interrupt id. The record of a call the gate decided at
// once (hitl.DecidedCall) shares the interrupts' keys but is no interrupt: nobody was
// asked, and nobody can resolve or await it. It is NOT_FOUND like an absent one.
func getInterrupt(r store.Reader, tenant, id string) (*storagev1.InterruptRecord, error) {
	rec, err := r.GetInterrupt(tenant, id)
	if err == nil && hitl.DecidedAtCheck(rec.GetInterrupt()) {
		return nil, store.ErrInterruptNotFound(id)
	}
	return rec, err
}

// checkOpen refuses an interrupt its task can no longer act on.
func checkOpen(rec *storagev1.InterruptRecord) error {
	if r := rec.GetClosedReason(); r != "" {
		return apierr.FailedPrecondition(apierr.ReasonTaskTerminal,
			"interrupt %s was closed because its task ended (%s); it can no longer be resolved", rec.GetInterrupt().GetInterruptId(), r)
	}
	return nil
}

// resolve records decision d on the interrupt rec inside op: the interrupt is
// RESOLVED, the decision is in the log, the task no longer waits for it, and the
// task moves on. When a runtime holds the lease (interactive delivery) the task is
// WORKING again as soon as nothing else is pending and the waiters are woken after
// the commit; otherwise (durable delivery) it is queued, and the next lease carries
// the decision (TaskRecord.resume_interrupt_ids). Resolved tool approvals are kept in
// resume_interrupt_ids in both cases, so a runtime that takes over after a lost
// lease learns the decisions of its turn too.
func (s *Service) resolve(op *tasks.Op, rec *storagev1.InterruptRecord, d *agentplanev1.Decision) (*agentplanev1.Interrupt, error) {
	task := op.Task()
	in := hitl.Resolved(rec.GetInterrupt(), d)
	id := in.GetInterruptId()
	rec.Interrupt = in
	lease := task.GetLease()
	held := lease != nil && !lease.GetRevoked()
	var epoch int64
	if held {
		epoch = lease.GetEpoch()
	}
	if err := op.Writer().PutInterrupt(rec); err != nil {
		return nil, err
	}
	// A control-plane event: a decision must be recordable even when the task's
	// history is at its limit.
	if err := op.Append(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_InterruptResolved{
		InterruptResolved: hitl.InterruptResolvedEvent(d),
	}}); err != nil {
		return nil, err
	}
	task.PendingInterruptIds = slices.DeleteFunc(task.PendingInterruptIds, func(p string) bool { return p == id })
	if in.GetKind() == agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL && !slices.Contains(task.GetResumeInterruptIds(), id) {
		task.ResumeInterruptIds = append(task.ResumeInterruptIds, id)
	}
	key := waitKey(task.GetTenant(), id)
	op.Writer().OnCommit(func() { s.waiters.notify(key, notice{decision: d, epoch: epoch}) })
	if hitl.IsModelCall(in) && hitl.Rejected(d) {
		return in, failModelCall(op, in, d)
	}
	if len(task.GetPendingInterruptIds()) == 0 {
		var err error
		if held {
			err = op.SetState(agentplanev1.TaskState_TASK_STATE_WORKING, tasks.StateInterruptResolved)
		} else {
			err = op.Resume(tasks.StateInterruptResolved)
		}
		if err != nil {
			return nil, err
		}
	}
	return in, nil
}

// applyDeadline applies the deployment default to rec inside op when its deadline has
// passed, and reports whether it did.
func (s *Service) applyDeadline(op *tasks.Op, rec *storagev1.InterruptRecord) (*agentplanev1.Interrupt, bool, error) {
	if rec.GetClosedReason() != "" || !hitl.DeadlinePassed(rec.GetInterrupt(), op.Now()) {
		return nil, false, nil
	}
	// Under an approval rule the default is always reject: approving by the clock would
	// run a call without the people the rule asks for.
	approve := s.cfg.DeadlineApprove && rec.GetInterrupt().GetRequirement() == nil
	d := hitl.DeadlineDecision(rec.GetInterrupt(), approve, op.Now())
	d.Channel = string(hitl.ChannelSystem)
	if err := s.auditDecision(op, rec.GetInterrupt(), d, "", ""); err != nil {
		return nil, false, err
	}
	in, err := s.resolve(op, rec, d)
	return in, err == nil, err
}

func ts(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }
