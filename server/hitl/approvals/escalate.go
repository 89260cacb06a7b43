package approvals

import (
	"context"
	"time"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/tasks"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Escalation timers are fields of the stored interrupt (ApprovalRequirement's
// remind_time and escalate_time, with reminded and escalated once they ran), so they
// survive restarts like the interrupt; the store indexes each pending interrupt by its
// next step not yet run (store.IndexInterruptEscalations, store.EscalationDue), and
// the deadline loop reads what is due from it like deadlines.

// nextStep is what is due of rq's escalation at now: remind, escalate (both when the
// loop is late).
func nextStep(rq *agentplanev1.ApprovalRequirement, now time.Time) (remind, escalate bool) {
	due := func(ts *timestamppb.Timestamp, done bool) bool { return ts != nil && !done && !ts.AsTime().After(now) }
	return due(rq.GetRemindTime(), rq.GetReminded()), due(rq.GetEscalateTime(), rq.GetEscalated())
}

// findEscalations collects the pending interrupts with an escalation step due at now
// from the escalation index, and the time of the earliest step not yet due (zero:
// none).
func (s *Service) findEscalations(ctx context.Context, now time.Time) ([]dueInterrupt, time.Time, error) {
	return s.scanDue(ctx, store.IndexInterruptEscalations, "", now)
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
		remind, escalate := nextStep(in.GetRequirement(), op.Now())
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
