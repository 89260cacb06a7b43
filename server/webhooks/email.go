package webhooks

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/hitl"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// emailPayload is the stored payload of an email notification: the standard message
// and the principal it goes to (one record per recipient, so that each is retried,
// and dead-lettered, on its own).
type emailPayload struct {
	To      string          `json:"to"`
	Message json.RawMessage `json:"message"`
}

// mailer sends through the configured relay: STARTTLS always (a relay that does not
// offer it is refused, so neither the password nor the links cross the network in
// the clear), then AUTH PLAIN when a username is set.
type mailer struct {
	cfg      config.SMTP
	addr     string
	from     *mail.Address
	password string
	tls      *tls.Config
	timeout  time.Duration
}

func newMailer(cfg config.SMTP, baseDir string, lookup func(string) (string, bool), timeout time.Duration) (*mailer, error) {
	from, err := mail.ParseAddress(cfg.From)
	if err != nil {
		return nil, fmt.Errorf("notifications.smtp.from: %w", err)
	}
	pw, err := cfg.PasswordValue(baseDir, lookup)
	if err != nil {
		return nil, fmt.Errorf("notifications.smtp: %w", err)
	}
	tc := &tls.Config{ServerName: cfg.Host, MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		p := cfg.CAFile
		if !filepath.IsAbs(p) {
			p = filepath.Join(baseDir, p)
		}
		pem, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("notifications.smtp.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("notifications.smtp.ca_file %s: no PEM certificate in it", p)
		}
		tc.RootCAs = pool
	}
	return &mailer{cfg: cfg, addr: net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.PortOrDefault())), from: from,
		password: pw, tls: tc, timeout: timeout}, nil
}

// errNoStartTLS is a relay that would carry the message in the clear.
var errNoStartTLS = errors.New("the SMTP relay does not offer STARTTLS; refusing to send in the clear")

// send delivers one message to one address.
func (m *mailer) send(ctx context.Context, to string, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", m.addr)
	if err != nil {
		return err
	}
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	c, err := smtp.NewClient(conn, m.cfg.Host)
	if err != nil {
		_ = conn.Close()
		return err
	}
	defer c.Close()
	helo := m.cfg.HeloName
	if helo == "" {
		helo = "localhost"
	}
	if err := c.Hello(helo); err != nil {
		return err
	}
	if ok, _ := c.Extension("STARTTLS"); !ok {
		return errNoStartTLS
	}
	if err := c.StartTLS(m.tls); err != nil {
		return fmt.Errorf("STARTTLS: %w", err)
	}
	if m.cfg.Username != "" {
		if err := c.Auth(smtp.PlainAuth("", m.cfg.Username, m.password, m.cfg.Host)); err != nil {
			return fmt.Errorf("AUTH: %w", err)
		}
	}
	if err := c.Mail(m.from.Address); err != nil {
		return err
	}
	if err := c.Rcpt(to); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// sendEmail is one attempt of an email notification.
func (s *Service) sendEmail(ctx context.Context, ep *endpoint, rec *storagev1.OutboxRecord) result {
	var p emailPayload
	var m Message
	if err := json.Unmarshal(rec.GetPayload(), &p); err != nil {
		return result{permanent: true, detail: "stored payload is not an email: " + err.Error()}
	}
	if err := json.Unmarshal(p.Message, &m); err != nil {
		return result{permanent: true, detail: "stored payload is not a message: " + err.Error()}
	}
	to := ep.to[p.To]
	if to == "" {
		return result{permanent: true, detail: "recipient " + p.To + " is no longer in notifications.emails " + ep.Name + " with an email in hitl.approvers"}
	}
	if s.linkable(m) {
		m.Data.Links = []ApprovalLink{s.approvalLink(m.Data, p.To, string(hitl.ChannelEmail))}
	}
	msg, err := composeEmail(s.mail.from, to, rec.GetId(), s.now(), m)
	if err != nil {
		return result{permanent: true, detail: err.Error()}
	}
	if err := s.mail.send(ctx, to, msg); err != nil {
		s.attempts.WithLabelValues(ep.Name, "error").Inc()
		// A 5xx reply is the relay's final word on this message (no such mailbox,
		// refused sender, authentication failed): retrying cannot help, so it is a
		// dead letter at once, for an operator to retry once the cause is fixed. A 4xx
		// or no reply is retried.
		var te *textproto.Error
		return result{permanent: errors.As(err, &te) && te.Code >= 500, detail: "smtp: " + err.Error()}
	}
	s.attempts.WithLabelValues(ep.Name, "2xx").Inc()
	return result{ok: true}
}

// headerText makes a value fit for a header: control characters (CR and LF above
// all, which would start a header of the sender's choosing) and format characters
// become spaces, runs of white space one, and the result is cut to limit runes.
func headerText(s string, limit int) string {
	s = strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return ' '
		}
		return r
	}, s)), " ")
	if r := []rune(s); len(r) > limit {
		s = string(r[:limit-1]) + "…"
	}
	return s
}

// emailSubject is the subject line of m, in plain words.
func emailSubject(m Message) string {
	d := m.Data
	switch m.Type {
	case config.EventInterruptCreated:
		return fmt.Sprintf("Approval needed: %s wants to call %s", headerText(d.Agent, 60), headerText(d.Tool, 60))
	case config.EventInterruptResolved, config.EventInterruptExpired:
		verb := "resolved"
		if m.Type == config.EventInterruptExpired {
			verb = "expired"
		}
		return fmt.Sprintf("Approval %s: %s on task %s", verb, headerText(d.Tool, 60), headerText(d.TaskID, 60))
	case config.EventBudgetWarning:
		if d.Budget != nil {
			return fmt.Sprintf("Budget %s at %d%% for this %s", headerText(d.Budget.Name, 60), d.Budget.WarnPercent, headerText(d.Budget.Period, 10))
		}
	}
	return fmt.Sprintf("Task %s %s", headerText(d.TaskID, 60), headerText(d.State, 20))
}

// emailView is what the email templates show; every value is escaped by
// html/template in the HTML part and made single-line in the text part.
type emailView struct {
	Title      string
	Message    Message
	Deadline   string
	Link       *ApprovalLink
	ConsoleURL string
}

var emailHTML = template.Must(template.New("email").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>{{.Title}}</title></head>
<body style="font-family: sans-serif">
<p><strong>{{.Title}}</strong></p>
<table cellpadding="4">
<tr><td>Tenant</td><td><code>{{.Message.Data.Tenant}}</code></td></tr>
<tr><td>Task</td><td><code>{{.Message.Data.TaskID}}</code></td></tr>
{{with .Message.Data.Agent}}<tr><td>Agent</td><td><code>{{.}}</code></td></tr>{{end}}
{{with .Message.Data.Tool}}<tr><td>Tool</td><td><code>{{.}}</code></td></tr>{{end}}
{{with .Message.Data.Description}}<tr><td>Description</td><td>{{.}}</td></tr>{{end}}
{{with .Deadline}}<tr><td>Decide by</td><td>{{.}}</td></tr>{{end}}
{{with .Message.Data.Decision}}<tr><td>Decision</td><td>{{.Type}} by <code>{{.DecidedBy}}</code>{{with .Reason}}: {{.}}{{end}}</td></tr>{{end}}
</table>
{{with .Link}}<p><a href="{{.ApproveURL}}">Approve</a> &nbsp; <a href="{{.RejectURL}}">Reject</a></p>
<p>Each link opens a page that asks you to confirm; it acts as <code>{{.Approver}}</code>, once, until {{.Expires.Format "2006-01-02 15:04 MST"}}, while the call is pending with these arguments.</p>{{end}}
{{with .ConsoleURL}}<p><a href="{{.}}">Open in the console</a> (to see the arguments or edit them)</p>{{end}}
</body></html>
`))

// composeEmail is the whole message, headers and a multipart/alternative body with
// a plain-text part first and an HTML part, both quoted-printable UTF-8.
func composeEmail(from *mail.Address, to, id string, now time.Time, m Message) ([]byte, error) {
	v := emailView{Title: emailSubject(m), Message: m, ConsoleURL: m.Data.URL}
	if m.Data.Deadline != nil {
		v.Deadline = m.Data.Deadline.UTC().Format(time.RFC3339)
	}
	if len(m.Data.Links) > 0 {
		v.Link = &m.Data.Links[0]
	}
	var text bytes.Buffer
	line := func(label, value string) {
		if value != "" {
			fmt.Fprintf(&text, "%s: %s\r\n", label, headerText(value, 1000))
		}
	}
	text.WriteString(v.Title + "\r\n\r\n")
	line("Tenant", m.Data.Tenant)
	line("Task", m.Data.TaskID)
	line("Agent", m.Data.Agent)
	line("Tool", m.Data.Tool)
	line("Description", m.Data.Description)
	line("Decide by", v.Deadline)
	if d := m.Data.Decision; d != nil {
		line("Decision", d.Type+" by "+d.DecidedBy)
		line("Reason", d.Reason)
	}
	if l := v.Link; l != nil {
		fmt.Fprintf(&text, "\r\nApprove: %s\r\nReject: %s\r\n\r\nEach link opens a page that asks you to confirm; it acts as %s, once, until %s, while the call is pending with these arguments.\r\n",
			l.ApproveURL, l.RejectURL, headerText(l.Approver, 255), l.Expires.Format("2006-01-02 15:04 MST"))
	}
	if v.ConsoleURL != "" {
		fmt.Fprintf(&text, "\r\nOpen in the console: %s\r\n", v.ConsoleURL)
	}
	var html bytes.Buffer
	if err := emailHTML.Execute(&html, v); err != nil {
		return nil, err
	}

	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, part := range []struct {
		typ  string
		data []byte
	}{{"text/plain; charset=utf-8", text.Bytes()}, {"text/html; charset=utf-8", html.Bytes()}} {
		pw, err := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {part.typ}, "Content-Transfer-Encoding": {"quoted-printable"}})
		if err != nil {
			return nil, err
		}
		qp := quotedprintable.NewWriter(pw)
		if _, err := qp.Write(part.data); err != nil {
			return nil, err
		}
		if err := qp.Close(); err != nil {
			return nil, err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}

	var msg bytes.Buffer
	header := func(k, v string) { fmt.Fprintf(&msg, "%s: %s\r\n", k, v) }
	header("From", from.String())
	header("To", (&mail.Address{Address: to}).String())
	header("Subject", mime.QEncoding.Encode("utf-8", v.Title))
	header("Date", now.UTC().Format(time.RFC1123Z))
	header("Message-ID", "<"+id+"@agentplane>")
	header("MIME-Version", "1.0")
	header("Auto-Submitted", "auto-generated")
	header("Content-Type", `multipart/alternative; boundary="`+mw.Boundary()+`"`)
	msg.WriteString("\r\n")
	msg.Write(body.Bytes())
	return msg.Bytes(), nil
}
