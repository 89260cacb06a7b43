package approvals

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/hitl"
)

// Rules are the deployment's approval rules and approvers' groups, compiled: which
// rule governs a gated call (quorum, separation of duties, escalation), and who is in
// a group. Immutable, safe for concurrent use. A nil *Rules has none.
type Rules struct {
	byTenant map[string][]*rule
	groups   map[string]map[string][]string // tenant -> group -> principals
}

type rule struct {
	cfg   config.ApprovalRule
	tools map[string]bool
	tags  map[string]bool
	expr  *hitl.Policy
}

// NewRules compiles the rules of a configuration; a rule whose expression does not
// compile is an error naming it.
func NewRules(groups []config.ApproverGroup, rules []config.ApprovalRule) (*Rules, error) {
	rs := &Rules{byTenant: map[string][]*rule{}, groups: map[string]map[string][]string{}}
	for _, g := range groups {
		t := g.TenantOrDefault()
		if rs.groups[t] == nil {
			rs.groups[t] = map[string][]string{}
		}
		rs.groups[t][g.Name] = slices.Clone(g.Principals)
	}
	for i, c := range rules {
		r := &rule{cfg: c, tools: set(c.Tools), tags: set(c.Tags)}
		if c.Expression != "" {
			p, err := hitl.CompilePolicy(&agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Predicate{
				Predicate: &agentplanev1.PredicatePolicy{Expression: c.Expression},
			}})
			if err != nil {
				return nil, fmt.Errorf("hitl.approval_rules[%d] (%s).expression: %w", i, c.Name, err)
			}
			r.expr = p
		}
		rs.byTenant[c.TenantOrDefault()] = append(rs.byTenant[c.TenantOrDefault()], r)
	}
	return rs, nil
}

func set(xs []string) map[string]bool {
	if len(xs) == 0 {
		return nil
	}
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// members returns the principals of tenant's group.
func (rs *Rules) members(tenant, group string) []string {
	if rs == nil {
		return nil
	}
	return rs.groups[tenant][group]
}

// matches reports whether r governs the gated call in. An expression that cannot be
// evaluated (a missing key, the cost limit) counts as a match: the stricter rule
// applies when it cannot be told whether it should.
func (r *rule) matches(ctx context.Context, in *agentplanev1.Interrupt, sessionID string) bool {
	ap := in.GetApproval()
	if r.tools != nil && !r.tools[ap.GetToolName()] {
		return false
	}
	if r.tags != nil && !slices.ContainsFunc(ap.GetContext().GetTags(), func(t string) bool { return r.tags[t] }) {
		return false
	}
	if r.expr == nil {
		return true
	}
	args, ok := hitl.ParseArgs(ap.GetArgumentsJson())
	m := r.expr.Evaluate(ctx, hitl.PolicyContext{
		ToolName: ap.GetToolName(), ToolDescription: ap.GetToolDescription(), Args: args,
		ArgumentsJSON: ap.GetArgumentsJson(), ArgsValid: ok, AgentName: ap.GetContext().GetAgentName(),
		TripIndex: ap.GetContext().GetTripIndex(), SessionID: sessionID,
	})
	return m.Gate
}

// requirement is the requirement of the first of tenant's rules that governs the
// tool-approval interrupt in, raised at now by a task startedBy started; nil when none.
func (rs *Rules) requirement(ctx context.Context, in *agentplanev1.Interrupt, startedBy, sessionID string, now time.Time) *agentplanev1.ApprovalRequirement {
	if rs == nil || in.GetKind() != agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL {
		return nil
	}
	for _, r := range rs.byTenant[in.GetTenant()] {
		if !r.matches(ctx, in, sessionID) {
			continue
		}
		c := r.cfg
		req := &agentplanev1.ApprovalRequirement{
			Rule: c.Name, Group: c.Group, Quorum: int32(c.QuorumOrDefault()), RejectQuorum: int32(c.RejectQuorumOrDefault()),
			SeparationOfDuties: c.SoD(), StartedBy: startedBy, ReviewArgsDigest: in.GetArgsDigest(),
			EscalationGroup: c.Escalation.EscalateTo,
		}
		if d := c.Escalation.RemindAfter.D(); d > 0 {
			req.RemindTime = timestamppb.New(now.Add(d))
		}
		if d := c.Escalation.EscalateAfter.D(); d > 0 {
			req.EscalateTime = timestamppb.New(now.Add(d))
		}
		return req
	}
	return nil
}
