package config

import (
	"strings"
	"testing"
)

// TestValidateChannels: the identity table, the Slack app, links and email are
// checked at startup, every problem named with its path.
func TestValidateChannels(t *testing.T) {
	const mt = "auth:\n  require_principal: true\n  allow_insecure: true\n"
	const good = mt + `hitl:
  approvers:
    - {tenant: acme, principal: alice, slack_user_id: U0ALICE01, email: alice@example.com}
    - {tenant: acme, principal: bob, email: bob@example.com}
  slack:
    signing_secret: 8f742231b10e8888abcd99yyyzzz85a5
notifications:
  console_url: https://approvals.example.com
  smtp: {host: smtp.example.com, username: agentplane, password: pw, from: "agentplane <approvals@example.com>"}
  emails:
    - {name: acme-mail, tenant: acme, events: [interrupt.created], to: [alice, bob]}
`
	tests := []struct {
		name, yaml, want string
	}{
		{"complete", good, ""},
		{"single-user owner", "hitl:\n  approvers:\n    - {principal: owner, email: me@example.com}\n", ""},
		{"single-user other", "hitl:\n  approvers:\n    - {principal: alice, email: me@example.com}\n", `hitl.approvers[0].principal "alice": in single-user mode`},
		{"no tenant", mt + "hitl:\n  approvers:\n    - {principal: alice, email: a@example.com}\n", "hitl.approvers[0].tenant is required"},
		{"no identity", mt + "hitl:\n  approvers:\n    - {tenant: acme, principal: alice}\n", "hitl.approvers[0]: give slack_user_id, email or both"},
		{"bad slack id", mt + "hitl:\n  approvers:\n    - {tenant: acme, principal: alice, slack_user_id: '<@U1>'}\n", "hitl.approvers[0].slack_user_id"},
		{"one slack user two principals", mt + "hitl:\n  approvers:\n    - {tenant: acme, principal: a, slack_user_id: U0AAAAAAA}\n    - {tenant: acme, principal: b, slack_user_id: U0AAAAAAA}\n", "hitl.approvers[1].slack_user_id U0AAAAAAA already maps"},
		{"email with a name", mt + "hitl:\n  approvers:\n    - {tenant: acme, principal: a, email: 'A <a@example.com>'}\n", "hitl.approvers[0].email"},
		{"email twice", mt + "hitl:\n  approvers:\n    - {tenant: acme, principal: a, email: a@example.com}\n    - {tenant: acme, principal: b, email: A@example.com}\n", "hitl.approvers[1].email"},
		{"principal twice", mt + "hitl:\n  approvers:\n    - {tenant: acme, principal: a, email: a@example.com}\n    - {tenant: acme, principal: a, email: b@example.com}\n", "listed twice"},
		{"short secret", "hitl:\n  slack:\n    signing_secret: short\nnotifications:\n  console_url: https://x.example\n", "shorter than 16"},
		{"two secrets", "hitl:\n  slack:\n    signing_secret: 8f742231b10e8888abcd99yyyzzz85a5\n    signing_secret_env: X\nnotifications:\n  console_url: https://x.example\n", "give one of signing_secret"},
		{"unset secret env", "hitl:\n  slack:\n    signing_secret_env: AGENTPLANE_TEST_UNSET_SLACK\nnotifications:\n  console_url: https://x.example\n", "signing_secret_env AGENTPLANE_TEST_UNSET_SLACK is not set"},
		{"team without app", "hitl:\n  slack:\n    team_id: T0AAAAAAA\n", "need a signing secret"},
		{"slack without console", "hitl:\n  slack:\n    signing_secret: 8f742231b10e8888abcd99yyyzzz85a5\n", "notifications.console_url is required"},
		{"bad response host", "hitl:\n  slack:\n    signing_secret: 8f742231b10e8888abcd99yyyzzz85a5\n    response_hosts: ['https://hooks.slack.com/x']\nnotifications:\n  console_url: https://x.example\n", "hitl.slack.response_hosts[0]"},
		{"short ttl", "hitl:\n  links:\n    ttl: 10s\n", "hitl.links.ttl"},
		{"bad revoked_before", "hitl:\n  links:\n    revoked_before: yesterday\n", "hitl.links.revoked_before"},
		{"email to a stranger", strings.Replace(good, "to: [alice, bob]", "to: [alice, carol]", 1), `notifications.emails[0].to: "carol" is not in hitl.approvers`},
		{"email without smtp", strings.Replace(good, "smtp: {host: smtp.example.com,", "smtp: {", 1), "notifications.smtp.host"},
		{"bad from", strings.Replace(good, `from: "agentplane <approvals@example.com>"`, `from: "x"`, 1), "notifications.smtp.from"},
		{"username without password", strings.Replace(good, "password: pw, ", "", 1), "without a password"},
		{"email name clash", good + "  webhooks:\n    - {name: acme-mail, tenant: acme, url: 'https://h.example/x', secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8G, events: [task.ended]}\n", "used twice (webhooks and emails share names)"},
		{"links for a stranger", good + "  webhooks:\n    - {name: w, tenant: acme, url: 'https://h.example/x', secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8G, events: [interrupt.created], approval_links_for: [carol]}\n", `approval_links_for: "carol"`},
		{"no http listener", "http_addr: \"off\"\n" + good, "http_addr is off"},
		{"emails without console", strings.Replace(good, "  console_url: https://approvals.example.com\n", "", 1), "notifications.console_url is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Default()
			if err := Parse([]byte(tt.yaml), &cfg); err != nil {
				t.Fatal(err)
			}
			err := cfg.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("want an error containing %q, got %v", tt.want, err)
			}
		})
	}
}
