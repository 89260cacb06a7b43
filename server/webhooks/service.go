package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentplane/agentplane/gates"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/hitl/links"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/version"
)

// Options configure a Service.
type Options struct {
	Store  store.Store
	Config config.Notifications
	// BaseDir resolves secret_file; LookupEnv reads secret_env (os.LookupEnv if nil).
	BaseDir   string
	LookupEnv func(string) (string, bool)
	Logger    *slog.Logger
	// Registerer takes the metrics (none if nil).
	Registerer prometheus.Registerer
	// Links signs the approval links of notifications (nil: none are sent; then no
	// endpoint may name approval_links_for and there are no emails).
	Links *links.Issuer
	// SlackButtons puts Approve and Reject buttons on slack-format messages about a
	// pending approval (a Slack app is configured: hitl.slack).
	SlackButtons bool
	// Approvers is hitl.approvers: where emails go.
	Approvers []config.Approver
	// A2APush builds the body of an A2A push notification of a task's new state to
	// one of its push configs (server/a2a.PushBody), read in the transaction of the
	// change; nil sends no A2A push notifications.
	A2APush func(r store.Reader, rec *storagev1.TaskRecord, pc *storagev1.A2APushConfig) ([]byte, error)
}

// endpoint is one configured webhook, resolved.
type endpoint struct {
	config.Webhook
	tenant string
	key    []byte
	events map[string]bool
	// email is set for an email endpoint (notifications.emails), whose recipients
	// are to (principal -> address).
	email *config.Email
	to    map[string]string
}

// Service enqueues notifications (WrapWriter) and sends them (Start).
type Service struct {
	st       store.Store
	cfg      config.Notifications
	log      *slog.Logger
	byName   map[string]*endpoint
	byTenant map[string][]*endpoint
	client   *http.Client
	now      func() time.Time
	links    *links.Issuer
	buttons  bool
	mail     *mailer
	a2aPush  func(r store.Reader, rec *storagev1.TaskRecord, pc *storagev1.A2APushConfig) ([]byte, error)

	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	started atomic.Bool

	deliveries *prometheus.CounterVec
	attempts   *prometheus.CounterVec
	drops      *prometheus.CounterVec

	interruptView func(*agentplanev1.Interrupt) *agentplanev1.Interrupt
}

// New resolves the endpoints (their secrets) and builds the HTTP client; it starts
// nothing.
func New(o Options) (*Service, error) {
	lookup := o.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Service{
		st: o.Store, cfg: o.Config, log: log.With("component", "webhooks"),
		byName: map[string]*endpoint{}, byTenant: map[string][]*endpoint{}, now: time.Now, a2aPush: o.A2APush,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	var err error
	for _, w := range o.Config.Webhooks {
		key, err := w.SecretKey(o.BaseDir, lookup)
		if err != nil {
			return nil, fmt.Errorf("notifications.webhooks %s: %w", w.Name, err)
		}
		ep := &endpoint{Webhook: w, tenant: w.TenantOrDefault(), key: key, events: map[string]bool{}}
		for _, e := range w.Events {
			ep.events[e] = true
		}
		s.byName[w.Name] = ep
		s.byTenant[ep.tenant] = append(s.byTenant[ep.tenant], ep)
	}
	s.links, s.buttons = o.Links, o.SlackButtons
	if len(o.Config.Emails) > 0 {
		if s.mail, err = newMailer(o.Config.SMTP, o.BaseDir, lookup, o.Config.DeliveryTimeout.D()); err != nil {
			return nil, err
		}
	}
	for i := range o.Config.Emails {
		e := &o.Config.Emails[i]
		ep := &endpoint{Webhook: config.Webhook{Name: e.Name, MaxAttempts: e.MaxAttempts}, tenant: e.TenantOrDefault(), events: map[string]bool{},
			email: e, to: map[string]string{}}
		for _, ev := range e.Events {
			ep.events[ev] = true
		}
		for _, p := range e.To {
			for _, a := range o.Approvers {
				if a.TenantOrDefault() == ep.tenant && a.Principal == p && a.Email != "" {
					ep.to[p] = a.Email
				}
			}
			if ep.to[p] == "" {
				return nil, fmt.Errorf("notifications.emails %s: %q has no email in hitl.approvers", e.Name, p)
			}
		}
		s.byName[e.Name] = ep
		s.byTenant[ep.tenant] = append(s.byTenant[ep.tenant], ep)
	}
	if s.links == nil {
		for _, ep := range s.byName {
			if ep.email != nil || len(ep.ApprovalLinksFor) > 0 {
				return nil, fmt.Errorf("notifications %s: approval links need the link key (hitl.links) and notifications.console_url", ep.Name)
			}
		}
	}
	s.client = newClient(o.Config)
	s.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "agentplane", Name: "webhook_deliveries_total",
		Help: "Webhook notifications settled, by outcome: delivered, dead_letter (given up after the endpoint's max_attempts, or answered 410 Gone), or expired (a dead letter deleted after notifications.dead_letter_retention).",
	}, []string{"outcome"})
	s.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "agentplane", Name: "webhook_attempts_total",
		Help: "Webhook delivery attempts, by endpoint and result: 2xx, 3xx, 4xx, 5xx, or error (no response: refused address, timeout, connection).",
	}, []string{"endpoint", "result"})
	s.drops = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "agentplane", Name: "webhook_dropped_total",
		Help: "Webhook notifications not enqueued because the tenant's outbox held notifications.max_outbox_per_tenant, by tenant.",
	}, []string{"tenant"})
	if o.Registerer != nil {
		o.Registerer.MustRegister(s.deliveries, s.attempts, s.drops)
	}
	return s, nil
}

// render is the body of a webhook attempt: the stored message with the approval
// links of the endpoint's approvers (made now, so that a retry sends links that work
// as long as a first attempt's), in the endpoint's format.
func (s *Service) render(ep *endpoint, rec *storagev1.OutboxRecord) ([]byte, error) {
	body := rec.GetPayload()
	if len(ep.ApprovalLinksFor) == 0 && ep.FormatOrDefault() != config.FormatSlack {
		return body, nil
	}
	var m Message
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("webhooks: stored payload is not a message: %w", err)
	}
	if s.linkable(m) {
		for _, p := range ep.ApprovalLinksFor {
			m.Data.Links = append(m.Data.Links, s.approvalLink(m.Data, p, string(hitl.ChannelLink)))
		}
	}
	if ep.FormatOrDefault() == config.FormatSlack {
		return slackBody(m, s.buttons), nil
	}
	return json.Marshal(m)
}

// linkable reports whether m can carry approval links: a pending approval with the
// digest they bind (a notification stored by an older version has none).
func (s *Service) linkable(m Message) bool {
	return s.links != nil && m.Type == config.EventInterruptCreated && m.Data.InterruptID != "" && m.Data.ArgsDigest != ""
}

// approvalLink is principal's pair of links for the interrupt of d, sent through
// channel.
func (s *Service) approvalLink(d Data, principal, channel string) ApprovalLink {
	approve, reject, exp, id := s.links.Pair(d.Tenant, d.InterruptID, d.ArgsDigest, principal, channel, d.Deadline, s.now())
	return ApprovalLink{ID: id, Approver: principal, ApproveURL: approve, RejectURL: reject, Expires: exp}
}

// NewClient is the HTTP client of deliveries, for other senders to the same rules
// (the Slack channel's response_url).
func NewClient(cfg config.Notifications) *http.Client { return newClient(cfg) }

// newClient is the HTTP client of deliveries: no proxy (the address checked is the
// one dialled), no redirects (a 3xx is a failed attempt), and every address a name
// resolves to checked against the destination rules when dialled, so that a name
// cannot be rebound to a private or metadata address after the config was checked.
func newClient(cfg config.Notifications) *http.Client {
	allow := cfg.AllowPrivateDestinations
	dialer := &net.Dialer{
		Timeout: cfg.DeliveryTimeout.D(),
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("webhook destination %s: %w", address, err)
			}
			if reason, ok := gates.CheckDestinationAddr(ap.Addr(), allow); !ok {
				return fmt.Errorf("webhook destination address %s refused: %s", ap.Addr(), reason)
			}
			return nil
		},
	}
	return &http.Client{
		Timeout: cfg.DeliveryTimeout.D(),
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           dialer.DialContext,
			TLSHandshakeTimeout:   cfg.DeliveryTimeout.D(),
			ResponseHeaderTimeout: cfg.DeliveryTimeout.D(),
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       90 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func (s *Service) wants(tenant, ev string) bool {
	for _, ep := range s.byTenant[tenant] {
		if ep.events[ev] {
			return true
		}
	}
	return false
}

func (s *Service) wantsInterrupts(tenant string) bool {
	return s.wants(tenant, config.EventInterruptCreated) || s.wants(tenant, config.EventInterruptResolved) ||
		s.wants(tenant, config.EventInterruptExpired) || s.wants(tenant, config.EventInterruptVote) ||
		s.wants(tenant, config.EventInterruptReminder) || s.wants(tenant, config.EventInterruptEscalated)
}

// SetInterruptView sets how an interrupt is shown in a notification: the approvals
// service's view, which adds who may still decide under an approval rule. Call it
// before the first write; without it an interrupt is shown as stored.
func (s *Service) SetInterruptView(view func(*agentplanev1.Interrupt) *agentplanev1.Interrupt) {
	s.interruptView = view
}

// view is rec with its interrupt as notifications show it.
func (s *Service) view(rec *storagev1.InterruptRecord) *storagev1.InterruptRecord {
	if s.interruptView == nil || rec.GetInterrupt().GetRequirement() == nil {
		return rec
	}
	return &storagev1.InterruptRecord{Interrupt: s.interruptView(rec.GetInterrupt()), CreateTime: rec.GetCreateTime()}
}

func (s *Service) wakeSender() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Service) dropped(tenant, endpoint, ev string, depth int64) {
	s.drops.WithLabelValues(tenant).Inc()
	s.log.Error("webhook outbox full: notification dropped", "tenant", tenant, "endpoint", endpoint, "event", ev,
		"depth", depth, "limit", s.cfg.MaxOutboxPerTenant,
		"hint", "the endpoint is failing or slow: check it, then list and retry or purge dead letters (ctl admin webhooks dead-letters list), or raise notifications.max_outbox_per_tenant")
}

// Start runs the sender until Stop.
func (s *Service) Start() {
	if s.started.CompareAndSwap(false, true) {
		go s.run()
	}
}

// Stop ends the sender and waits for it; attempts in flight are abandoned (their
// claims expire and they are attempted again).
func (s *Service) Stop() {
	s.once.Do(func() { close(s.stop) })
	if s.started.Load() {
		<-s.done
	}
}

// claimTTL is how long a claimed attempt may run before another sender takes the
// notification again: the attempt's timeout and a margin for recording it.
func (s *Service) claimTTL() time.Duration { return 2*s.cfg.DeliveryTimeout.D() + time.Second }

func (s *Service) run() {
	defer close(s.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	t := time.NewTicker(s.cfg.PollInterval.D())
	defer t.Stop()
	var lastExpiry time.Time
	for {
		if r := s.cfg.DeadLetterRetention.D(); r > 0 && s.now().Sub(lastExpiry) >= min(expireEvery, max(r/4, s.cfg.PollInterval.D())) {
			lastExpiry = s.now()
			if n, err := s.expireDeadLetters(ctx, s.now().Add(-r)); err != nil && ctx.Err() == nil {
				s.log.Warn("webhook outbox: deleting expired dead letters failed; trying again later", "err", err)
			} else if n > 0 {
				s.log.Warn("webhook dead letters deleted after notifications.dead_letter_retention", "count", n, "retention", r)
			}
		}
		for ctx.Err() == nil {
			n, err := s.pass(ctx)
			if err != nil && ctx.Err() == nil {
				s.log.Warn("webhook outbox: claiming notifications failed; trying again at the next poll", "err", err)
			}
			if n == 0 || err != nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wake:
		}
	}
}

// expireEvery is how often the sender looks for dead letters past their retention
// (more often when the retention is short: a quarter of it, but not more often than
// the outbox is polled).
const expireEvery = time.Minute

// expireDeadLetters deletes the dead letters that died before cutoff, a batch per
// transaction, and returns how many. On several replicas each may delete some; a
// deletion found done is nothing.
func (s *Service) expireDeadLetters(ctx context.Context, cutoff time.Time) (int, error) {
	const batch = 256
	// expired is checked when choosing and again in the deleting transaction: an
	// operator may have retried the notification meanwhile (and it may have died
	// again since, later than cutoff).
	expired := func(rec *storagev1.OutboxRecord) bool {
		dt := rec.GetDeadTime()
		return rec.GetState() == storagev1.OutboxState_OUTBOX_STATE_DEAD && dt != nil && dt.AsTime().Before(cutoff)
	}
	deleted := 0
	after := ""
	for {
		var ids []string
		done := true
		err := s.st.View(ctx, func(r store.Reader) error {
			ids, done = ids[:0], true
			return r.ScanOutbox(storagev1.OutboxState_OUTBOX_STATE_DEAD, after, func(rec *storagev1.OutboxRecord) (bool, error) {
				after = rec.GetId()
				if expired(rec) {
					ids = append(ids, rec.GetId())
				}
				if len(ids) == batch {
					done = false
					return false, nil
				}
				return true, nil
			})
		})
		if err != nil {
			return deleted, err
		}
		if len(ids) > 0 {
			n := 0
			err := s.st.Update(ctx, func(w store.Writer) error {
				n = 0
				for _, id := range ids {
					rec, err := w.GetOutbox(id)
					if store.IsNotFound(err) || (err == nil && !expired(rec)) {
						continue
					}
					if err != nil {
						return err
					}
					if err := w.DeleteOutbox(id); err != nil {
						return err
					}
					n++
				}
				return nil
			})
			if err != nil {
				return deleted, err
			}
			deleted += n
			s.deliveries.WithLabelValues("expired").Add(float64(n))
		}
		if done {
			return deleted, nil
		}
	}
}

// pass claims one batch of due notifications, attempts them at once and records the
// outcomes; it returns how many it claimed.
func (s *Service) pass(ctx context.Context) (int, error) {
	now := s.now()
	var batch []*storagev1.OutboxRecord
	err := s.st.Update(ctx, func(w store.Writer) error {
		batch = batch[:0]
		recs, err := w.ClaimOutbox(now, s.cfg.Concurrency)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			rec.Attempts++
			rec.Claim = newID(now)
			rec.LastAttemptTime = timestampOf(now)
			rec.NextAttemptTime = timestampOf(now.Add(s.claimTTL()))
			if err := w.PutOutbox(rec); err != nil {
				return err
			}
			batch = append(batch, rec)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	for _, rec := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := s.attempt(ctx, rec)
			if ctx.Err() != nil {
				return // stopping: the claim expires and another pass attempts it again
			}
			if err := s.record(ctx, rec, res); err != nil {
				s.log.Warn("webhook outcome not recorded; the notification will be attempted again", "id", rec.GetId(), "err", err)
			}
		}()
	}
	wg.Wait()
	return len(batch), nil
}

// result is what one attempt got.
type result struct {
	ok bool
	// permanent failures are not retried (the endpoint is no longer configured, or
	// the receiver answered 410 Gone).
	permanent bool
	detail    string
}

func (s *Service) attempt(ctx context.Context, rec *storagev1.OutboxRecord) result {
	if rec.GetEndpoint() == config.A2APushEndpoint {
		return s.attemptA2A(ctx, rec)
	}
	ep := s.byName[rec.GetEndpoint()]
	if ep == nil || ep.tenant != rec.GetTenant() {
		return result{permanent: true, detail: "endpoint " + rec.GetEndpoint() + " is no longer configured for tenant " + rec.GetTenant()}
	}
	if ep.email != nil {
		return s.sendEmail(ctx, ep, rec)
	}
	body, err := s.render(ep, rec)
	if err != nil {
		return result{permanent: true, detail: err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytesReader(body))
	if err != nil {
		return result{permanent: true, detail: err.Error()}
	}
	ts := s.now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentplane-webhooks/"+version.String())
	req.Header.Set(HeaderID, rec.GetId())
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	if ep.key != nil {
		req.Header.Set(HeaderSignature, Sign(ep.key, rec.GetId(), ts, body))
	}
	return s.post(req, ep.Name)
}

// post sends one attempt and classifies the answer.
func (s *Service) post(req *http.Request, endpoint string) result {
	resp, err := s.client.Do(req)
	if err != nil {
		s.attempts.WithLabelValues(endpoint, "error").Inc()
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) {
			err = ue.Unwrap() // drop the method and URL: the URL may hold a token
		}
		return result{detail: err.Error()}
	}
	drain(resp)
	class := strconv.Itoa(resp.StatusCode/100) + "xx"
	s.attempts.WithLabelValues(endpoint, class).Inc()
	switch {
	case resp.StatusCode/100 == 2:
		return result{ok: true}
	case resp.StatusCode == http.StatusGone:
		// The receiver says the endpoint is gone for good (the Standard Webhooks
		// convention): retrying would not help, so the notification is a dead letter
		// at once, for an operator to look at and retry once it is back.
		return result{permanent: true, detail: "HTTP " + resp.Status + " (the receiver says the endpoint is gone; not retried)"}
	}
	return result{detail: "HTTP " + resp.Status}
}

// backoff is the wait after the attempts-th failed attempt: initial_backoff doubled
// per attempt, capped at max_backoff, then jittered into [d/2, d].
func (s *Service) backoff(attempts int32) time.Duration {
	d := s.cfg.InitialBackoff.D()
	for i := int32(1); i < attempts && d < s.cfg.MaxBackoff.D(); i++ {
		d *= 2
	}
	d = min(d, s.cfg.MaxBackoff.D())
	return d/2 + rand.N(d/2+1)
}

// record settles one attempt: delete on success, schedule the next attempt, or make a
// dead letter. It does nothing if the claim was lost (it expired and another sender
// took the notification, or an operator changed it).
func (s *Service) record(ctx context.Context, claimed *storagev1.OutboxRecord, res result) error {
	now := s.now()
	var outcome string
	var next time.Duration
	err := s.st.Update(ctx, func(w store.Writer) error {
		outcome = ""
		rec, err := w.GetOutbox(claimed.GetId())
		if store.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if rec.GetClaim() != claimed.GetClaim() {
			return nil
		}
		if res.ok {
			outcome = "delivered"
			return w.DeleteOutbox(rec.GetId())
		}
		rec.Claim, rec.LastError = "", res.detail
		max := int32(config.DefaultWebhookAttempts)
		if ep := s.byName[rec.GetEndpoint()]; ep != nil {
			max = int32(ep.Attempts())
		}
		if res.permanent || rec.GetAttempts() >= max {
			outcome = "dead_letter"
			rec.State, rec.DeadTime = storagev1.OutboxState_OUTBOX_STATE_DEAD, timestampOf(now)
		} else {
			outcome = "retry"
			next = s.backoff(rec.GetAttempts())
			rec.NextAttemptTime = timestampOf(now.Add(next))
		}
		return w.PutOutbox(rec)
	})
	if err != nil {
		return err
	}
	attrs := []any{"id", claimed.GetId(), "tenant", claimed.GetTenant(), "endpoint", claimed.GetEndpoint(),
		"event", claimed.GetEventType(), "attempt", claimed.GetAttempts()}
	switch outcome {
	case "delivered":
		s.deliveries.WithLabelValues(outcome).Inc()
		s.log.Debug("webhook delivered", attrs...)
	case "retry":
		s.log.Warn("webhook attempt failed; retrying", append(attrs, "err", res.detail, "next_attempt_in", next.Round(time.Millisecond))...)
	case "dead_letter":
		s.deliveries.WithLabelValues(outcome).Inc()
		s.log.Error("webhook given up: dead letter", append(attrs, "err", res.detail,
			"hint", "fix the endpoint, then: ctl admin webhooks dead-letters retry "+claimed.GetId())...)
	}
	return nil
}
