package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"net/mail"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/webhooks/webhookstest"
)

const hostileValue = "<!channel> *bold* <https://evil.example|click> `code` &amp; \r\nBcc: evil@example.com <script>x</script>"

// TestSlackButtonsAndLinks: with a Slack app, a pending approval's message carries
// Approve and Reject with the interrupt and digest as their value and Open in
// console as a URL button; resolved ones and deployments without an app get no
// buttons; links and names in the section stay escaped mrkdwn.
func TestSlackButtonsAndLinks(t *testing.T) {
	m := Message{Type: config.EventInterruptCreated, Data: Data{Tenant: "acme", TaskID: "t1", InterruptID: "in-1", Tool: hostileValue,
		Agent: "teller", ArgsDigest: "abc", URL: "https://c.example/ui/interrupts/in-1",
		Links: []ApprovalLink{{Approver: hostileValue, ApproveURL: "https://c.example/hitl/links/A.b|<x>", RejectURL: "https://c.example/hitl/links/R.b"}}}}
	var body struct {
		Text   string `json:"text"`
		Blocks []struct {
			Type     string                `json:"type"`
			Text     struct{ Text string } `json:"text"`
			Elements []struct {
				ActionID string `json:"action_id"`
				Value    string `json:"value"`
				URL      string `json:"url"`
			} `json:"elements"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(slackBody(m, true), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Blocks) != 2 || body.Blocks[1].Type != "actions" || len(body.Blocks[1].Elements) != 3 {
		t.Fatalf("blocks %+v", body.Blocks)
	}
	els := body.Blocks[1].Elements
	var v SlackAction
	if err := json.Unmarshal([]byte(els[0].Value), &v); err != nil || v != (SlackAction{"acme", "in-1", "abc"}) || els[0].ActionID != SlackActionApprove ||
		els[1].ActionID != SlackActionReject || els[1].Value != els[0].Value || els[2].URL != m.Data.URL {
		t.Fatalf("buttons %+v", els)
	}
	section := body.Blocks[0].Text.Text
	for _, bad := range []string{"<!channel>", "<https://evil", "<script>", "\r", "|<x>"} {
		if strings.Contains(section, bad) || strings.Contains(body.Text, bad) {
			t.Fatalf("%q reaches Slack as markup:\n%s", bad, section)
		}
	}
	if !strings.Contains(section, "<https://c.example/hitl/links/A.b%7C%3Cx%3E|Approve>") {
		t.Fatalf("the approve link is not one escaped link:\n%s", section)
	}
	for _, c := range []struct {
		m       Message
		buttons bool
	}{{m, false}, {Message{Type: config.EventInterruptResolved, Data: m.Data}, true}} {
		if strings.Contains(string(slackBody(c.m, c.buttons)), `"actions"`) {
			t.Fatalf("%s (buttons %v) has buttons", c.m.Type, c.buttons)
		}
	}
	// The replacement after a click and the refusals escape too.
	for _, b := range [][]byte{SlackOutcome("acme", hostileValue, "t1", "approved", hostileValue), SlackEphemeral(hostileValue)} {
		var out struct{ Text string }
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.Text, "<!channel>") || strings.Contains(out.Text, "<script>") {
			t.Fatalf("unescaped: %s", out.Text)
		}
	}
}

// TestComposeEmailHeaders: a hostile tool or agent name cannot add a header, and
// the subject is one line.
func TestComposeEmailHeaders(t *testing.T) {
	from, _ := mail.ParseAddress("agentplane <approvals@example.com>")
	msg, err := composeEmail(from, "alice@example.com", "msg_1", time.Unix(0, 0),
		Message{Type: config.EventInterruptCreated, Data: Data{Tenant: "acme", TaskID: "t1", Tool: hostileValue, Agent: "a\r\nBcc: x@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := mail.ReadMessage(strings.NewReader(string(msg)))
	if err != nil {
		t.Fatal(err)
	}
	if len(parsed.Header["Bcc"]) != 0 || len(parsed.Header["Subject"]) != 1 {
		t.Fatalf("headers %v", parsed.Header)
	}
	head, _, _ := strings.Cut(string(msg), "\r\n\r\n")
	if n := strings.Count(head, "\r\n"); n != 7 {
		t.Fatalf("%d header lines, want 8:\n%s", n+1, head)
	}
}

// TestMailerRefusesRelayWithoutStartTLS: a relay that does not offer STARTTLS gets
// neither the password nor the message.
func TestMailerRefusesRelayWithoutStartTLS(t *testing.T) {
	srv := webhookstest.NewSMTPWithoutTLS(t)
	port, _ := strconv.Atoi(srv.Port)
	m, err := newMailer(config.SMTP{Host: srv.Host, Port: port, Username: srv.User, Password: srv.Password, From: "a@example.com"},
		".", func(string) (string, bool) { return "", false }, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.send(context.Background(), "alice@example.com", []byte("Subject: x\r\n\r\nx\r\n")); !errors.Is(err, errNoStartTLS) {
		t.Fatalf("send = %v, want errNoStartTLS", err)
	}
	if n := len(srv.Mails()); n != 0 {
		t.Fatalf("%d messages accepted", n)
	}
}

// TestMailerStartTLSAndAuth: with STARTTLS the message goes through, authenticated;
// a wrong password or an untrusted certificate is an error, and nothing is sent.
func TestMailerStartTLSAndAuth(t *testing.T) {
	srv := webhookstest.NewSMTP(t)
	port, _ := strconv.Atoi(srv.Port)
	cfg := config.SMTP{Host: srv.Host, Port: port, Username: srv.User, PasswordEnv: "SMTP_PW", From: "a@example.com", CAFile: srv.CAFile}
	env := func(pw string) func(string) (string, bool) {
		return func(k string) (string, bool) { return pw, k == "SMTP_PW" }
	}
	send := func(cfg config.SMTP, pw string) error {
		m, err := newMailer(cfg, ".", env(pw), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return m.send(context.Background(), "alice@example.com", []byte("Subject: x\r\n\r\nx\r\n"))
	}
	if err := send(cfg, "wrong"); err == nil {
		t.Fatal("a wrong password was accepted")
	}
	noCA := cfg
	noCA.CAFile = ""
	if err := send(noCA, srv.Password); err == nil {
		t.Fatal("a certificate of an unknown CA was accepted")
	}
	if n := len(srv.Mails()); n != 0 {
		t.Fatalf("%d messages accepted before the right credentials", n)
	}
	if err := send(cfg, srv.Password); err != nil {
		t.Fatal(err)
	}
	if ms := srv.Mails(); len(ms) != 1 || !ms[0].TLS || ms[0].User != srv.User {
		t.Fatalf("mails %+v", ms)
	}
}
