package webhooks

import (
	"net/url"
	"strings"
	"time"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// Message is the standard body: the Standard Webhooks envelope (type, timestamp,
// data). docs/notifications.md documents it field by field.
type Message struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      Data      `json:"data"`
}

// Data is what happened. Interrupt events fill the interrupt fields, task.ended the
// task ones; URL links to the console page of the item when the console's public URL
// is configured.
type Data struct {
	Tenant      string     `json:"tenant"`
	TaskID      string     `json:"task_id"`
	InterruptID string     `json:"interrupt_id,omitempty"`
	Tool        string     `json:"tool,omitempty"`
	Description string     `json:"description,omitempty"`
	Agent       string     `json:"agent,omitempty"`
	Node        string     `json:"node,omitempty"`
	Tags        []string   `json:"tags,omitempty"`
	Deadline    *time.Time `json:"deadline,omitempty"`
	Decision    *Decision  `json:"decision,omitempty"`
	// Requirement is the approval rule's state, for an interrupt under one.
	Requirement *Requirement `json:"requirement,omitempty"`
	// State is the task's terminal state for task.ended: completed, failed, canceled.
	State   string            `json:"state,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	Failure *Failure          `json:"failure,omitempty"`
	URL     string            `json:"url,omitempty"`
	// ArgsDigest is the interrupt's args_digest: a decision binds to it.
	ArgsDigest string `json:"args_digest,omitempty"`
	// Budget is the budget of a budget.warning, as it stood when it warned.
	Budget *Budget `json:"budget,omitempty"`
	// Links are the signed approve and reject links of the approvers the endpoint
	// names (approval_links_for), added when the notification is sent.
	Links []ApprovalLink `json:"links,omitempty"`
}

// ApprovalLink is one approver's pair of signed links (docs/hitl.md). Each works once,
// until Expires, while the interrupt is pending with the same arguments.
type ApprovalLink struct {
	// ID names the pair for HitlService.RevokeApprovalLink (ctl hitl revoke-link).
	ID         string    `json:"id"`
	Approver   string    `json:"approver"`
	ApproveURL string    `json:"approve_url"`
	RejectURL  string    `json:"reject_url"`
	Expires    time.Time `json:"expires"`
}

// Decision is how an interrupt was resolved.
type Decision struct {
	// Type is approve, reject or edit.
	Type string `json:"type"`
	// Source is human, deadline, ... (lower case of DecisionSource).
	Source    string `json:"source"`
	DecidedBy string `json:"decided_by,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// Budget is one budget's count (agentplane.v1.BudgetStatus). Costs are decimal
// strings of US dollars.
type Budget struct {
	Name        string    `json:"name"`
	AgentID     string    `json:"agent_id,omitempty"`
	Period      string    `json:"period"`
	PeriodStart time.Time `json:"period_start"`
	ResetsAt    time.Time `json:"resets_at"`
	UsedTokens  int64     `json:"used_tokens"`
	LimitTokens int64     `json:"limit_tokens,omitempty"`
	UsedUSD     string    `json:"used_usd,omitempty"`
	LimitUSD    string    `json:"limit_usd,omitempty"`
	WarnPercent int32     `json:"warn_percent"`
}

// Requirement is what an approval rule asks of an interrupt and how far it is.
type Requirement struct {
	Rule            string `json:"rule"`
	Group           string `json:"group,omitempty"`
	Quorum          int32  `json:"quorum"`
	ApprovalsNeeded int32  `json:"approvals_needed"`
	// Approvals and Rejections name who voted so far (of the arguments under review).
	Approvals  []string `json:"approvals,omitempty"`
	Rejections []string `json:"rejections,omitempty"`
	// Eligible are the principals who may still approve (empty: any approver).
	Eligible        []string   `json:"eligible,omitempty"`
	EscalationGroup string     `json:"escalation_group,omitempty"`
	EscalateTime    *time.Time `json:"escalate_time,omitempty"`
	Escalated       bool       `json:"escalated,omitempty"`
	// ReviewArgsDigest is the digest of the arguments under review (an edit's, after one).
	ReviewArgsDigest string `json:"review_args_digest"`
}

// Failure is why a task failed.
type Failure struct {
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

func enumName(s, prefix string) string { return strings.ToLower(strings.TrimPrefix(s, prefix)) }

// link is base/ui/<kind>/<id>, or "" without a base.
func link(base, kind, id string) string {
	if base == "" {
		return ""
	}
	return strings.TrimRight(base, "/") + "/ui/" + kind + "/" + url.PathEscape(id)
}

// interruptData describes a tool-approval interrupt.
func interruptData(rec *storagev1.InterruptRecord, consoleURL string) Data {
	in := rec.GetInterrupt()
	ap := in.GetApproval()
	d := Data{
		Tenant: in.GetTenant(), TaskID: in.GetTaskId(), InterruptID: in.GetInterruptId(),
		Tool: ap.GetToolName(), Description: ap.GetToolDescription(), Agent: ap.GetContext().GetAgentName(),
		Node: in.GetNode(), Tags: ap.GetContext().GetTags(),
		URL:        link(consoleURL, "interrupts", in.GetInterruptId()),
		ArgsDigest: in.GetArgsDigest(),
	}
	if dl := in.GetDeadline(); dl != nil {
		t := dl.AsTime()
		d.Deadline = &t
	}
	if rq := in.GetRequirement(); rq != nil {
		d.Requirement = &Requirement{
			Rule: rq.GetRule(), Group: rq.GetGroup(), Quorum: rq.GetQuorum(), ApprovalsNeeded: rq.GetApprovalsNeeded(),
			Approvals: principals(rq.GetApprovals()), Rejections: principals(rq.GetRejections()), Eligible: rq.GetEligible(),
			EscalationGroup: rq.GetEscalationGroup(), Escalated: rq.GetEscalated(), ReviewArgsDigest: rq.GetReviewArgsDigest(),
		}
		if et := rq.GetEscalateTime(); et != nil {
			t := et.AsTime()
			d.Requirement.EscalateTime = &t
		}
	}
	if dec := in.GetDecision(); dec != nil && in.GetState() == agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED {
		d.Decision = &Decision{
			Type:      enumName(dec.GetType().String(), "DECISION_TYPE_"),
			Source:    enumName(dec.GetSource().String(), "DECISION_SOURCE_"),
			DecidedBy: dec.GetDecidedBy(),
			Reason:    dec.GetReason(),
		}
	}
	return d
}

func principals(as []*agentplanev1.Approval) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.GetPrincipal())
	}
	return out
}

// taskData describes a task that ended.
func taskData(rec *storagev1.TaskRecord, consoleURL string) Data {
	d := Data{
		Tenant: rec.GetTenant(), TaskID: rec.GetTaskId(),
		State:  enumName(rec.GetState().String(), "TASK_STATE_"),
		Labels: rec.GetLabels(),
		URL:    link(consoleURL, "tasks", rec.GetTaskId()),
	}
	if f := rec.GetFailure(); f != nil {
		d.Failure = &Failure{Reason: f.GetReason(), Message: f.GetMessage()}
	}
	return d
}
