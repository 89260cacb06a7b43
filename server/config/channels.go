package config

import (
	"fmt"
	"net"
	"net/mail"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Approver is one person who decides from Slack or email: the principal their
// decisions are made as (a configured token or client certificate name with the
// approver role in Tenant, "owner" in single-user mode) and the identities that map
// to it. A Slack user id or an email address maps to one principal per tenant.
type Approver struct {
	// Tenant the principal acts in; "default" in single-user mode when unset.
	Tenant string `yaml:"tenant"`
	// Principal is the subject decisions are recorded as (decided_by).
	Principal string `yaml:"principal"`
	// SlackUserID is the person's Slack member id (U0123ABCD, or W... on Enterprise
	// Grid), from their profile's "Copy member ID".
	SlackUserID string `yaml:"slack_user_id"`
	// Email is where their approval emails go, and whose links act as Principal.
	Email string `yaml:"email"`
}

// TenantOrDefault is the approver's tenant, "default" when unset.
func (a Approver) TenantOrDefault() string {
	if a.Tenant == "" {
		return "default"
	}
	return a.Tenant
}

// SlackApp is the Slack app whose interactive buttons decide. Configured (a signing
// secret given), messages of slack-format webhooks about a pending approval carry
// Approve and Reject buttons, and POST /hitl/slack/interactions takes their clicks.
type SlackApp struct {
	// SigningSecret is the app's signing secret (Basic Information, App Credentials):
	// inline, or from an environment variable or a file (relative to the config file).
	SigningSecret     string `yaml:"signing_secret"`
	SigningSecretEnv  string `yaml:"signing_secret_env"`
	SigningSecretFile string `yaml:"signing_secret_file"`
	// TeamID, when set, refuses clicks from any other Slack workspace.
	TeamID string `yaml:"team_id"`
	// ResponseHosts are the hosts a click's response_url may name (the message is
	// updated there): hooks.slack.com by default; GovSlack uses hooks.slack-gov.com.
	// The notifications destination rules apply too.
	ResponseHosts []string `yaml:"response_hosts"`
}

// Enabled reports whether a Slack app is configured.
func (s SlackApp) Enabled() bool {
	return s.SigningSecret != "" || s.SigningSecretEnv != "" || s.SigningSecretFile != ""
}

// Hosts is response_hosts with its default.
func (s SlackApp) Hosts() []string {
	if len(s.ResponseHosts) == 0 {
		return []string{"hooks.slack.com"}
	}
	return s.ResponseHosts
}

// Secret returns the signing secret, reading signing_secret_env through lookup and
// signing_secret_file relative to baseDir.
func (s SlackApp) Secret(baseDir string, lookup func(string) (string, bool)) (string, error) {
	return ReadSecret("signing_secret", s.SigningSecret, s.SigningSecretEnv, s.SigningSecretFile, baseDir, lookup)
}

// Links configures signed approve and reject links (docs/hitl.md). Links point at
// notifications.console_url, which they need.
type Links struct {
	// KeyFile holds the 32-byte key (64 hex digits) that signs links. Empty means
	// hitl-links.key in data_dir, generated on first use; replicas share the file (or
	// its content). Replacing the key revokes every link sent.
	KeyFile string `yaml:"key_file"`
	// TTL is how long a link works after it was sent (72h by default); never past the
	// interrupt's deadline.
	TTL Duration `yaml:"ttl"`
	// RevokedBefore revokes every link issued before this time (RFC 3339).
	RevokedBefore string `yaml:"revoked_before"`
}

// RevokedBeforeTime is revoked_before parsed; zero when unset.
func (l Links) RevokedBeforeTime() time.Time {
	t, _ := time.Parse(time.RFC3339, l.RevokedBefore)
	return t
}

// SMTP is the mail relay approval emails go through. The connection always upgrades
// with STARTTLS (a relay that does not offer it is refused), and the password is sent
// only over it.
type SMTP struct {
	// Host and Port of the relay (Port defaults to 587, the submission port).
	Host string `yaml:"host"`
	Port int    `yaml:"port"`
	// Username, with the password inline or from an env var or a file, for AUTH PLAIN.
	// No username: no AUTH.
	Username     string `yaml:"username"`
	Password     string `yaml:"password"`
	PasswordEnv  string `yaml:"password_env"`
	PasswordFile string `yaml:"password_file"`
	// From is the sender, an address with an optional name: agentplane <approvals@example.com>.
	From string `yaml:"from"`
	// CAFile, when set, is the only CA the relay's certificate is checked against
	// (a private relay); otherwise the system roots are.
	CAFile string `yaml:"ca_file"`
	// HeloName is the name said in EHLO (localhost by default).
	HeloName string `yaml:"helo_name"`
}

// PortOrDefault is port with its default.
func (s SMTP) PortOrDefault() int {
	if s.Port == 0 {
		return 587
	}
	return s.Port
}

// PasswordValue returns the password, reading password_env through lookup and
// password_file relative to baseDir.
func (s SMTP) PasswordValue(baseDir string, lookup func(string) (string, bool)) (string, error) {
	return ReadSecret("password", s.Password, s.PasswordEnv, s.PasswordFile, baseDir, lookup)
}

// Email is one email notification endpoint: the tenant's events it sends, to which
// approvers. Each recipient gets a message of their own, with links that act as them.
type Email struct {
	// Name identifies the endpoint, unique among webhooks and emails.
	Name string `yaml:"name"`
	// Tenant whose events it sends; "default" in single-user mode when unset.
	Tenant string `yaml:"tenant"`
	// Events it sends (as for webhooks).
	Events []string `yaml:"events"`
	// To are principals of hitl.approvers in Tenant; each is mailed at its email.
	To []string `yaml:"to"`
	// MaxAttempts before a message becomes a dead letter (default 8).
	MaxAttempts int `yaml:"max_attempts"`
}

// TenantOrDefault is the endpoint's tenant, "default" when unset.
func (e Email) TenantOrDefault() string {
	if e.Tenant == "" {
		return "default"
	}
	return e.Tenant
}

// ReadSecret returns a secret given inline, by environment variable (read through
// lookup) or by file (relative to baseDir, surrounding white space trimmed); at most
// one may be set, and "" when none is. name names the inline field in errors.
func ReadSecret(name, inline, env, file, baseDir string, lookup func(string) (string, bool)) (string, error) {
	set := 0
	for _, s := range []string{inline, env, file} {
		if s != "" {
			set++
		}
	}
	if set > 1 {
		return "", fmt.Errorf("give one of %s, %s_env and %s_file", name, name, name)
	}
	switch {
	case env != "":
		v, ok := lookup(env)
		if !ok || v == "" {
			return "", fmt.Errorf("%s_env %s is not set", name, env)
		}
		return v, nil
	case file != "":
		p := file
		if !filepath.IsAbs(p) {
			p = filepath.Join(baseDir, p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return "", fmt.Errorf("%s_file: %w", name, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return inline, nil
}

// slackID is a Slack member or team id.
var slackID = regexp.MustCompile(`^[A-Z0-9]{2,32}$`)

// validateChannels reports every problem of the approval channels: the identity
// table, the Slack app, links and email.
func (c *Config) validateChannels(bad func(format string, args ...any)) {
	h := c.HITL
	bySlack, byEmail, seen := map[string]int{}, map[string]int{}, map[string]int{}
	for i, a := range h.Approvers {
		at := fmt.Sprintf("hitl.approvers[%d]", i)
		if a.Tenant == "" && c.Auth.RequirePrincipal {
			bad("%s.tenant is required when auth.require_principal is on", at)
		}
		if strings.TrimSpace(a.Principal) == "" || len(a.Principal) > 255 {
			bad("%s.principal: 1 to 255 bytes required (a token's name or a certificate's common_name)", at)
		}
		if !c.Auth.RequirePrincipal && a.Principal != "owner" {
			bad("%s.principal %q: in single-user mode every decision is the owner's: use owner", at, a.Principal)
		}
		if a.SlackUserID == "" && a.Email == "" {
			bad("%s: give slack_user_id, email or both", at)
		}
		key := a.TenantOrDefault() + "\x00" + a.Principal
		if j, dup := seen[key]; dup {
			bad("%s: principal %q of tenant %q is listed twice (also hitl.approvers[%d]): give it one entry", at, a.Principal, a.TenantOrDefault(), j)
		}
		seen[key] = i
		if a.SlackUserID != "" {
			if !slackID.MatchString(a.SlackUserID) {
				bad("%s.slack_user_id %q: want a Slack member id such as U0123ABCD", at, a.SlackUserID)
			}
			k := a.TenantOrDefault() + "\x00" + a.SlackUserID
			if j, dup := bySlack[k]; dup {
				bad("%s.slack_user_id %s already maps to hitl.approvers[%d] in tenant %q: one Slack user is one principal", at, a.SlackUserID, j, a.TenantOrDefault())
			}
			bySlack[k] = i
		}
		if a.Email != "" {
			if addr, err := mail.ParseAddress(a.Email); err != nil || addr.Name != "" || addr.Address != a.Email {
				bad("%s.email %q: want a bare address such as alice@example.com", at, a.Email)
			}
			k := a.TenantOrDefault() + "\x00" + strings.ToLower(a.Email)
			if j, dup := byEmail[k]; dup {
				bad("%s.email %s already maps to hitl.approvers[%d] in tenant %q", at, a.Email, j, a.TenantOrDefault())
			}
			byEmail[k] = i
		}
	}
	if h.Slack.Enabled() {
		if s, err := h.Slack.Secret(c.BaseDir(), os.LookupEnv); err != nil {
			bad("hitl.slack: %v", err)
		} else if len(s) < 16 {
			bad("hitl.slack: the signing secret is shorter than 16 characters; copy it from the app's Basic Information page")
		}
		if h.Slack.TeamID != "" && !slackID.MatchString(h.Slack.TeamID) {
			bad("hitl.slack.team_id %q: want a Slack team id such as T0123ABCD", h.Slack.TeamID)
		}
	} else if h.Slack.TeamID != "" || len(h.Slack.ResponseHosts) > 0 {
		bad("hitl.slack: team_id and response_hosts need a signing secret (signing_secret, signing_secret_env or signing_secret_file)")
	}
	for i, host := range h.Slack.ResponseHosts {
		if host == "" || strings.ContainsAny(host, "/:@ ") && net.ParseIP(strings.Trim(host, "[]")) == nil {
			bad("hitl.slack.response_hosts[%d] %q: want a host name", i, host)
		}
	}
	if h.Links.TTL < Duration(time.Minute) {
		bad("hitl.links.ttl must be at least 1m")
	}
	if h.Links.RevokedBefore != "" {
		if _, err := time.Parse(time.RFC3339, h.Links.RevokedBefore); err != nil {
			bad("hitl.links.revoked_before %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", h.Links.RevokedBefore)
		}
	}

	n := c.Notifications
	needsLinks := len(n.Emails) > 0
	for _, w := range n.Webhooks {
		needsLinks = needsLinks || len(w.ApprovalLinksFor) > 0
	}
	if (needsLinks || h.Slack.Enabled()) && n.ConsoleURL == "" {
		bad("notifications.console_url is required for approval links and Slack buttons: it is the public address they point at")
	}
	if (needsLinks || h.Slack.Enabled()) && c.HTTPAddr == "off" {
		bad("http_addr is off, but approval links and Slack buttons are served on the HTTP listener (/hitl/)")
	}
	approver := func(tenant, principal string) (Approver, bool) {
		for _, a := range h.Approvers {
			if a.TenantOrDefault() == tenant && a.Principal == principal {
				return a, true
			}
		}
		return Approver{}, false
	}
	for i, w := range n.Webhooks {
		for _, p := range w.ApprovalLinksFor {
			if _, ok := approver(w.TenantOrDefault(), p); !ok {
				bad("notifications.webhooks[%d].approval_links_for: %q is not in hitl.approvers for tenant %q", i, p, w.TenantOrDefault())
			}
		}
	}
	names := map[string]bool{}
	for _, w := range n.Webhooks {
		names[w.Name] = true
	}
	if len(n.Emails) > 0 {
		s := n.SMTP
		if s.Host == "" || strings.ContainsAny(s.Host, "/@ ") {
			bad("notifications.smtp.host: the mail relay's host name is required for notifications.emails")
		}
		if s.Port < 0 || s.Port > 65535 {
			bad("notifications.smtp.port %d: want 1 to 65535 (0: 587)", s.Port)
		}
		if _, err := mail.ParseAddress(s.From); err != nil || strings.ContainsAny(s.From, "\r\n") {
			bad("notifications.smtp.from %q: want an address such as \"agentplane <approvals@example.com>\"", s.From)
		}
		pw, err := s.PasswordValue(c.BaseDir(), os.LookupEnv)
		switch {
		case err != nil:
			bad("notifications.smtp: %v", err)
		case pw != "" && s.Username == "":
			bad("notifications.smtp: a password without a username")
		case pw == "" && s.Username != "":
			bad("notifications.smtp: username %q without a password (password, password_env or password_file)", s.Username)
		}
		if strings.ContainsAny(s.HeloName, "\r\n ") {
			bad("notifications.smtp.helo_name %q: want a host name", s.HeloName)
		}
	}
	for i, e := range n.Emails {
		at := fmt.Sprintf("notifications.emails[%d]", i)
		if e.Name == "" || len(e.Name) > 64 {
			bad("%s.name: 1 to 64 bytes required", at)
		} else if names[e.Name] {
			bad("%s.name %q is used twice (webhooks and emails share names)", at, e.Name)
		}
		names[e.Name] = true
		if e.Tenant == "" && c.Auth.RequirePrincipal {
			bad("%s.tenant is required when auth.require_principal is on", at)
		}
		if len(e.Events) == 0 {
			bad("%s.events: name at least one of %s", at, strings.Join(WebhookEvents, ", "))
		}
		for _, ev := range e.Events {
			if !slices.Contains(WebhookEvents, ev) {
				bad("%s.events: unknown event %q (want %s)", at, ev, strings.Join(WebhookEvents, ", "))
			}
		}
		if len(e.To) == 0 {
			bad("%s.to: name at least one principal of hitl.approvers", at)
		}
		for _, p := range e.To {
			if a, ok := approver(e.TenantOrDefault(), p); !ok || a.Email == "" {
				bad("%s.to: %q is not in hitl.approvers with an email for tenant %q", at, p, e.TenantOrDefault())
			}
		}
		if e.MaxAttempts < 0 || e.MaxAttempts > MaxWebhookAttempts {
			bad("%s.max_attempts must be 1 to %d (0: %d)", at, MaxWebhookAttempts, DefaultWebhookAttempts)
		}
	}
}
