package config

import (
	"fmt"
	"time"
)

// ApproverGroup is a named set of principals of one tenant, for approval rules to ask
// (docs/hitl.md, "Approval rules"). Members are principals as authentication names
// them (a token's name, a certificate's common name, owner in single-user mode);
// channels that identify people otherwise (a Slack user, an email address) map them
// to these principals, so one person is one member whatever channel they use.
type ApproverGroup struct {
	// Name is unique within the tenant.
	Name string `yaml:"name"`
	// Tenant whose rules may ask the group; in single-user mode it defaults to "default".
	Tenant string `yaml:"tenant"`
	// Principals are the members.
	Principals []string `yaml:"principals"`
}

// ApprovalRule says what an interrupt of one tenant needs before its call runs or is
// rejected. The first rule of the tenant that matches a gated call applies, and is
// copied onto its interrupt when it is raised; an interrupt no rule matches is decided
// by one approver, as without rules.
type ApprovalRule struct {
	// Name is unique within the tenant; it is shown with the interrupt and in the audit.
	Name string `yaml:"name"`
	// Tenant whose calls it governs; in single-user mode it defaults to "default".
	Tenant string `yaml:"tenant"`
	// Tools, Tags and Expression select the calls: a call matches when its tool is one
	// of Tools, one of its tags (from the interrupt policy) is one of Tags, and
	// Expression (CEL over the call, as interrupt_policy.predicate sees it, returning a
	// bool) is true, each only when given. A rule with none of them matches every call.
	Tools      []string `yaml:"tools"`
	Tags       []string `yaml:"tags"`
	Expression string   `yaml:"expression"`
	// Group is the approvers' group; empty lets any principal with the approver role
	// decide (with quorum and separation of duties still applying).
	Group string `yaml:"group"`
	// Quorum is how many approvals of the same arguments, by distinct principals, run the
	// call (default 1).
	Quorum int `yaml:"quorum"`
	// RejectQuorum is how many rejections, by distinct principals, reject it (default 1:
	// one rejection from the group rejects).
	RejectQuorum int `yaml:"reject_quorum"`
	// SeparationOfDuties refuses decisions by the principal who started the task
	// (default true).
	SeparationOfDuties *bool `yaml:"separation_of_duties"`
	// Escalation reminds and then widens the approvers before the deadline applies.
	Escalation Escalation `yaml:"escalation"`
}

// Escalation is what happens while an interrupt under a rule waits: a reminder, then
// a second group. Both are webhook events (interrupt.reminder, interrupt.escalated)
// and audit records; the interrupt's deadline, if any, still applies its default after.
type Escalation struct {
	// RemindAfter sends interrupt.reminder this long after the interrupt was raised, if
	// it is still pending; 0: no reminder.
	RemindAfter Duration `yaml:"remind_after"`
	// EscalateAfter notifies EscalateTo this long after the interrupt was raised (and
	// from then its members may decide too); 0: no escalation.
	EscalateAfter Duration `yaml:"escalate_after"`
	// EscalateTo names the second group.
	EscalateTo string `yaml:"escalate_to"`
}

// Bounds of the approval configuration.
const (
	// MaxApprovalQuorum bounds quorum and reject_quorum.
	MaxApprovalQuorum = 32
	// MaxGroupPrincipals bounds one group's members.
	MaxGroupPrincipals = 1024
)

// SoD is separation_of_duties with its default (true).
func (r ApprovalRule) SoD() bool { return r.SeparationOfDuties == nil || *r.SeparationOfDuties }

// QuorumOrDefault is quorum with its default (1).
func (r ApprovalRule) QuorumOrDefault() int { return max(r.Quorum, 1) }

// RejectQuorumOrDefault is reject_quorum with its default (1).
func (r ApprovalRule) RejectQuorumOrDefault() int { return max(r.RejectQuorum, 1) }

// TenantOrDefault is the rule's tenant, "default" when unset.
func (r ApprovalRule) TenantOrDefault() string { return tenantOrDefault(r.Tenant) }

// TenantOrDefault is the group's tenant, "default" when unset.
func (g ApproverGroup) TenantOrDefault() string { return tenantOrDefault(g.Tenant) }

func tenantOrDefault(t string) string {
	if t == "" {
		return "default"
	}
	return t
}

// validateApprovals reports every problem of hitl.approver_groups and
// hitl.approval_rules. Expressions are compiled by the approvals service when the
// server starts (the CEL environment is the interrupt policy's).
func (c *Config) validateApprovals(bad func(format string, args ...any)) {
	type key struct{ tenant, name string }
	groups := map[key]int{}
	for i, g := range c.HITL.Groups {
		at := fmt.Sprintf("hitl.approver_groups[%d]", i)
		c.checkTenantField(at, g.Tenant, bad)
		k := key{g.TenantOrDefault(), g.Name}
		switch {
		case g.Name == "" || len(g.Name) > 64:
			bad("%s.name: 1 to 64 bytes required", at)
		case groups[k] > 0:
			bad("%s.name %q is used twice in tenant %q", at, g.Name, k.tenant)
		}
		if len(g.Principals) == 0 || len(g.Principals) > MaxGroupPrincipals {
			bad("%s.principals: 1 to %d principals required", at, MaxGroupPrincipals)
		}
		seen := map[string]bool{}
		for j, p := range g.Principals {
			if p == "" || len(p) > 255 {
				bad("%s.principals[%d]: 1 to 255 bytes required", at, j)
			} else if seen[p] {
				bad("%s.principals[%d] %q is listed twice", at, j, p)
			}
			seen[p] = true
		}
		groups[k] = len(g.Principals)
	}
	rules := map[key]bool{}
	for i, r := range c.HITL.Rules {
		at := fmt.Sprintf("hitl.approval_rules[%d]", i)
		c.checkTenantField(at, r.Tenant, bad)
		tenant := r.TenantOrDefault()
		switch k := (key{tenant, r.Name}); {
		case r.Name == "" || len(r.Name) > 64:
			bad("%s.name: 1 to 64 bytes required", at)
		case rules[k]:
			bad("%s.name %q is used twice in tenant %q", at, r.Name, tenant)
		default:
			rules[k] = true
		}
		if r.Quorum < 0 || r.Quorum > MaxApprovalQuorum || r.RejectQuorum < 0 || r.RejectQuorum > MaxApprovalQuorum {
			bad("%s: quorum and reject_quorum must be 1 to %d (0: 1)", at, MaxApprovalQuorum)
		}
		if r.Group != "" {
			n, ok := groups[key{tenant, r.Group}]
			switch {
			case !ok:
				bad("%s.group %q is not a group of tenant %q (hitl.approver_groups)", at, r.Group, tenant)
			case r.QuorumOrDefault() > n || r.RejectQuorumOrDefault() > n:
				bad("%s: group %q has %d members, fewer than the quorum (%d) or reject_quorum (%d): it could never decide",
					at, r.Group, n, r.QuorumOrDefault(), r.RejectQuorumOrDefault())
			}
		}
		for j, t := range r.Tools {
			if t == "" {
				bad("%s.tools[%d] is empty", at, j)
			}
		}
		for j, t := range r.Tags {
			if t == "" {
				bad("%s.tags[%d] is empty", at, j)
			}
		}
		e := r.Escalation
		if e.RemindAfter < 0 || e.EscalateAfter < 0 {
			bad("%s.escalation: durations must not be negative", at)
		}
		if (e.EscalateAfter > 0) != (e.EscalateTo != "") {
			bad("%s.escalation: escalate_after and escalate_to go together", at)
		}
		if e.EscalateTo != "" {
			if _, ok := groups[key{tenant, e.EscalateTo}]; !ok {
				bad("%s.escalation.escalate_to %q is not a group of tenant %q", at, e.EscalateTo, tenant)
			}
		}
		if e.RemindAfter > 0 && e.EscalateAfter > 0 && e.RemindAfter >= e.EscalateAfter {
			bad("%s.escalation: remind_after (%s) must come before escalate_after (%s)", at, e.RemindAfter.D(), e.EscalateAfter.D())
		}
		if d := c.HITL.DefaultTimeout.D(); d > 0 && e.EscalateAfter.D() >= d {
			bad("%s.escalation.escalate_after (%s) is not before hitl.default_timeout (%s): the deadline would apply first",
				at, e.EscalateAfter.D(), d)
		}
		if e.RemindAfter > 0 && e.RemindAfter < Duration(time.Second) || e.EscalateAfter > 0 && e.EscalateAfter < Duration(time.Second) {
			bad("%s.escalation: durations must be at least 1s", at)
		}
	}
}

// checkTenantField checks the tenant of an entry that defaults to "default".
func (c *Config) checkTenantField(at, tenant string, bad func(format string, args ...any)) {
	if tenant == "" && c.Auth.RequirePrincipal {
		bad("%s.tenant is required when auth.require_principal is on", at)
	}
	if len(tenant) > 255 {
		bad("%s.tenant is longer than 255 bytes", at)
	}
}
