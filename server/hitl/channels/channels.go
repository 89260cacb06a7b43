// Package channels lets approvers decide where they are: a Slack button
// (POST /hitl/slack/interactions) and a signed link from a notification or an email
// (GET and POST /hitl/links/{token}).
//
// Guarantees: every decision goes through the one decision path, approvals
// ResolveInterrupt, with the channel on the context (hitl.WithChannel), the
// interrupt's args digest (a decision on arguments that have changed since the
// message was sent is refused) and a request id derived from the action, so that a
// double click, a retried delivery or a link used twice is one decision. A request
// is authenticated before anything is read from it (Slack's signature, within five
// minutes, compared in constant time; the link's HMAC); the person is mapped to a
// principal through hitl.approvers and must hold the approver role in the tenant;
// anyone else gets a refusal and nothing is decided. A GET never decides.
package channels

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
)

// Resolver is the decision path (approvals.Service).
type Resolver interface {
	ResolveInterrupt(ctx context.Context, tenant, principal string, req *agentplanev1.ResolveInterruptRequest) (*agentplanev1.Interrupt, error)
	GetInterrupt(ctx context.Context, tenant, id string) (*agentplanev1.Interrupt, error)
}

// Options configure a Handler.
type Options struct {
	Resolver Resolver
	// Approvers is hitl.approvers.
	Approvers []config.Approver
	// MayApprove reports whether principal holds the approver role in tenant now.
	MayApprove func(tenant, principal string) bool

	// SlackSecret is the Slack app's signing secret; empty: no Slack endpoint.
	SlackSecret string
	// SlackTeam, when set, is the only workspace whose clicks are taken.
	SlackTeam string
	// SlackHosts are the hosts a response_url may name.
	SlackHosts []string
	// Client posts to response_url (webhooks.NewClient: the destination rules).
	Client *http.Client
	// AllowPrivate is notifications.allow_private_destinations.
	AllowPrivate bool

	// LinkKey verifies links; nil: no link pages.
	LinkKey []byte
	// RevokedBefore revokes links issued before it (zero: none).
	RevokedBefore time.Time
	// Revoked reports whether the tenant's link id was revoked (RevokeApprovalLink);
	// nil: none is.
	Revoked func(ctx context.Context, tenant, linkID string) (bool, error)
	// ConsoleURL is notifications.console_url, linked from the pages.
	ConsoleURL string
	// Secure adds Strict-Transport-Security (the listener is TLS).
	Secure bool

	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Now defaults to time.Now.
	Now func() time.Time
}

// Handler serves the channels' endpoints.
type Handler struct {
	o       Options
	log     *slog.Logger
	now     func() time.Time
	bySlack map[string]config.Approver // tenant \x00 slack user id
	byName  map[string]config.Approver // tenant \x00 principal
	replays *replayCache

	requests  *prometheus.CounterVec
	responses *prometheus.CounterVec

	// pending are the response_url posts in flight; none starts once closed.
	mu      sync.Mutex
	closed  bool
	pending sync.WaitGroup
}

// Paths of the endpoints.
const (
	SlackPath = "/hitl/slack/interactions"
	LinksPath = "/hitl/links/"
)

// New builds the handler.
func New(o Options) (*Handler, error) {
	if o.Resolver == nil || o.MayApprove == nil {
		return nil, errors.New("channels: Options.Resolver and Options.MayApprove are required")
	}
	if o.SlackSecret != "" && o.Client == nil {
		return nil, errors.New("channels: Options.Client is required with a Slack secret")
	}
	h := &Handler{o: o, log: o.Logger, now: o.Now, bySlack: map[string]config.Approver{}, byName: map[string]config.Approver{},
		replays: newReplayCache(slackWindow)}
	if h.log == nil {
		h.log = slog.Default()
	}
	h.log = h.log.With("component", "hitl-channels")
	if h.now == nil {
		h.now = time.Now
	}
	for _, a := range o.Approvers {
		t := a.TenantOrDefault()
		h.byName[t+"\x00"+a.Principal] = a
		if a.SlackUserID != "" {
			h.bySlack[t+"\x00"+a.SlackUserID] = a
		}
	}
	h.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "agentplane", Name: "hitl_channel_requests_total",
		Help: "Requests to the approval channels (channel slack, link or email), by outcome: decided (the interrupt resolved), recorded (a decision counted, the interrupt still pending), shown (a link's confirmation page), refused_* (bad_signature, stale, replay, team, unmapped, no_right, invalid, expired, revoked, state: already decided, arguments changed or task ended, rules: refused by the approval rules), bad_request, error.",
	}, []string{"channel", "outcome"})
	h.responses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "agentplane", Name: "hitl_slack_responses_total",
		Help: "Message updates and ephemeral replies posted to Slack's response_url, by result: ok, failed (Slack answered an error or was not reached), refused (the response_url is not on hitl.slack.response_hosts or breaks the destination rules).",
	}, []string{"result"})
	if o.Registerer != nil {
		o.Registerer.MustRegister(h.requests, h.responses)
	}
	return h, nil
}

// Register adds the endpoints to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	if h.o.SlackSecret != "" {
		mux.HandleFunc("POST "+SlackPath, h.slack)
	}
	if h.o.LinkKey != nil {
		mux.HandleFunc("GET "+LinksPath+"{token}", h.linkPage)
		mux.HandleFunc("POST "+LinksPath+"{token}", h.linkDecide)
	}
}

// Close waits for the response_url posts in flight (each bounded by the client's
// timeout); none is started after it.
func (h *Handler) Close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.pending.Wait()
}

// approver returns the approver principal of tenant, if still listed.
func (h *Handler) approver(tenant, principal string) (config.Approver, bool) {
	a, ok := h.byName[tenant+"\x00"+principal]
	return a, ok
}

func (h *Handler) count(channel, outcome string) { h.requests.WithLabelValues(channel, outcome).Inc() }
