package channels

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/hitl"
)

// Slack's published signing example (docs: "Verifying requests from Slack").
const (
	exampleSecret    = "8f742231b10e8888abcd99yyyzzz85a5"
	exampleTimestamp = "1531420618"
	exampleBody      = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	exampleSignature = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
)

// TestVerifySlackPublishedExample: Slack's example request verifies at its own time,
// and fails with any byte of the body, the timestamp or the signature changed, or
// more than five minutes away.
func TestVerifySlackPublishedExample(t *testing.T) {
	at := time.Unix(1531420618, 0)
	if got := SlackSignature(exampleSecret, exampleTimestamp, []byte(exampleBody)); got != exampleSignature {
		t.Fatalf("SlackSignature = %s, want Slack's %s", got, exampleSignature)
	}
	if err := VerifySlack(exampleSecret, exampleTimestamp, exampleSignature, []byte(exampleBody), at); err != nil {
		t.Fatalf("the example does not verify: %v", err)
	}
	for _, c := range []struct {
		name           string
		secret, ts, sg string
		body           string
		now            time.Time
		want           error
	}{
		{"body", exampleSecret, exampleTimestamp, exampleSignature, strings.Replace(exampleBody, "roadrunner", "coyote", 1), at, errSlackSignature},
		{"signature", exampleSecret, exampleTimestamp, exampleSignature[:len(exampleSignature)-1] + "4", exampleBody, at, errSlackSignature},
		{"version", exampleSecret, exampleTimestamp, "v1=" + exampleSignature[3:], exampleBody, at, errSlackSignature},
		{"secret", exampleSecret + "x", exampleTimestamp, exampleSignature, exampleBody, at, errSlackSignature},
		{"timestamp", exampleSecret, "1531420619", exampleSignature, exampleBody, at, errSlackSignature},
		{"empty", exampleSecret, exampleTimestamp, "", exampleBody, at, errSlackSignature},
		{"stale", exampleSecret, exampleTimestamp, exampleSignature, exampleBody, at.Add(5*time.Minute + time.Second), errSlackStale},
		{"future", exampleSecret, exampleTimestamp, exampleSignature, exampleBody, at.Add(-5*time.Minute - time.Second), errSlackStale},
		{"not a number", exampleSecret, "15314x0618", exampleSignature, exampleBody, at, errSlackStale},
	} {
		if err := VerifySlack(c.secret, c.ts, c.sg, []byte(c.body), c.now); err != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if err := VerifySlack(exampleSecret, exampleTimestamp, exampleSignature, []byte(exampleBody), at.Add(5*time.Minute)); err != nil {
		t.Errorf("five minutes later: %v, want accepted", err)
	}
}

// TestReplayCache: a signature is taken once within the window, again after it has
// aged out, and the cache is bounded.
func TestReplayCache(t *testing.T) {
	c := newReplayCache(time.Minute)
	now := time.Unix(1000, 0)
	if first, _ := c.first("a", now); !first {
		t.Fatal("a new signature is a replay")
	}
	if first, _ := c.first("a", now.Add(time.Minute)); first {
		t.Fatal("a replay within the window was taken")
	}
	if first, _ := c.first("a", now.Add(3*time.Minute)); !first {
		t.Fatal("a signature seen long ago (its timestamp would be refused as stale anyway) is refused")
	}
	for i := range maxReplays {
		c.first(strconv.Itoa(i), now.Add(3*time.Minute))
	}
	if first, full := c.first("new", now.Add(3*time.Minute)); first || !full {
		t.Fatalf("a full cache took a new signature (first %v, full %v)", first, full)
	}
	if first, _ := c.first("new", now.Add(10*time.Minute)); !first {
		t.Fatal("the cache did not make room once its entries aged out")
	}
}

// FuzzSlackInteraction: a signed request with any body never panics, and reaches the
// decision path only as a well-formed click on one of our buttons, with a tenant, an
// interrupt and a digest, by a mapped approver.
func FuzzSlackInteraction(f *testing.F) {
	f.Add(`payload={"type":"block_actions","user":{"id":"U0ALICE01"},"actions":[{"action_id":"agentplane_approve","value":"{\"t\":\"acme\",\"i\":\"in-1\",\"d\":\"d1\"}"}]}`)
	f.Add(`payload={"type":"block_actions","actions":[]}`)
	f.Add(`payload=%7B%22type%22:1%7D`)
	f.Add("payload=")
	f.Fuzz(func(t *testing.T, body string) {
		rec := &recorder{}
		h, err := New(Options{Resolver: rec, MayApprove: func(string, string) bool { return true },
			Approvers:   []config.Approver{{Tenant: "acme", Principal: "alice", SlackUserID: "U0ALICE01"}},
			SlackSecret: exampleSecret, SlackHosts: []string{"hooks.slack.com"}, Client: http.DefaultClient})
		if err != nil {
			t.Fatal(err)
		}
		h.Close() // no response_url posts
		mux := http.NewServeMux()
		h.Register(mux)
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req := httptest.NewRequest(http.MethodPost, SlackPath, strings.NewReader(body))
		req.Header.Set("X-Slack-Request-Timestamp", ts)
		req.Header.Set("X-Slack-Signature", SlackSignature(exampleSecret, ts, []byte(body)))
		mux.ServeHTTP(httptest.NewRecorder(), req)
		for _, c := range rec.calls {
			if c.tenant != "acme" || c.principal != "alice" || c.channel != hitl.ChannelSlack || c.req.GetInterruptId() == "" || c.req.GetArgsDigest() == "" {
				t.Fatalf("reached the decision path: %+v", c)
			}
		}
	})
}
