package approvals

import (
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/tasks"
)

// escalatedAt reports whether rq's escalation group may decide at now: the escalation
// step ran, or its time passed (decisions do not wait for the timer loop).
func escalatedAt(rq *agentplanev1.ApprovalRequirement, now time.Time) bool {
	return rq.GetEscalated() || (rq.GetEscalateTime() != nil && !now.Before(rq.GetEscalateTime().AsTime()))
}

// voted reports whether principal has a vote on rq.
func voted(rq *agentplanev1.ApprovalRequirement, principal string) bool {
	is := func(a *agentplanev1.Approval) bool { return a.GetPrincipal() == principal }
	return slices.ContainsFunc(rq.GetApprovals(), is) || slices.ContainsFunc(rq.GetRejections(), is)
}

// checkEligible refuses principal as a voter on in under its requirement at now: the
// starter under separation of duties, a principal of neither the rule's group nor (once
// escalated) the escalation group, and one who has voted already, whatever channel
// they used.
func (rs *Rules) checkEligible(in *agentplanev1.Interrupt, principal string, now time.Time) error {
	rq := in.GetRequirement()
	id := in.GetInterruptId()
	if rq.GetSeparationOfDuties() && principal == rq.GetStartedBy() {
		return apierr.New(codes.PermissionDenied, apierr.ReasonApproverNotEligible,
			"%s started task %s, and approval rule %q separates duties: the task's starter cannot decide on its calls; ask another approver",
			principal, in.GetTaskId(), rq.GetRule()).
			WithMetadata(apierr.MetaInterruptID, id).WithMetadata("rule", rq.GetRule())
	}
	if g := rq.GetGroup(); g != "" {
		member := slices.Contains(rs.members(in.GetTenant(), g), principal)
		if !member && rq.GetEscalationGroup() != "" && escalatedAt(rq, now) {
			member = slices.Contains(rs.members(in.GetTenant(), rq.GetEscalationGroup()), principal)
		}
		if !member {
			return apierr.New(codes.PermissionDenied, apierr.ReasonApproverNotEligible,
				"approval rule %q asks group %q to decide on interrupt %s, and %s is not a member", rq.GetRule(), g, id, principal).
				WithMetadata(apierr.MetaInterruptID, id).WithMetadata("rule", rq.GetRule())
		}
	}
	if voted(rq, principal) {
		return apierr.FailedPrecondition(apierr.ReasonAlreadyVoted,
			"%s already decided on interrupt %s; approval rule %q counts each person once (%d of %d approvals so far)",
			principal, id, rq.GetRule(), len(rq.GetApprovals()), rq.GetQuorum()).
			WithMetadata(apierr.MetaInterruptID, id)
	}
	return nil
}

// reviewView is in as its reviewers see it under its requirement: with the edited
// arguments, when an edit is under review, as the arguments and digest to rule on.
func reviewView(in *agentplanev1.Interrupt) *agentplanev1.Interrupt {
	rq := in.GetRequirement()
	if rq.EditedArgumentsJson == nil {
		return in
	}
	v := proto.CloneOf(in)
	v.GetApproval().ArgumentsJson = rq.GetEditedArgumentsJson()
	v.ArgsDigest = rq.GetReviewArgsDigest()
	return v
}

// vote records principal's ruling on the interrupt rec, which an approval rule
// governs, inside op. Approvals of the arguments under review count toward the
// quorum, and the one that meets it resolves the interrupt with those arguments
// (EDIT when they are an edit's); rejections count toward the reject quorum; an edit
// (with a quorum over one) puts new arguments under review, clears the votes, and
// counts as its author's approval of them. Every vote is in the audit log.
func (s *Service) vote(op *tasks.Op, rec *storagev1.InterruptRecord, req *agentplanev1.ResolveInterruptRequest,
	principal string, ch hitl.Channel, p hitl.ResolveParams) (*agentplanev1.Interrupt, error) {
	in := rec.GetInterrupt()
	if err := hitl.CheckResolvable(in, ""); err != nil {
		return nil, err
	}
	if err := s.rules.checkEligible(in, principal, op.Now()); err != nil {
		return nil, err
	}
	d, err := hitl.DecideResolve(reviewView(in), req, p)
	if err != nil {
		return nil, err
	}
	rq := proto.CloneOf(in.GetRequirement())
	ruled := d.GetRuledArgsDigest()
	v := &agentplanev1.Approval{Principal: principal, Channel: string(ch), Time: timestamppb.New(op.Now()),
		ArgsDigest: ruled, Reason: d.Reason, Type: d.GetType()}
	resolved := false
	action := agentplanev1.AuditAction_AUDIT_ACTION_APPROVE
	resultDigest := ""
	switch d.GetType() {
	case agentplanev1.DecisionType_DECISION_TYPE_APPROVE:
		rq.Approvals = append(rq.Approvals, v)
		if rq.EditedArgumentsJson != nil {
			d.Type = agentplanev1.DecisionType_DECISION_TYPE_EDIT
		}
		resolved = len(rq.GetApprovals()) >= int(rq.GetQuorum())
	case agentplanev1.DecisionType_DECISION_TYPE_REJECT:
		action = agentplanev1.AuditAction_AUDIT_ACTION_REJECT
		rq.Rejections = append(rq.Rejections, v)
		// A rejected call is reported with the model's arguments, whatever edit was
		// under review: the decision binds those.
		d.ArgsDigest, d.RuledArgsDigest = in.GetArgsDigest(), in.GetArgsDigest()
		resolved = len(rq.GetRejections()) >= int(rq.GetRejectQuorum())
	case agentplanev1.DecisionType_DECISION_TYPE_EDIT:
		action = agentplanev1.AuditAction_AUDIT_ACTION_EDIT
		resultDigest = d.GetArgsDigest()
		v.ArgsDigest = d.GetArgsDigest()
		rq.Approvals, rq.Rejections = []*agentplanev1.Approval{v}, nil
		resolved = rq.GetQuorum() <= 1
		if !resolved {
			rq.EditedArgumentsJson = proto.String(d.GetArgumentsJson())
			rq.ReviewArgsDigest = d.GetArgsDigest()
		}
	}
	if err := s.audit(op, in, auditEntry{
		action: action, principal: principal, channel: ch, digest: ruled, reason: d.Reason,
		source: d.GetSource(), resolved: resolved, requestID: req.GetRequestId(), resultDigest: resultDigest, linkID: p.LinkID,
	}); err != nil {
		return nil, err
	}
	next := proto.CloneOf(in)
	next.Requirement = rq
	rec.Interrupt = next
	if resolved {
		d.Channel = string(ch)
		return s.resolve(op, rec, d)
	}
	if err := op.Writer().PutInterrupt(rec); err != nil {
		return nil, err
	}
	return next, nil
}

// auditEntry is what one audit record says beyond its interrupt.
type auditEntry struct {
	action       agentplanev1.AuditAction
	principal    string
	channel      hitl.Channel
	digest       string
	reason       *string
	source       agentplanev1.DecisionSource
	resolved     bool
	requestID    string
	resultDigest string
	group        string
	linkID       string
}

// audit appends an audit record about in inside op.
func (s *Service) audit(op *tasks.Op, in *agentplanev1.Interrupt, e auditEntry) error {
	now := op.Now()
	return op.Writer().PutAudit(&storagev1.AuditRecordEntry{Record: &agentplanev1.AuditRecord{
		AuditId: store.NewAuditID(now), Tenant: in.GetTenant(), TaskId: in.GetTaskId(), InterruptId: in.GetInterruptId(),
		ToolName: in.GetApproval().GetToolName(), Action: e.action, Principal: e.principal, Channel: string(e.channel),
		Time: timestamppb.New(now), ArgsDigest: e.digest, Reason: e.reason, Source: e.source, Resolved: e.resolved,
		Rule: in.GetRequirement().GetRule(), RequestId: e.requestID, ResultArgsDigest: e.resultDigest, Group: e.group,
		LinkId: e.linkID,
	}})
}

// auditDecision appends the audit record of a decision that resolves in alone (no
// approval rule, or the server's).
func (s *Service) auditDecision(op *tasks.Op, in *agentplanev1.Interrupt, d *agentplanev1.Decision, requestID, linkID string) error {
	action := agentplanev1.AuditAction_AUDIT_ACTION_APPROVE
	result := ""
	switch d.GetType() {
	case agentplanev1.DecisionType_DECISION_TYPE_REJECT:
		action = agentplanev1.AuditAction_AUDIT_ACTION_REJECT
	case agentplanev1.DecisionType_DECISION_TYPE_EDIT:
		action = agentplanev1.AuditAction_AUDIT_ACTION_EDIT
		result = d.GetArgsDigest()
	}
	return s.audit(op, in, auditEntry{
		action: action, principal: d.GetDecidedBy(), channel: hitl.Channel(d.GetChannel()), digest: d.GetRuledArgsDigest(),
		reason: d.Reason, source: d.GetSource(), resolved: true, requestID: requestID, resultDigest: result, linkID: linkID,
	})
}

// View is in as reviewers are shown it now (decorate): for notifications.
func (s *Service) View(in *agentplanev1.Interrupt) *agentplanev1.Interrupt {
	return s.decorate(in, s.clock.Now())
}

// decorate returns in with what its requirement's reviewers are told at now filled
// in: who may still approve, and how many approvals are still needed. in is not
// modified.
func (s *Service) decorate(in *agentplanev1.Interrupt, now time.Time) *agentplanev1.Interrupt {
	rq := in.GetRequirement()
	if rq == nil {
		return in
	}
	out := proto.CloneOf(in)
	rq = out.GetRequirement()
	rq.ApprovalsNeeded = max(rq.GetQuorum()-int32(len(rq.GetApprovals())), 0)
	if in.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_PENDING {
		rq.ApprovalsNeeded = 0
		return out
	}
	var eligible []string
	add := func(group string) {
		for _, p := range s.rules.members(in.GetTenant(), group) {
			if (rq.GetSeparationOfDuties() && p == rq.GetStartedBy()) || voted(rq, p) || slices.Contains(eligible, p) {
				continue
			}
			eligible = append(eligible, p)
		}
	}
	if rq.GetGroup() != "" {
		add(rq.GetGroup())
		if rq.GetEscalationGroup() != "" && escalatedAt(rq, now) {
			add(rq.GetEscalationGroup())
		}
	}
	slices.Sort(eligible)
	rq.Eligible = eligible
	return out
}
