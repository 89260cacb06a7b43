package config

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocumentedChannelExamplesValidate: the approval-channel examples of
// docs/notifications.md and docs/hitl.md are configurations the control plane boots
// on (in multi-tenant mode, with the secrets they name in the environment).
func TestDocumentedChannelExamplesValidate(t *testing.T) {
	t.Setenv("AGENTPLANE_SMTP_PASSWORD", "pw")
	t.Setenv("AGENTPLANE_SLACK_SIGNING_SECRET", "8f742231b10e8888abcd99yyyzzz85a5")
	block := regexp.MustCompile("(?s)```yaml\n(.*?)```")
	for _, c := range []struct{ file, marker string }{
		{"../../docs/notifications.md", "smtp:"},
		{"../../docs/notifications.md", "approval_links_for: [alice]"},
		{"../../docs/hitl.md", "signing_secret_env:"},
		{"../../docs/hitl.md", "slack_user_id: U0123ABCD     #"},
		{"../../docs/api.md", "weights: {acme: 3}"},
	} {
		doc, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, m := range block.FindAllStringSubmatch(string(doc), -1) {
			if !strings.Contains(m[1], c.marker) {
				continue
			}
			found = true
			text := m[1]
			// Examples leave out the principals' tenant table; the approvers they name
			// are completed so that every example stands alone.
			if !strings.Contains(text, "approvers:") {
				text = strings.Replace(text, "hitl:\n", "hitl:\n  approvers:\n    - {tenant: acme, principal: alice, email: alice@acme.example}\n", 1)
			}
			if !strings.Contains(text, "hitl:") {
				text += "hitl:\n  approvers:\n    - {tenant: acme, principal: alice, email: alice@acme.example}\n"
			}
			if !strings.Contains(text, "console_url") {
				text += "notifications:\n  console_url: https://agentplane.example.com\n"
			}
			cfg := Default()
			cfg.Auth.RequirePrincipal, cfg.Auth.AllowInsecure = true, true
			if err := Parse([]byte(text), &cfg); err != nil {
				t.Fatalf("%s (%s): %v\n%s", c.file, c.marker, err, text)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("%s (%s): %v\n%s", c.file, c.marker, err, text)
			}
		}
		if !found {
			t.Fatalf("%s: no yaml example with %q", c.file, c.marker)
		}
	}
}
