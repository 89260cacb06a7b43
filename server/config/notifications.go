package config

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/agentplane/agentplane/gates"
)

// Notifications configures webhooks (docs/notifications.md): what is sent where, how
// often it is retried, and how much the outbox may hold.
type Notifications struct {
	// ConsoleURL is the web console's public base URL (https://agentplane.example.com);
	// notifications link to <console_url>/ui/interrupts/<id> and /ui/tasks/<id>. Empty:
	// no links.
	ConsoleURL string `yaml:"console_url"`
	// AllowPrivateDestinations lets webhooks reach private, loopback and internal hosts
	// and plain http. Off, a destination must be https to a public host, checked when
	// the config loads and again for every address it resolves to when dialled.
	// Metadata and link-local addresses are refused either way.
	AllowPrivateDestinations bool `yaml:"allow_private_destinations"`
	// MaxOutboxPerTenant bounds the notifications a tenant's outbox holds (pending and
	// dead letters). Past it new notifications are dropped, counted and logged.
	MaxOutboxPerTenant int64 `yaml:"max_outbox_per_tenant"`
	// DeliveryTimeout bounds one attempt (connect, send, response headers).
	DeliveryTimeout Duration `yaml:"delivery_timeout"`
	// InitialBackoff is the wait before the second attempt; each further wait doubles,
	// up to MaxBackoff, with jitter.
	InitialBackoff Duration `yaml:"initial_backoff"`
	// MaxBackoff caps the wait between attempts.
	MaxBackoff Duration `yaml:"max_backoff"`
	// PollInterval is how often the outbox is checked for notifications due (a commit
	// that writes one also wakes the sender on this replica).
	PollInterval Duration `yaml:"poll_interval"`
	// Concurrency is how many deliveries run at once on one replica.
	Concurrency int `yaml:"concurrency"`
	// DeadLetterRetention is how long a dead letter is kept for an operator to retry
	// before it is deleted (dead letters count against MaxOutboxPerTenant, so kept
	// forever they would end up blocking new notifications); 0 keeps them forever.
	DeadLetterRetention Duration `yaml:"dead_letter_retention"`
	// Webhooks are the endpoints.
	Webhooks []Webhook `yaml:"webhooks"`
	// SMTP is the mail relay of Emails.
	SMTP SMTP `yaml:"smtp"`
	// Emails are email endpoints: approval emails with signed links, sent through the
	// same outbox as webhooks.
	Emails []Email `yaml:"emails"`
}

// Webhook is one endpoint of one tenant.
type Webhook struct {
	// Name identifies the endpoint (unique); stored with each notification.
	Name string `yaml:"name"`
	// Tenant whose events it receives; in single-user mode it defaults to "default".
	Tenant string `yaml:"tenant"`
	// URL receives a POST per notification.
	URL string `yaml:"url"`
	// Events it receives: interrupt.created, interrupt.resolved, interrupt.expired,
	// task.ended.
	Events []string `yaml:"events"`
	// Secret signs the notifications (Standard Webhooks: whsec_ and base64 of 24 to 64
	// bytes). Give it inline, or name an environment variable (SecretEnv) or a file
	// (SecretFile, relative to the config file) holding it. Required for the standard
	// format.
	Secret     string `yaml:"secret"`
	SecretEnv  string `yaml:"secret_env"`
	SecretFile string `yaml:"secret_file"`
	// Format is standard (the default: a signed JSON event) or slack (a body an
	// incoming-webhook URL accepts as is).
	Format string `yaml:"format"`
	// MaxAttempts is how many attempts a notification gets before it becomes a dead
	// letter (default 8).
	MaxAttempts int `yaml:"max_attempts"`
	// ApprovalLinksFor are principals of hitl.approvers whose signed approve and
	// reject links the interrupt.created notifications of this endpoint carry. Whoever
	// reads the notification can use them: name only principals whose own
	// destination this endpoint is (a personal channel, their own system).
	ApprovalLinksFor []string `yaml:"approval_links_for"`
}

// Webhook event types and formats.
const (
	EventInterruptCreated  = "interrupt.created"
	EventInterruptResolved = "interrupt.resolved"
	EventInterruptExpired  = "interrupt.expired"
	EventTaskEnded         = "task.ended"

	FormatStandard = "standard"
	FormatSlack    = "slack"

	// DefaultWebhookAttempts is max_attempts when unset.
	DefaultWebhookAttempts = 8
	// MaxWebhookAttempts is the most max_attempts may be.
	MaxWebhookAttempts = 100
)

// WebhookEvents is every event type a webhook may receive.
var WebhookEvents = []string{EventInterruptCreated, EventInterruptResolved, EventInterruptExpired, EventTaskEnded}

// DefaultNotifications are the defaults of the notifications section.
func DefaultNotifications() Notifications {
	return Notifications{
		MaxOutboxPerTenant:  10000,
		DeliveryTimeout:     Duration(10 * time.Second),
		InitialBackoff:      Duration(5 * time.Second),
		MaxBackoff:          Duration(time.Hour),
		PollInterval:        Duration(time.Second),
		Concurrency:         8,
		DeadLetterRetention: Duration(7 * 24 * time.Hour),
	}
}

// Attempts is max_attempts with its default.
func (w Webhook) Attempts() int {
	if w.MaxAttempts == 0 {
		return DefaultWebhookAttempts
	}
	return w.MaxAttempts
}

// FormatOrDefault is format with its default.
func (w Webhook) FormatOrDefault() string {
	if w.Format == "" {
		return FormatStandard
	}
	return w.Format
}

// SecretKey returns the endpoint's HMAC key (the secret without whsec_, decoded), or
// nil when it has none, reading secret_env through lookup and secret_file relative
// to baseDir.
func (w Webhook) SecretKey(baseDir string, lookup func(string) (string, bool)) ([]byte, error) {
	secret, err := ReadSecret("secret", w.Secret, w.SecretEnv, w.SecretFile, baseDir, lookup)
	if err != nil {
		return nil, err
	}
	if secret == "" {
		return nil, nil
	}
	raw, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return nil, fmt.Errorf("the secret must start with whsec_ (make one with: echo whsec_$(openssl rand -base64 32))")
	}
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("the secret must be whsec_ followed by the base64 of 24 to 64 random bytes")
	}
	return key, nil
}

// TenantOrDefault is the endpoint's tenant, "default" (the single-user tenant) when
// unset.
func (w Webhook) TenantOrDefault() string {
	if w.Tenant == "" {
		return "default"
	}
	return w.Tenant
}

// validateNotifications reports every problem of the notifications section.
func (c *Config) validateNotifications(bad func(format string, args ...any)) {
	n := c.Notifications
	if n.ConsoleURL != "" {
		if u, err := url.Parse(n.ConsoleURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("notifications.console_url %q: want an absolute http(s) URL", n.ConsoleURL)
		}
	}
	if n.MaxOutboxPerTenant < 1 || n.Concurrency < 1 {
		bad("notifications.max_outbox_per_tenant and notifications.concurrency must be >= 1")
	}
	if n.DeadLetterRetention < 0 {
		bad("notifications.dead_letter_retention must not be negative (0 keeps dead letters forever)")
	}
	if n.DeliveryTimeout < Duration(100*time.Millisecond) || n.InitialBackoff < Duration(10*time.Millisecond) ||
		n.MaxBackoff < n.InitialBackoff || n.PollInterval < Duration(10*time.Millisecond) {
		bad("notifications: delivery_timeout must be at least 100ms, initial_backoff and poll_interval at least 10ms, max_backoff at least initial_backoff")
	}
	seen := map[string]bool{}
	for i, w := range n.Webhooks {
		at := fmt.Sprintf("notifications.webhooks[%d]", i)
		if w.Name == "" || len(w.Name) > 64 {
			bad("%s.name: 1 to 64 bytes required", at)
		} else if seen[w.Name] {
			bad("%s.name %q is used twice", at, w.Name)
		} else if w.Name == A2APushEndpoint {
			bad("%s.name %q is reserved for A2A push notifications", at, w.Name)
		}
		seen[w.Name] = true
		if w.Tenant == "" && c.Auth.RequirePrincipal {
			bad("%s.tenant is required when auth.require_principal is on", at)
		}
		if len(w.Tenant) > 255 {
			bad("%s.tenant is longer than 255 bytes", at)
		}
		if reason, ok := gates.CheckDestinationURL(w.URL, n.AllowPrivateDestinations); !ok {
			hint := ""
			if reason == gates.DropURLPrivateHost || reason == gates.DropURLPlainHTTP {
				hint = " (notifications.allow_private_destinations: true lets webhooks reach private hosts and plain http)"
			}
			bad("%s.url %q refused: %s%s", at, w.URL, reason, hint)
		}
		if len(w.Events) == 0 {
			bad("%s.events: name at least one of %s", at, strings.Join(WebhookEvents, ", "))
		}
		for _, e := range w.Events {
			if !slices.Contains(WebhookEvents, e) {
				bad("%s.events: unknown event %q (want %s)", at, e, strings.Join(WebhookEvents, ", "))
			}
		}
		switch w.FormatOrDefault() {
		case FormatStandard, FormatSlack:
		default:
			bad("%s.format %q: want standard or slack", at, w.Format)
		}
		if w.MaxAttempts < 0 || w.MaxAttempts > MaxWebhookAttempts {
			bad("%s.max_attempts must be 1 to %d (0: %d)", at, MaxWebhookAttempts, DefaultWebhookAttempts)
		}
		key, err := w.SecretKey(c.BaseDir(), os.LookupEnv)
		if err != nil {
			bad("%s: %v", at, err)
		} else if key == nil && w.FormatOrDefault() == FormatStandard {
			bad("%s: the standard format is signed: set secret, secret_env or secret_file", at)
		}
	}
}
