package config

import (
	"strings"
	"testing"
	"time"
)

const approvalsYAML = `
hitl:
  default_timeout: 4h
  approver_groups:
    - {name: finance, tenant: acme, principals: [alice, bob, carol]}
    - {name: treasury, tenant: acme, principals: [dave]}
  approval_rules:
    - name: two-for-money
      tenant: acme
      tags: [money]
      group: finance
      quorum: 2
      escalation: {remind_after: 30m, escalate_after: 2h, escalate_to: treasury}
    - {name: nobody-approves-their-own, tenant: acme}
`

func TestApprovalRulesParseAndValidate(t *testing.T) {
	cfg := Default()
	if err := Parse([]byte(approvalsYAML), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the documented example must validate: %v", err)
	}
	r := cfg.HITL.Rules[0]
	if r.QuorumOrDefault() != 2 || r.RejectQuorumOrDefault() != 1 || !r.SoD() || r.Escalation.EscalateAfter.D() != 2*time.Hour {
		t.Fatalf("rule = %+v", r)
	}
	if d := cfg.HITL.Rules[1]; d.QuorumOrDefault() != 1 || !d.SoD() || d.TenantOrDefault() != "acme" {
		t.Fatalf("defaults of a bare rule: %+v", d)
	}
}

func TestApprovalRulesRefused(t *testing.T) {
	off := false
	for _, tc := range []struct {
		name   string
		mutate func(*HITL)
		want   string
	}{
		{"unknown group", func(h *HITL) { h.Rules[0].Group = "ops" }, `group "ops" is not a group of tenant "acme"`},
		{"group of another tenant", func(h *HITL) { h.Groups[0].Tenant = "globex" }, `group "finance" is not a group of tenant "acme"`},
		{"quorum over the group", func(h *HITL) { h.Rules[0].Quorum = 4 }, "fewer than the quorum (4)"},
		{"reject quorum over the group", func(h *HITL) { h.Rules[0].RejectQuorum = 5 }, "reject_quorum (5)"},
		{"negative quorum", func(h *HITL) { h.Rules[0].Quorum = -1 }, "quorum and reject_quorum must be 1 to 32"},
		{"duplicate rule", func(h *HITL) { h.Rules[1].Name = h.Rules[0].Name }, `name "two-for-money" is used twice`},
		{"duplicate group", func(h *HITL) { h.Groups[1].Name = "finance" }, `name "finance" is used twice`},
		{"empty group", func(h *HITL) { h.Groups[1].Principals = nil }, "1 to 1024 principals required"},
		{"member twice", func(h *HITL) { h.Groups[0].Principals = []string{"alice", "alice"} }, `"alice" is listed twice`},
		{"escalation without a group", func(h *HITL) { h.Rules[0].Escalation.EscalateTo = "" }, "escalate_after and escalate_to go together"},
		{"escalation to an unknown group", func(h *HITL) { h.Rules[0].Escalation.EscalateTo = "board" }, `escalate_to "board" is not a group`},
		{"reminder after the escalation", func(h *HITL) { h.Rules[0].Escalation.RemindAfter = Duration(3 * time.Hour) }, "remind_after (3h0m0s) must come before"},
		{"escalation after the deadline", func(h *HITL) { h.DefaultTimeout = Duration(time.Hour) }, "the deadline would apply first"},
		{"sub-second timer", func(h *HITL) { h.Rules[0].Escalation.RemindAfter = Duration(time.Millisecond) }, "at least 1s"},
		{"empty tag", func(h *HITL) { h.Rules[0].Tags = []string{""} }, "tags[0] is empty"},
		{"unnamed rule", func(h *HITL) { h.Rules[1].Name = "" }, "name: 1 to 64 bytes required"},
		{"separation off still validates", func(h *HITL) { h.Rules[1].SeparationOfDuties = &off }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Default()
			if err := Parse([]byte(approvalsYAML), &cfg); err != nil {
				t.Fatal(err)
			}
			tc.mutate(&cfg.HITL)
			err := cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
	t.Run("multi-tenant needs the tenant", func(t *testing.T) {
		cfg := Default()
		cfg.Auth.RequirePrincipal = true
		cfg.HITL.Groups = []ApproverGroup{{Name: "finance", Principals: []string{"a"}}}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "hitl.approver_groups[0].tenant is required") {
			t.Fatalf("err = %v", err)
		}
	})
}
