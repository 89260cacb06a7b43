package server_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/hitl/links"
	"github.com/agentplane/agentplane/server/webhooks"
)

// TestStarterRefusedThroughSlackLinksAndEmail: under a rule that separates duties, the
// task's starter (here also an approver, mapped to a Slack user) decides nothing
// through a Slack button, a signed link or an email's link; another approver's click
// decides, recorded as Slack's in the decision and the audit.
func TestStarterRefusedThroughSlackLinksAndEmail(t *testing.T) {
	r := startChannels(t, func(c *config.Config) {
		for i := range c.Auth.Tokens {
			if c.Auth.Tokens[i].Name == "acme-user" {
				c.Auth.Tokens[i].Roles = []string{"user", "approver"}
			}
		}
		c.HITL.Rules = []config.ApprovalRule{{Name: "not-your-own", Tenant: "acme"}}
	})
	_, in := r.raise(t, "acme", `{"n":1}`)
	id := in.GetInterruptId()
	if rq := in.GetRequirement(); rq.GetStartedBy() != "acme-user" || !rq.GetSeparationOfDuties() {
		t.Fatalf("requirement = %v", rq)
	}
	msg := r.slackMessage(t, id)
	value, _ := button(t, msg, webhooks.SlackActionApprove)

	// Slack: the starter's click is refused, ephemerally, saying why.
	if code := r.click(t, slackUser, webhooks.SlackActionApprove, value); code != http.StatusOK {
		t.Fatalf("click: %d", code)
	}
	reply := r.slackReply(t, 1)
	if text, _ := reply["text"].(string); reply["response_type"] != "ephemeral" || !strings.Contains(text, "separates duties") {
		t.Fatalf("the starter's click: %v", reply)
	}
	r.wantPending(t, "acme", id, "the starter's Slack click")

	// A signed link and an email's link for the starter.
	for _, ch := range []string{"link", "email"} {
		p := r.sign(links.Claims{Tenant: "acme", Interrupt: id, Digest: in.GetArgsDigest(), Approver: "acme-user", Action: links.Approve, Channel: ch})
		code, page := r.post(t, p, url.Values{"confirm": {"1"}}, "Origin", r.base, "Sec-Fetch-Site", "same-origin")
		if code < 400 || strings.Contains(page, "Approved") {
			t.Fatalf("the starter's %s: %d\n%s", ch, code, page)
		}
		r.wantPending(t, "acme", id, "the starter's "+ch)
	}

	// Another approver's click decides, as Slack's.
	if code := r.click(t, slackAlice, webhooks.SlackActionApprove, value); code != http.StatusOK {
		t.Fatalf("click: %d", code)
	}
	got := r.interrupt(t, "acme", id)
	if d := got.GetDecision(); d.GetDecidedBy() != "acme-approver" || d.GetChannel() != "slack" {
		t.Fatalf("decision %v", d)
	}
	audit, err := r.mt.by["acme"]["approver"].c.Hitl.ListAuditRecords(context.Background(), &agentplanev1.ListAuditRecordsRequest{InterruptId: id})
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, rec := range audit.GetRecords() {
		rows = append(rows, rec.GetPrincipal()+" "+rec.GetChannel())
	}
	if !slices.Equal(rows, []string{"acme-approver slack"}) {
		t.Fatalf("audit = %v: the refused attempts decide nothing and are not records", rows)
	}
}
