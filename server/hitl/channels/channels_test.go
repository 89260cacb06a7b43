package channels

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/hitl/links"
	"github.com/agentplane/agentplane/server/webhooks"
)

// recorder is a Resolver that records what reaches the decision path.
type recorder struct {
	mu    sync.Mutex
	calls []call
}

type call struct {
	channel           hitl.Channel
	tenant, principal string
	req               *agentplanev1.ResolveInterruptRequest
}

func (r *recorder) ResolveInterrupt(ctx context.Context, tenant, principal string, req *agentplanev1.ResolveInterruptRequest) (*agentplanev1.Interrupt, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call{hitl.ChannelFrom(ctx), tenant, principal, req})
	return &agentplanev1.Interrupt{InterruptId: req.GetInterruptId(), TaskId: "t1", State: agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED,
		Decision: &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_APPROVE, DecidedBy: principal}}, nil
}

func (r *recorder) GetInterrupt(_ context.Context, tenant, id string) (*agentplanev1.Interrupt, error) {
	return &agentplanev1.Interrupt{InterruptId: id, TaskId: "t1", Tenant: tenant, ArgsDigest: "d1", State: agentplanev1.InterruptState_INTERRUPT_STATE_PENDING,
		Request: &agentplanev1.Interrupt_Approval{Approval: &agentplanev1.ApprovalRequest{ToolName: "pay", ArgumentsJson: `{"n":1}`}}}, nil
}

// TestChannelReachesTheDecisionPath: each channel decides through the Resolver with
// its channel on the context, the principal the identity table maps to, the digest
// of the message and a request id that is the same for a repeat of the same action.
func TestChannelReachesTheDecisionPath(t *testing.T) {
	rec := &recorder{}
	key := []byte("0123456789abcdef0123456789abcdef")
	h, err := New(Options{Resolver: rec, MayApprove: func(string, string) bool { return true },
		Approvers:   []config.Approver{{Tenant: "acme", Principal: "alice", SlackUserID: "U0ALICE01", Email: "a@example.com"}},
		SlackSecret: "8f742231b10e8888abcd99yyyzzz85a5", SlackHosts: []string{"hooks.slack.com"}, Client: http.DefaultClient,
		LinkKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	mux := http.NewServeMux()
	h.Register(mux)

	click := func(trigger string) int {
		payload := `{"type":"block_actions","team":{"id":"T1"},"user":{"id":"U0ALICE01"},"trigger_id":"` + trigger + `",` +
			`"response_url":"https://hooks.slack.com/actions/x","actions":[{"action_id":"` + webhooks.SlackActionApprove + `","value":"{\"t\":\"acme\",\"i\":\"in-1\",\"d\":\"d1\"}"}]}`
		body := url.Values{"payload": {payload}}.Encode()
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req := httptest.NewRequest(http.MethodPost, SlackPath, strings.NewReader(body))
		req.Header.Set("X-Slack-Request-Timestamp", ts)
		req.Header.Set("X-Slack-Signature", SlackSignature("8f742231b10e8888abcd99yyyzzz85a5", ts, []byte(body)))
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		return w.Code
	}
	h.Close() // no response_url post leaves the test
	if click("1") != http.StatusOK || click("2") != http.StatusOK {
		t.Fatal("clicks refused")
	}
	post := func(channel string) int {
		tok := links.Issue(key, links.Claims{Tenant: "acme", Interrupt: "in-1", Digest: "d1", Approver: "alice", Action: links.Approve,
			Channel: channel, Expires: time.Now().Add(time.Hour).Unix()}, time.Now())
		req := httptest.NewRequest(http.MethodPost, LinksPath+tok, strings.NewReader("confirm=1"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		return w.Code
	}
	if post("link") != http.StatusOK || post("email") != http.StatusOK {
		t.Fatal("links refused")
	}
	if len(rec.calls) != 4 {
		t.Fatalf("%d calls", len(rec.calls))
	}
	for i, want := range []hitl.Channel{hitl.ChannelSlack, hitl.ChannelSlack, hitl.ChannelLink, hitl.ChannelEmail} {
		c := rec.calls[i]
		if c.channel != want || c.tenant != "acme" || c.principal != "alice" || c.req.GetArgsDigest() != "d1" || c.req.GetInterruptId() != "in-1" || c.req.GetRequestId() == "" {
			t.Errorf("call %d: %+v, want channel %s as alice on d1", i, c, want)
		}
	}
	if rec.calls[0].req.GetRequestId() != rec.calls[1].req.GetRequestId() {
		t.Error("a double click has two request ids")
	}
	if rec.calls[2].req.GetRequestId() == rec.calls[3].req.GetRequestId() {
		t.Error("two links share a request id")
	}
}

// TestResponseURLOnlySlacks: a response_url off hitl.slack.response_hosts, or one the
// destination rules refuse, is never contacted; one on the list is.
func TestResponseURLOnlySlacks(t *testing.T) {
	hits := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits <- r.Host }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	for _, c := range []struct {
		name         string
		raw          string
		allowPrivate bool
		want         string
	}{
		{"another host", "http://localhost:" + u.Port() + "/x", true, "refused"},
		{"a private address without allow_private_destinations", srv.URL + "/x", false, "refused"},
		{"userinfo", "http://user@127.0.0.1:" + u.Port() + "/x", true, "refused"},
		{"listed", srv.URL + "/x", true, "ok"},
	} {
		h, err := New(Options{Resolver: &recorder{}, MayApprove: func(string, string) bool { return true }, SlackSecret: "s",
			SlackHosts: []string{"127.0.0.1"}, Client: srv.Client(), AllowPrivate: c.allowPrivate})
		if err != nil {
			t.Fatal(err)
		}
		h.respond(c.raw, []byte(`{}`))
		h.Close()
		var m dto.Metric
		if err := h.responses.WithLabelValues(c.want).Write(&m); err != nil {
			t.Fatal(err)
		}
		if got := m.GetCounter().GetValue(); got != 1 {
			t.Errorf("%s: %s = %v, want 1", c.name, c.want, got)
		}
		if c.want == "refused" && len(hits) != 0 {
			t.Fatalf("%s: contacted %s", c.name, <-hits)
		}
	}
	if len(hits) != 1 {
		t.Fatalf("%d posts, want 1", len(hits))
	}
}
