package channels

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/agentplane/agentplane/gates"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/webhooks"
)

// slackWindow is how far a request's timestamp may be from now (Slack's docs: five
// minutes), and so how long a signature is remembered against replays.
const slackWindow = 5 * time.Minute

// maxSlackBody bounds an interaction request: the payload carries the message the
// button was on, well under this.
const maxSlackBody = 256 << 10

// Slack's request headers.
const (
	headerSlackTimestamp = "X-Slack-Request-Timestamp"
	headerSlackSignature = "X-Slack-Signature"
)

// SlackSignature is the X-Slack-Signature of body sent at timestamp (Unix seconds,
// as in X-Slack-Request-Timestamp): v0= and the hex HMAC-SHA256, under the signing
// secret, of "v0:{timestamp}:{body}".
func SlackSignature(secret, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + timestamp + ":"))
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

// errSlack* are why a request is not taken as Slack's.
var (
	errSlackStale     = errors.New("the request's timestamp is more than five minutes from now")
	errSlackSignature = errors.New("the request's signature does not verify")
)

// VerifySlack checks a request's signature headers against its body at now: the
// timestamp within five minutes, the signature compared in constant time.
func VerifySlack(secret, timestamp, signature string, body []byte, now time.Time) error {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return errSlackStale
	}
	if d := now.Sub(time.Unix(ts, 0)); d > slackWindow || d < -slackWindow {
		return errSlackStale
	}
	if !hmac.Equal([]byte(SlackSignature(secret, timestamp, body)), []byte(signature)) {
		return errSlackSignature
	}
	return nil
}

// replayCache remembers the signatures taken within the window: a request seen
// again is a replay (each Slack request has its own timestamp and so its own
// signature). It is per replica; across replicas a replay still makes no second
// decision, because the request id of a decision is derived from the action.
type replayCache struct {
	mu     sync.Mutex
	window time.Duration
	seen   map[string]time.Time
}

// maxReplays bounds the cache; a request past it is refused until entries age out.
const maxReplays = 1 << 16

func newReplayCache(window time.Duration) *replayCache {
	return &replayCache{window: window, seen: map[string]time.Time{}}
}

// first records sig at now and reports whether it is new; full reports a cache that
// cannot take it.
func (c *replayCache) first(sig string, now time.Time) (first, full bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.seen[sig]; ok && now.Sub(t) <= 2*c.window {
		return false, false
	}
	if len(c.seen) >= maxReplays {
		for k, t := range c.seen {
			if now.Sub(t) > 2*c.window {
				delete(c.seen, k)
			}
		}
		if len(c.seen) >= maxReplays {
			return false, true
		}
	}
	c.seen[sig] = now
	return true, false
}

// slackPayload is the part of a block_actions interaction that is read.
type slackPayload struct {
	Type string `json:"type"`
	Team struct {
		ID string `json:"id"`
	} `json:"team"`
	User struct {
		ID string `json:"id"`
	} `json:"user"`
	ResponseURL string `json:"response_url"`
	Actions     []struct {
		ActionID string `json:"action_id"`
		Value    string `json:"value"`
	} `json:"actions"`
}

// slack takes a click on an Approve or Reject button. It answers 200 to Slack once
// the decision is made (or refused) and updates the message, or sends the clicking
// user an ephemeral refusal, through response_url after it.
func (h *Handler) slack(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSlackBody))
	if err != nil {
		h.count("slack", "bad_request")
		http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		return
	}
	now := h.now()
	sig := r.Header.Get(headerSlackSignature)
	if err := VerifySlack(h.o.SlackSecret, r.Header.Get(headerSlackTimestamp), sig, body, now); err != nil {
		outcome := "refused_bad_signature"
		if errors.Is(err, errSlackStale) {
			outcome = "refused_stale"
		}
		h.count("slack", outcome)
		h.log.Warn("slack interaction refused", "reason", err.Error(), "remote", r.RemoteAddr,
			"hint", "check hitl.slack.signing_secret against the app's Basic Information page, and the clock")
		http.Error(w, "not a verified Slack request: "+err.Error(), http.StatusUnauthorized)
		return
	}
	if first, full := h.replays.first(sig, now); !first {
		if full {
			h.count("slack", "error")
			http.Error(w, "too many requests in five minutes", http.StatusServiceUnavailable)
			return
		}
		h.count("slack", "refused_replay")
		h.log.Warn("slack interaction refused: a replay of a request already taken", "remote", r.RemoteAddr)
		http.Error(w, "this request was already received", http.StatusConflict)
		return
	}
	form, err := url.ParseQuery(string(body))
	var p slackPayload
	if err == nil {
		err = json.Unmarshal([]byte(form.Get("payload")), &p)
	}
	if err != nil {
		h.count("slack", "bad_request")
		http.Error(w, "want a form with a JSON payload", http.StatusBadRequest)
		return
	}
	if p.Type != "block_actions" || len(p.Actions) != 1 ||
		(p.Actions[0].ActionID != webhooks.SlackActionApprove && p.Actions[0].ActionID != webhooks.SlackActionReject) {
		// Open in console, or an interaction of another kind: nothing to do.
		w.WriteHeader(http.StatusOK)
		return
	}
	if h.o.SlackTeam != "" && p.Team.ID != h.o.SlackTeam {
		h.count("slack", "refused_team")
		h.log.Warn("slack interaction refused: another workspace", "team", p.Team.ID, "want", h.o.SlackTeam)
		http.Error(w, "this workspace is not served", http.StatusForbidden)
		return
	}
	act := p.Actions[0]
	var target webhooks.SlackAction
	if err := json.Unmarshal([]byte(act.Value), &target); err != nil || target.Tenant == "" || target.Interrupt == "" || target.Digest == "" {
		h.count("slack", "bad_request")
		http.Error(w, "the button's value is not ours", http.StatusBadRequest)
		return
	}
	// Slack gives up on an answer after three seconds and shows the user an error; a
	// decision under way is finished all the same (it is one transaction, and the
	// user's retry is the same request).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), decideTimeout)
	defer cancel()
	outcome, reply := h.slackDecide(ctx, p, act.ActionID, target)
	h.count("slack", outcome)
	w.WriteHeader(http.StatusOK)
	h.respond(p.ResponseURL, reply)
}

// decideTimeout bounds a decision made for a click.
const decideTimeout = 30 * time.Second

// slackDecide applies the click and returns the outcome and the response_url body.
func (h *Handler) slackDecide(ctx context.Context, p slackPayload, action string, t webhooks.SlackAction) (string, []byte) {
	attrs := []any{"tenant", t.Tenant, "interrupt", t.Interrupt, "slack_user", p.User.ID, "action", action}
	a, ok := h.bySlack[t.Tenant+"\x00"+p.User.ID]
	if !ok {
		h.log.Warn("slack click refused: the Slack user maps to no approver of the tenant", append(attrs,
			"hint", "add them to hitl.approvers with their slack_user_id")...)
		return "refused_unmapped", webhooks.SlackEphemeral("You are not an approver here (your Slack account is not mapped to one). Nothing was decided.")
	}
	attrs = append(attrs, "principal", a.Principal)
	if !h.o.MayApprove(t.Tenant, a.Principal) {
		h.log.Warn("slack click refused: the principal has no approver role in the tenant", attrs...)
		return "refused_no_right", webhooks.SlackEphemeral("You may not approve in this tenant. Nothing was decided.")
	}
	req := &agentplanev1.ResolveInterruptRequest{InterruptId: t.Interrupt, ArgsDigest: t.Digest, RequestId: slackRequestID(p, action, t)}
	verb := "approved"
	if action == webhooks.SlackActionApprove {
		req.Decision = &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}}
	} else {
		verb = "rejected"
		req.Decision = &agentplanev1.ResolveInterruptRequest_Reject{Reject: &agentplanev1.RejectDecision{Reason: "Rejected in Slack by " + a.Principal}}
	}
	in, err := h.o.Resolver.ResolveInterrupt(hitl.WithChannel(ctx, hitl.ChannelSlack), t.Tenant, a.Principal, req)
	if err != nil {
		outcome, text := refusal(err)
		h.log.Info("slack click refused by the decision path", append(attrs, "err", err)...)
		return outcome, webhooks.SlackEphemeral(text)
	}
	if in.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED {
		h.log.Info("slack decision recorded; the interrupt is still pending", attrs...)
		return "recorded", webhooks.SlackEphemeral("Your decision (" + verb + ") is recorded; the call still waits for other approvers.")
	}
	if dt := in.GetDecision().GetType(); dt == agentplanev1.DecisionType_DECISION_TYPE_REJECT {
		verb = "rejected"
	} else if dt == agentplanev1.DecisionType_DECISION_TYPE_APPROVE || dt == agentplanev1.DecisionType_DECISION_TYPE_EDIT {
		verb = "approved"
	}
	by := in.GetDecision().GetDecidedBy()
	h.log.Info("slack decision", append(attrs, "decision", verb, "decided_by", by)...)
	return "decided", webhooks.SlackOutcome(t.Tenant, in.GetApproval().GetToolName(), in.GetTaskId(), verb, by)
}

// slackRequestID is the decision's request id: the same for every delivery of one
// user's click on one button of one message, so that a double click or a retried
// delivery is one decision.
func slackRequestID(p slackPayload, action string, t webhooks.SlackAction) string {
	h := sha256.Sum256([]byte(strings.Join([]string{p.Team.ID, p.User.ID, t.Tenant, t.Interrupt, t.Digest, action}, "\x00")))
	return "slack-" + hex.EncodeToString(h[:16])
}

// refusal words a refusal of the decision path for the person, with its outcome.
func refusal(err error) (outcome, text string) {
	switch {
	case apierr.HasReason(err, apierr.ReasonAlreadyResolved), apierr.HasReason(err, apierr.ReasonTaskTerminal),
		apierr.HasReason(err, apierr.ReasonRequestIDReused):
		return "refused_state", "This call was already decided (or its task ended). Nothing more was decided."
	case apierr.HasReason(err, apierr.ReasonArgsMismatch):
		return "refused_state", "The call's arguments changed since this message was sent. Nothing was decided; open it in the console."
	case store.IsNotFound(err):
		return "refused_state", "This call is not pending here. Nothing was decided."
	}
	var e *apierr.Error
	if errors.As(err, &e) && (e.Code == codes.PermissionDenied || e.Code == codes.FailedPrecondition) {
		// The decision path's own refusals (the rules: separation of duties, a
		// group) say what is wrong in words meant for the caller.
		return "refused_rules", e.Message + ". Nothing was decided."
	}
	return "error", "The decision could not be recorded; try again or use the console."
}

// respond posts body to a click's response_url, after checking it is Slack's: https
// (unless private destinations are allowed), on hitl.slack.response_hosts, and within
// the notifications destination rules (the client checks every address it dials).
func (h *Handler) respond(raw string, body []byte) {
	u, err := url.Parse(raw)
	if err != nil || !slices.Contains(h.o.SlackHosts, strings.ToLower(u.Hostname())) {
		h.responses.WithLabelValues("refused").Inc()
		h.log.Warn("slack response_url refused: not on hitl.slack.response_hosts", "host", safeHost(u), "allowed", h.o.SlackHosts)
		return
	}
	if reason, ok := gates.CheckDestinationURL(raw, h.o.AllowPrivate); !ok {
		h.responses.WithLabelValues("refused").Inc()
		h.log.Warn("slack response_url refused by the destination rules", "host", safeHost(u), "reason", reason)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.pending.Add(1)
	go func() {
		defer h.pending.Done()
		// Not the click's context: the answer to Slack is sent by now. The client's
		// timeout bounds the post.
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, raw, bytes.NewReader(body))
		if err != nil {
			h.responses.WithLabelValues("failed").Inc()
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.o.Client.Do(req)
		if err != nil {
			h.responses.WithLabelValues("failed").Inc()
			var ue interface{ Unwrap() error }
			if errors.As(err, &ue) {
				err = ue.Unwrap() // the URL carries a token
			}
			h.log.Warn("slack response_url post failed; the message keeps its buttons", "host", u.Hostname(), "err", err)
			return
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		_ = resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			h.responses.WithLabelValues("failed").Inc()
			h.log.Warn("slack response_url post answered an error", "host", u.Hostname(), "status", resp.StatusCode)
			return
		}
		h.responses.WithLabelValues("ok").Inc()
	}()
}

func safeHost(u *url.URL) string {
	if u == nil {
		return ""
	}
	return fmt.Sprintf("%.100q", u.Hostname())
}
