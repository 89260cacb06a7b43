package approvals

import (
	"context"
	"crypto/sha256"
	"errors"
	"time"

	"github.com/agentplane/agentplane/api/reasons"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/tasks"
)

// ResolveInterrupt records principal's ruling on an interrupt of tenant and returns
// the interrupt, RESOLVED with the server's decision. In one transaction: the
// decision (bound to the principal and to the digests of the arguments ruled on and
// to run), the InterruptResolved event, and the task moving on (WORKING under the
// runtime that waits for it, or queued again for a suspended one). Waiting runtimes
// are woken after the commit.
//
// Refusals: another tenant's interrupt is NOT_FOUND like an absent one; a request
// without a decision, a rejection without a reason or an edit whose arguments do not
// fit the tool's parameter schema is INVALID_ARGUMENT (INTERRUPT_EDIT_INVALID with the
// violations for the edit); an interrupt already resolved is FAILED_PRECONDITION
// (INTERRUPT_ALREADY_RESOLVED), also when its deadline passed first (the deployment
// default is then recorded, and the error says so); a stale args_digest is
// FAILED_PRECONDITION (INTERRUPT_ARGS_MISMATCH); a chat-mode pause or an interrupt of
// an ended task is FAILED_PRECONDITION.
//
// With a request_id, a retry of a call that resolved the interrupt returns the
// interrupt as it is (resolved by that call) instead of INTERRUPT_ALREADY_RESOLVED; the
// same request_id with another request, or from another principal, is ALREADY_EXISTS
// (TASK_REQUEST_ID_REUSED).
func (s *Service) ResolveInterrupt(ctx context.Context, tenant, principal string, req *agentplanev1.ResolveInterruptRequest) (*agentplanev1.Interrupt, error) {
	if err := hitl.CheckResolveRequest(req); err != nil {
		return nil, err
	}
	once, err := tasks.NewRequest(req)
	if err != nil {
		return nil, err
	}
	if once.ID != "" {
		// A request id is its principal's: another principal sending the same request
		// under it is refused (TASK_REQUEST_ID_REUSED), not answered with the first
		// caller's result as though it had decided, nor counted toward a quorum.
		h := sha256.Sum256(append(append(once.Digest, 0), principal...))
		once.Digest = h[:len(once.Digest)]
	}
	id := req.GetInterruptId()
	ch := hitl.ChannelFrom(ctx)
	taskID, err := s.taskOf(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	var out *agentplanev1.Interrupt
	var late error
	err = s.tasks.UpdateTaskOnce(ctx, tenant, taskID, once, func(op *tasks.Op) error {
		out, late = nil, nil
		rec, err := getInterrupt(op.Writer(), tenant, id)
		if err != nil {
			return err
		}
		if err := checkOpen(rec); err != nil {
			return err
		}
		if in, ok, err := s.applyDeadline(op, rec); err != nil || ok {
			late = apierr.FailedPrecondition(apierr.ReasonAlreadyResolved,
				"interrupt %s passed its deadline (%s) before this decision; the deployment default was applied (%s)",
				id, rec.GetInterrupt().GetDeadline().AsTime().Format(time.RFC3339), in.GetDecision().GetType())
			return err
		}
		spec, err := op.Spec()
		if err != nil {
			return err
		}
		in := rec.GetInterrupt()
		schema, hasSchema := hitl.ToolSchema(spec.GetResolvedSpec(), in.GetNode(), in.GetApproval().GetToolName())
		params := hitl.ResolveParams{
			Principal:    principal,
			Now:          op.Now(),
			Reason:       s.reasonPolicy(spec, in.GetNode()),
			Schema:       schema,
			HasSchema:    hasSchema,
			ValidateArgs: s.validate,
			LinkID:       hitl.LinkIDFrom(ctx),
		}
		if in.GetRequirement() != nil {
			out, err = s.vote(op, rec, req, principal, ch, params)
			return err
		}
		d, err := hitl.DecideResolve(in, req, params)
		if err != nil {
			return err
		}
		d.Channel = string(ch)
		if err := s.auditDecision(op, in, d, req.GetRequestId(), params.LinkID); err != nil {
			return err
		}
		out, err = s.resolve(op, rec, d)
		return err
	}, func(op *tasks.Op, _ *storagev1.AppliedRequest) error {
		out, late = nil, nil
		rec, err := getInterrupt(op.Writer(), tenant, id)
		if err != nil {
			return err
		}
		out = rec.GetInterrupt()
		return nil
	})
	switch {
	case err != nil:
		if e := (*apierr.Error)(nil); errors.As(err, &e) && (e.Reason == apierr.ReasonApproverNotEligible || e.Reason == apierr.ReasonAlreadyVoted) {
			// Refused attempts decide nothing and are no audit record; operators see them here.
			s.log.Warn("decision refused by the approval rule", "tenant", tenant, "interrupt_id", id, "principal", principal,
				"channel", string(ch), "reason", reasons.Wire(e.Reason))
		}
		return nil, err
	case late != nil:
		return nil, late
	}
	return s.decorate(out, s.clock.Now()), nil
}

// taskOf returns the task of tenant's interrupt id. An interrupt never changes task,
// so the lookup can precede the transaction that changes it.
func (s *Service) taskOf(ctx context.Context, tenant, id string) (string, error) {
	var taskID string
	err := s.store.View(ctx, func(r store.Reader) error {
		rec, err := getInterrupt(r, tenant, id)
		if err != nil {
			return err
		}
		taskID = rec.GetInterrupt().GetTaskId()
		return nil
	})
	return taskID, err
}

// GetInterrupt returns tenant's interrupt id; another tenant's is NOT_FOUND like an
// absent one. A pending interrupt whose deadline has passed is resolved with the
// deployment default first, so a reader never sees an overdue interrupt as pending.
func (s *Service) GetInterrupt(ctx context.Context, tenant, id string) (*agentplanev1.Interrupt, error) {
	if id == "" {
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "interrupt_id is required")
	}
	var rec *storagev1.InterruptRecord
	err := s.store.View(ctx, func(r store.Reader) error {
		var err error
		rec, err = getInterrupt(r, tenant, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	if rec.GetClosedReason() != "" || !hitl.DeadlinePassed(rec.GetInterrupt(), s.clock.Now()) {
		return s.decorate(rec.GetInterrupt(), s.clock.Now()), nil
	}
	in, err := s.expire(ctx, tenant, rec.GetInterrupt().GetTaskId(), id)
	if err != nil {
		return nil, err
	}
	return s.decorate(in, s.clock.Now()), nil
}

// expire applies the deadline default to one interrupt, if it is still pending and
// overdue, and returns the interrupt as it is afterwards.
func (s *Service) expire(ctx context.Context, tenant, taskID, id string) (*agentplanev1.Interrupt, error) {
	var out *agentplanev1.Interrupt
	err := s.tasks.UpdateTask(ctx, tenant, taskID, func(op *tasks.Op) error {
		rec, err := getInterrupt(op.Writer(), tenant, id)
		if err != nil {
			return err
		}
		out = rec.GetInterrupt()
		if in, ok, err := s.applyDeadline(op, rec); err != nil || ok {
			out = in
			return err
		}
		return nil
	})
	return out, err
}
