package approvals

import (
	"context"
	"time"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/tasks"
	"google.golang.org/protobuf/proto"
)

// Escalation timers are fields of the stored interrupt (ApprovalRequirement's
// remind_time and escalate_time, with reminded and escalated once they ran), so they
// survive restarts like the interrupt. They are found by reading the pending inbox of
// the tenants whose rules escalate (only those), a cost proportional to their pending
// interrupts per look; the loop looks when the earliest timer is due, at least every
// maxDeadlineSleep.

// nextStep is what is due of rq's escalation at now: remind, escalate (both when the
// loop is late), and the time of the next step not yet due (zero: none).
func nextStep(rq *agentplanev1.ApprovalRequirement, now time.Time) (remind, escalate bool, next time.Time) {
	consider := func(ts interface{ AsTime() time.Time }, done bool) bool {
		if done || rq == nil {
			return false
		}
		at := ts.AsTime()
		if !at.After(now) {
			return true
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
		return false
	}
	if rq.GetRemindTime() != nil {
		remind = consider(rq.GetRemindTime(), rq.GetReminded())
	}
	if rq.GetEscalateTime() != nil {
		escalate = consider(rq.GetEscalateTime(), rq.GetEscalated())
	}
	return remind, escalate, next
}

// findEscalations collects the pending interrupts with an escalation step due at now,
// and the time of the earliest step not yet due.
func (s *Service) findEscalations(ctx context.Context, now time.Time) ([]dueInterrupt, time.Time, error) {
	var due []dueInterrupt
	var next time.Time
	tenants := s.rules.escalationTenants()
	if len(tenants) == 0 {
		return nil, next, nil
	}
	err := s.store.View(ctx, func(r store.Reader) error {
		for _, t := range tenants {
			err := r.ScanIndex(store.IndexPendingInterrupts, t, store.IndexRange{}, func(e store.IndexEntry) (bool, error) {
				rec, err := r.GetInterrupt(t, e.ID)
				if err != nil {
					return false, err
				}
				remind, escalate, n := nextStep(rec.GetInterrupt().GetRequirement(), now)
				if remind || escalate {
					due = append(due, dueInterrupt{tenant: t, taskID: rec.GetInterrupt().GetTaskId(), id: e.ID})
				}
				if !n.IsZero() && (next.IsZero() || n.Before(next)) {
					next = n
				}
				return len(due) < deadlineBatch, nil
			})
			if err != nil || len(due) == deadlineBatch {
				return err
			}
		}
		return nil
	})
	return due, next, err
}

// ApplyEscalations runs every escalation step that is due: the reminder, then the
// escalation to the rule's second group, each recorded on the interrupt and in the
// audit log in one transaction per interrupt (the webhooks interrupt.reminder and
// interrupt.escalated are written by the same transaction, through the outbox). It
// returns how many steps ran and when the next one is due (zero: none known). Safe
// on every replica at once: a step that another ran is not run again.
func (s *Service) ApplyEscalations(ctx context.Context) (int, time.Time, error) {
	total := 0
	for {
		due, next, err := s.findEscalations(ctx, s.clock.Now())
		if err != nil {
			return total, next, err
		}
		for _, d := range due {
			n, err := s.escalate(ctx, d)
			if store.IsNotFound(err) {
				continue
			}
			if err != nil {
				return total, next, err
			}
			total += n
		}
		if len(due) < deadlineBatch {
			return total, next, nil
		}
	}
}

// escalate runs the steps due of one interrupt.
func (s *Service) escalate(ctx context.Context, d dueInterrupt) (int, error) {
	steps := 0
	err := s.tasks.UpdateTask(ctx, d.tenant, d.taskID, func(op *tasks.Op) error {
		steps = 0
		rec, err := getInterrupt(op.Writer(), d.tenant, d.id)
		if err != nil {
			return err
		}
		in := rec.GetInterrupt()
		if in.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_PENDING || rec.GetClosedReason() != "" {
			return nil
		}
		remind, escalate, _ := nextStep(in.GetRequirement(), op.Now())
		if !remind && !escalate {
			return nil
		}
		next := proto.CloneOf(in)
		rq := next.GetRequirement()
		if remind {
			rq.Reminded = true
			if err := s.audit(op, in, auditEntry{action: agentplanev1.AuditAction_AUDIT_ACTION_REMIND,
				principal: hitl.SystemPrincipal, channel: hitl.ChannelSystem, digest: rq.GetReviewArgsDigest(), group: rq.GetGroup()}); err != nil {
				return err
			}
			steps++
		}
		if escalate {
			rq.Escalated = true
			if err := s.audit(op, in, auditEntry{action: agentplanev1.AuditAction_AUDIT_ACTION_ESCALATE,
				principal: hitl.SystemPrincipal, channel: hitl.ChannelSystem, digest: rq.GetReviewArgsDigest(), group: rq.GetEscalationGroup()}); err != nil {
				return err
			}
			steps++
		}
		rec.Interrupt = next
		return op.Writer().PutInterrupt(rec)
	})
	if err == nil && steps > 0 {
		s.log.Info("approval rule escalation", "tenant", d.tenant, "interrupt_id", d.id, "steps", steps)
	}
	return steps, err
}
