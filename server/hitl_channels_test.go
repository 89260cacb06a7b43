package server_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/mail"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/console"
	"github.com/agentplane/agentplane/server/hitl/links"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
	"github.com/agentplane/agentplane/server/webhooks"
	"github.com/agentplane/agentplane/server/webhooks/webhookstest"
)

// The Slack app of the tests. The secret is the one of Slack's published signing
// example; the team and users are made up.
const (
	slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	slackTeam   = "T0AGENTPL"
	slackAlice  = "U0ALICE01" // acme-approver
	slackUser   = "U0NORIGHT" // acme-user: mapped, but no approver role
	slackBeta   = "U0BETA001" // beta-approver
	slackNobody = "U0NOBODY1" // not mapped
	hookSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8G"
	consoleBase = "https://approvals.example.com"
)

// hostile is what a caller or a model may put in a tool's description and
// arguments: HTML, Slack mrkdwn and mentions, a header break.
const hostile = "</pre><script>alert(1)</script><img src=x onerror=alert(2)> *bold* <!channel> <@U0ALICE01> \r\nBcc: evil@example.com"

// channelsRig is a multi-tenant control plane (tenants acme and beta) with every
// approval channel on: a Slack app whose incoming webhook is slackIn and whose
// response_url posts reach slackOut, a standard webhook carrying acme-approver's
// links, and approval emails to acme-approver through a real SMTP server.
type channelsRig struct {
	mt       *multiTenant
	slackIn  *webhookstest.Receiver
	slackOut *webhookstest.Receiver
	std      *webhookstest.Receiver
	smtp     *webhookstest.SMTPServer
	key      []byte
	base     string
}

func startChannels(t *testing.T, mutate func(*config.Config)) *channelsRig {
	t.Helper()
	r := &channelsRig{slackIn: webhookstest.New(t, ""), slackOut: webhookstest.New(t, ""), std: webhookstest.New(t, hookSecret),
		smtp: webhookstest.NewSMTP(t)}
	port, _ := strconv.Atoi(r.smtp.Port)
	r.mt = startMultiTenant(t, []string{"acme", "beta"}, func(c *config.Config) {
		c.HITL.Approvers = []config.Approver{
			{Tenant: "acme", Principal: "acme-approver", SlackUserID: slackAlice, Email: "alice@example.com"},
			{Tenant: "acme", Principal: "acme-user", SlackUserID: slackUser},
			{Tenant: "beta", Principal: "beta-approver", SlackUserID: slackBeta, Email: "beta@example.com"},
		}
		c.HITL.Slack = config.SlackApp{SigningSecret: slackSecret, TeamID: slackTeam, ResponseHosts: []string{"127.0.0.1"}}
		n := &c.Notifications
		n.AllowPrivateDestinations = true
		n.ConsoleURL = consoleBase
		n.PollInterval = config.Duration(10 * time.Millisecond)
		n.InitialBackoff, n.MaxBackoff = config.Duration(10*time.Millisecond), config.Duration(50*time.Millisecond)
		n.Webhooks = []config.Webhook{
			{Name: "acme-slack", Tenant: "acme", URL: r.slackIn.URL, Format: config.FormatSlack, Events: []string{config.EventInterruptCreated}},
			{Name: "beta-slack", Tenant: "beta", URL: r.slackIn.URL, Format: config.FormatSlack, Events: []string{config.EventInterruptCreated}},
			{Name: "acme-std", Tenant: "acme", URL: r.std.URL, Secret: hookSecret, Events: []string{config.EventInterruptCreated},
				ApprovalLinksFor: []string{"acme-approver"}},
		}
		n.SMTP = config.SMTP{Host: r.smtp.Host, Port: port, Username: r.smtp.User, Password: r.smtp.Password,
			From: "agentplane <approvals@example.com>", CAFile: r.smtp.CAFile}
		n.Emails = []config.Email{{Name: "acme-mail", Tenant: "acme", Events: []string{config.EventInterruptCreated, config.EventInterruptResolved}, To: []string{"acme-approver"}}}
		if mutate != nil {
			mutate(c)
		}
	})
	key, err := console.LoadKey(filepath.Join(r.mt.in.Config.DataDir, "hitl-links.key"))
	if err != nil {
		t.Fatal(err)
	}
	r.key, r.base = key, "http://"+r.mt.in.HTTPAddr
	return r
}

// raise starts a task in tenant and has its runtime ask the gate for the gated tool
// with args and a hostile description: a pending interrupt.
func (r *channelsRig) raise(t *testing.T, tenant, args string) (taskID string, in *agentplanev1.Interrupt) {
	t.Helper()
	ctx := context.Background()
	user, rt := r.mt.by[tenant][auth.RoleUser], r.mt.by[tenant][auth.RoleRuntime]
	started, err := user.c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}, Input: client.UserText("move"), InterruptPolicy: gatedPolicy(),
	})
	if err != nil {
		t.Fatal(err)
	}
	taskID = started.GetTask().GetTaskId()
	leased, err := rt.c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: rt.name, MaxTasks: 1})
	if err != nil || len(leased.GetLeases()) != 1 {
		t.Fatalf("LeaseTasks: %v %v", leased, err)
	}
	l := leased.GetLeases()[0]
	check, err := rt.c.Runtime.CheckToolCall(ctx, &agentplanev1.CheckToolCallRequest{
		Lease:  &agentplanev1.LeaseRef{TaskId: taskID, LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()},
		CallId: "call-1", ToolName: gatedTool, ToolDescription: proto.String(hostile), AgentName: "teller", ArgumentsJson: args,
	})
	if err != nil || check.GetOutcome() != agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT {
		t.Fatalf("CheckToolCall: %v %v", check, err)
	}
	return taskID, check.GetInterrupt()
}

// interrupt reads tenant's interrupt as its approver.
func (r *channelsRig) interrupt(t *testing.T, tenant, id string) *agentplanev1.Interrupt {
	t.Helper()
	got, err := r.mt.by[tenant][auth.RoleApprover].c.Hitl.GetInterrupt(context.Background(), &agentplanev1.GetInterruptRequest{InterruptId: id})
	if err != nil {
		t.Fatal(err)
	}
	return got.GetInterrupt()
}

// wantPending fails unless the interrupt is still pending: nothing was decided.
func (r *channelsRig) wantPending(t *testing.T, tenant, id, after string) {
	t.Helper()
	if in := r.interrupt(t, tenant, id); in.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_PENDING {
		t.Fatalf("after %s the interrupt is %v (decision %v); want it pending, nothing decided", after, in.GetState(), in.GetDecision())
	}
}

// resolvedEvents counts the InterruptResolved events of a task's log.
func (r *channelsRig) resolvedEvents(t *testing.T, tenant, taskID string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitLimit)
	defer cancel()
	st, err := r.mt.by[tenant][auth.RoleUser].c.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m.GetCaughtUp() != nil {
			return n
		}
		if m.GetEvent().GetInterruptResolved() != nil {
			n++
		}
	}
}

// slackMessage waits for the incoming-webhook message about interrupt id.
func (r *channelsRig) slackMessage(t *testing.T, id string) map[string]any {
	t.Helper()
	var msg map[string]any
	r.slackIn.WaitFor(t, testutil.WaitLimit, "the Slack message of "+id, func(ds []webhookstest.Delivery) bool {
		for _, d := range ds {
			if bytes.Contains(d.Body, []byte(id)) {
				if err := json.Unmarshal(d.Body, &msg); err != nil {
					t.Fatal(err)
				}
				return true
			}
		}
		return false
	})
	return msg
}

// button returns the value (or url) of the button action of a Slack message.
func button(t *testing.T, msg map[string]any, action string) (value, link string) {
	t.Helper()
	blocks, _ := msg["blocks"].([]any)
	for _, b := range blocks {
		bm, _ := b.(map[string]any)
		els, _ := bm["elements"].([]any)
		for _, e := range els {
			em, _ := e.(map[string]any)
			if em["action_id"] == action {
				v, _ := em["value"].(string)
				u, _ := em["url"].(string)
				return v, u
			}
		}
	}
	t.Fatalf("no %s button in %v", action, msg)
	return "", ""
}

// slackSeq numbers the fake Slack's interactions: each has its own trigger_id and
// action_ts, as Slack's do.
var slackSeq atomic.Int64

// slackRequest is what Slack sends for a click on a button with value, by user: a
// form with the block_actions payload, signed as Slack's docs specify (written here
// from them, not with the server's code).
func (r *channelsRig) slackRequest(user, team, action, value string, ts time.Time) (body []byte, header http.Header) {
	seq := slackSeq.Add(1)
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "team": map[string]any{"id": team, "domain": "acme"},
		"user":         map[string]any{"id": user, "username": "someone"},
		"response_url": r.slackOut.URL + "/actions/" + team + "/1234/" + user,
		"trigger_id":   fmt.Sprintf("%d.%d.abc", ts.Unix(), seq),
		"actions": []any{map[string]any{"type": "button", "action_id": action, "block_id": "agentplane_decide", "value": value,
			"action_ts": fmt.Sprintf("%d.%06d", ts.Unix(), seq)}},
	})
	body = []byte(url.Values{"payload": {string(payload)}}.Encode())
	stamp := strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(slackSecret))
	mac.Write([]byte("v0:" + stamp + ":"))
	mac.Write(body)
	header = http.Header{}
	header.Set("Content-Type", "application/x-www-form-urlencoded")
	header.Set("X-Slack-Request-Timestamp", stamp)
	header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return body, header
}

func (r *channelsRig) send(t *testing.T, body []byte, header http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.base+"/hitl/slack/interactions", bytes.NewReader(body))
	req.Header = header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// click sends a signed click now and returns the status.
func (r *channelsRig) click(t *testing.T, user, action, value string) int {
	t.Helper()
	body, h := r.slackRequest(user, slackTeam, action, value, time.Now())
	code, _ := r.send(t, body, h)
	return code
}

// slackReply waits for the n-th response_url post (1-based) and returns it.
func (r *channelsRig) slackReply(t *testing.T, n int) map[string]any {
	t.Helper()
	ds := r.slackOut.WaitFor(t, testutil.WaitLimit, fmt.Sprintf("response_url post #%d", n), func(ds []webhookstest.Delivery) bool { return len(ds) >= n })
	var m map[string]any
	if err := json.Unmarshal(ds[n-1].Body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSlackButtonsDecideOnce: the Slack message of a pending approval carries
// Approve, Reject and Open in console; Approve clicked by a mapped approver resolves
// the interrupt as their principal, and the message is replaced by the outcome and
// who decided; a double click (a second, separately signed request for the same
// button) is the same decision, not a second one.
func TestSlackButtonsDecideOnce(t *testing.T) {
	r := startChannels(t, nil)
	taskID, in := r.raise(t, "acme", `{"n":1}`)
	msg := r.slackMessage(t, in.GetInterruptId())
	value, _ := button(t, msg, webhooks.SlackActionApprove)
	if v, _ := button(t, msg, webhooks.SlackActionReject); v != value {
		t.Fatalf("reject value %q, approve %q", v, value)
	}
	if _, u := button(t, msg, webhooks.SlackActionConsole); u != consoleBase+"/ui/interrupts/"+in.GetInterruptId() {
		t.Fatalf("Open in console links to %q", u)
	}
	var action webhooks.SlackAction
	if err := json.Unmarshal([]byte(value), &action); err != nil || action.Digest != in.GetArgsDigest() || action.Tenant != "acme" {
		t.Fatalf("button value %q (%v): want acme and the args digest %s", value, err, in.GetArgsDigest())
	}

	if code := r.click(t, slackAlice, webhooks.SlackActionApprove, value); code != http.StatusOK {
		t.Fatalf("click: %d", code)
	}
	got := r.interrupt(t, "acme", in.GetInterruptId())
	if got.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED ||
		got.GetDecision().GetType() != agentplanev1.DecisionType_DECISION_TYPE_APPROVE || got.GetDecision().GetDecidedBy() != "acme-approver" {
		t.Fatalf("after the click: %v", got)
	}
	reply := r.slackReply(t, 1)
	text, _ := reply["text"].(string)
	if reply["replace_original"] != true || !strings.HasPrefix(text, "Approved by `acme-approver`") {
		t.Fatalf("message update %v: want it replaced with the outcome and who decided", reply)
	}
	if _, ok := reply["blocks"]; !ok || strings.Contains(fmt.Sprint(reply["blocks"]), "agentplane_approve") {
		t.Fatalf("the updated message still has buttons: %v", reply)
	}

	// Double click, and a click on the other button afterwards: one decision.
	if code := r.click(t, slackAlice, webhooks.SlackActionApprove, value); code != http.StatusOK {
		t.Fatalf("second click: %d", code)
	}
	r.slackReply(t, 2)
	if code := r.click(t, slackAlice, webhooks.SlackActionReject, value); code != http.StatusOK {
		t.Fatalf("reject click: %d", code)
	}
	if late := r.slackReply(t, 3); late["response_type"] != "ephemeral" || late["replace_original"] != false {
		t.Fatalf("a reject after the approval: %v; want an ephemeral refusal", late)
	}
	if n := r.resolvedEvents(t, "acme", taskID); n != 1 {
		t.Fatalf("%d InterruptResolved events; want 1", n)
	}
	if got := r.interrupt(t, "acme", in.GetInterruptId()); got.GetDecision().GetType() != agentplanev1.DecisionType_DECISION_TYPE_APPROVE {
		t.Fatalf("the decision changed: %v", got.GetDecision())
	}
}

// TestSlackAttacks: requests that must decide nothing, each on a pending interrupt.
func TestSlackAttacks(t *testing.T) {
	r := startChannels(t, nil)
	_, in := r.raise(t, "acme", `{"n":1}`)
	id := in.GetInterruptId()
	value, _ := button(t, r.slackMessage(t, id), webhooks.SlackActionApprove)
	_, beta := r.raise(t, "beta", `{"n":1}`)
	betaValue, _ := button(t, r.slackMessage(t, beta.GetInterruptId()), webhooks.SlackActionApprove)
	replies := 0
	wantEphemeral := func(t *testing.T, what string) {
		t.Helper()
		replies++
		m := r.slackReply(t, replies)
		if m["response_type"] != "ephemeral" || m["replace_original"] != false || !strings.Contains(fmt.Sprint(m["text"]), "Nothing was decided") {
			t.Fatalf("%s: reply %v; want an ephemeral refusal", what, m)
		}
	}

	t.Run("forged signature", func(t *testing.T) {
		body, h := r.slackRequest(slackAlice, slackTeam, webhooks.SlackActionApprove, value, time.Now())
		h.Set("X-Slack-Signature", "v0="+strings.Repeat("ab", 32))
		if code, _ := r.send(t, body, h); code != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", code)
		}
		// Signed, then altered: another user in the same body.
		body, h = r.slackRequest(slackNobody, slackTeam, webhooks.SlackActionApprove, value, time.Now())
		forged := bytes.Replace(body, []byte(slackNobody), []byte(slackAlice), 1)
		if code, _ := r.send(t, forged, h); code != http.StatusUnauthorized {
			t.Fatalf("altered body: status %d, want 401", code)
		}
		r.wantPending(t, "acme", id, "a forged request")
	})
	t.Run("stale timestamp", func(t *testing.T) {
		body, h := r.slackRequest(slackAlice, slackTeam, webhooks.SlackActionApprove, value, time.Now().Add(-6*time.Minute))
		if code, _ := r.send(t, body, h); code != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", code)
		}
		body, h = r.slackRequest(slackAlice, slackTeam, webhooks.SlackActionApprove, value, time.Now().Add(6*time.Minute))
		if code, _ := r.send(t, body, h); code != http.StatusUnauthorized {
			t.Fatalf("future: status %d, want 401", code)
		}
		r.wantPending(t, "acme", id, "a stale request")
	})
	t.Run("unmapped user", func(t *testing.T) {
		if code := r.click(t, slackNobody, webhooks.SlackActionApprove, value); code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
		wantEphemeral(t, "unmapped")
		r.wantPending(t, "acme", id, "an unmapped user's click")
	})
	t.Run("mapped without the approver role", func(t *testing.T) {
		if code := r.click(t, slackUser, webhooks.SlackActionApprove, value); code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
		wantEphemeral(t, "no right")
		r.wantPending(t, "acme", id, "a click of a principal without the approver role")
	})
	t.Run("another tenant", func(t *testing.T) {
		// beta's approver clicks acme's button (their identity is beta's only), and
		// acme's approver clicks beta's.
		r.click(t, slackBeta, webhooks.SlackActionApprove, value)
		wantEphemeral(t, "beta on acme")
		r.click(t, slackAlice, webhooks.SlackActionApprove, betaValue)
		wantEphemeral(t, "acme on beta")
		r.wantPending(t, "acme", id, "another tenant's click")
		r.wantPending(t, "beta", beta.GetInterruptId(), "another tenant's click")
	})
	t.Run("another workspace", func(t *testing.T) {
		body, h := r.slackRequest(slackAlice, "T0ELSEWHR", webhooks.SlackActionApprove, value, time.Now())
		if code, _ := r.send(t, body, h); code != http.StatusForbidden {
			t.Fatalf("status %d, want 403", code)
		}
		r.wantPending(t, "acme", id, "another workspace's click")
	})
	t.Run("replayed request", func(t *testing.T) {
		// A click that was refused, captured and sent again: the same bytes and headers.
		body, h := r.slackRequest(slackNobody, slackTeam, webhooks.SlackActionApprove, value, time.Now())
		if code, _ := r.send(t, body, h); code != http.StatusOK {
			t.Fatalf("first: %d", code)
		}
		wantEphemeral(t, "the original")
		if code, _ := r.send(t, body, h); code != http.StatusConflict {
			t.Fatalf("replay: status %d, want 409", code)
		}
		// A decision captured and replayed is no second decision either.
		body, h = r.slackRequest(slackAlice, slackTeam, webhooks.SlackActionReject, value, time.Now())
		if code, _ := r.send(t, body, h); code != http.StatusOK {
			t.Fatalf("reject: %d", code)
		}
		replies++
		r.slackReply(t, replies)
		if code, _ := r.send(t, body, h); code != http.StatusConflict {
			t.Fatalf("replayed decision: status %d, want 409", code)
		}
		if got := r.interrupt(t, "acme", id); got.GetDecision().GetType() != agentplanev1.DecisionType_DECISION_TYPE_REJECT {
			t.Fatalf("decision %v", got.GetDecision())
		}
		if n := len(r.slackOut.Deliveries()); n != replies {
			t.Fatalf("%d response_url posts, want %d: a replay posts nothing", n, replies)
		}
	})
	// What an operator sees.
	metrics := r.metrics(t)
	for _, want := range []string{
		`agentplane_hitl_channel_requests_total{channel="slack",outcome="refused_bad_signature"} 2`,
		`agentplane_hitl_channel_requests_total{channel="slack",outcome="refused_stale"} 2`,
		`agentplane_hitl_channel_requests_total{channel="slack",outcome="refused_replay"} 2`,
		`agentplane_hitl_channel_requests_total{channel="slack",outcome="refused_unmapped"} 4`,
		`agentplane_hitl_channel_requests_total{channel="slack",outcome="refused_no_right"} 1`,
		`agentplane_hitl_channel_requests_total{channel="slack",outcome="refused_team"} 1`,
		`agentplane_hitl_channel_requests_total{channel="slack",outcome="decided"} 1`,
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// A response_url post is counted once Slack (here, slackOut) has answered it,
	// which may be just after slackOut recorded it.
	ok := `agentplane_hitl_slack_responses_total{result="ok"} ` + strconv.Itoa(replies) + "\n"
	for deadline := time.Now().Add(testutil.WaitLimit); !strings.Contains(metrics, ok); metrics = r.metrics(t) {
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %s", ok)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// metrics reads /metrics as the admin.
func (r *channelsRig) metrics(t *testing.T) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, r.base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+r.mt.admin.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// linkOf returns the path of a link URL (the links point at the public base).
func linkPath(t *testing.T, u string) string {
	t.Helper()
	if !strings.HasPrefix(u, consoleBase+links.Path) {
		t.Fatalf("link %q is not under %s", u, consoleBase+links.Path)
	}
	return strings.TrimPrefix(u, consoleBase)
}

func (r *channelsRig) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(r.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Fatalf("GET %s: CSP %q", path, csp)
	}
	return resp.StatusCode, string(b)
}

func (r *channelsRig) post(t *testing.T, path string, form url.Values, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// webhookLinks waits for the standard webhook about id and returns its links.
func (r *channelsRig) webhookLinks(t *testing.T, id string) webhooks.ApprovalLink {
	t.Helper()
	var m webhooks.Message
	r.std.WaitFor(t, testutil.WaitLimit, "the webhook of "+id, func(ds []webhookstest.Delivery) bool {
		for _, d := range ds {
			if d.Verified != nil {
				t.Fatalf("webhook signature: %v", d.Verified)
			}
			if json.Unmarshal(d.Body, &m) == nil && m.Data.InterruptID == id {
				return true
			}
		}
		return false
	})
	if len(m.Data.Links) != 1 || m.Data.Links[0].Approver != "acme-approver" || m.Data.ArgsDigest == "" {
		t.Fatalf("webhook links %+v (digest %q): want acme-approver's", m.Data.Links, m.Data.ArgsDigest)
	}
	return m.Data.Links[0]
}

// TestApprovalLinks: a webhook carries acme-approver's links; the GET shows a
// confirmation page (the arguments and description escaped) and changes nothing,
// however often it is followed; a POST from another origin is refused by the HTTP
// guard; the page's POST decides as the link's approver; a second use decides
// nothing.
func TestApprovalLinks(t *testing.T) {
	r := startChannels(t, nil)
	taskID, in := r.raise(t, "acme", `{"n":"`+strings.ReplaceAll(hostile, "\r\n", " ")+`"}`)
	id := in.GetInterruptId()
	l := r.webhookLinks(t, id)
	approve := linkPath(t, l.ApproveURL)

	for range 3 {
		code, page := r.get(t, approve)
		if code != http.StatusOK || !strings.Contains(page, `<form method="post">`) || !strings.Contains(page, "Approve this call") {
			t.Fatalf("GET: %d\n%s", code, page)
		}
		if strings.Contains(page, "<script>") || strings.Contains(page, "<img") || !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Fatalf("the page does not escape the arguments and description:\n%s", page)
		}
	}
	r.wantPending(t, "acme", id, "following the link three times")

	if code, _ := r.post(t, approve, url.Values{"confirm": {"1"}}, "Origin", "https://evil.example.com"); code != http.StatusForbidden {
		t.Fatalf("cross-origin POST: %d, want 403", code)
	}
	if code, _ := r.post(t, approve, url.Values{"confirm": {"1"}}, "Sec-Fetch-Site", "cross-site"); code != http.StatusForbidden {
		t.Fatalf("cross-site POST: %d, want 403", code)
	}
	if code, _ := r.post(t, approve, url.Values{}); code != http.StatusBadRequest {
		t.Fatalf("POST without the page's form: %d, want 400", code)
	}
	r.wantPending(t, "acme", id, "refused POSTs")

	code, page := r.post(t, approve, url.Values{"confirm": {"1"}}, "Origin", r.base, "Sec-Fetch-Site", "same-origin")
	if code != http.StatusOK || !strings.Contains(page, "Approved") {
		t.Fatalf("POST: %d\n%s", code, page)
	}
	got := r.interrupt(t, "acme", id)
	if got.GetDecision().GetType() != agentplanev1.DecisionType_DECISION_TYPE_APPROVE || got.GetDecision().GetDecidedBy() != "acme-approver" ||
		got.GetDecision().GetRuledArgsDigest() != in.GetArgsDigest() {
		t.Fatalf("decision %v", got.GetDecision())
	}

	// Used twice; and the reject link of the same message after it.
	if code, page := r.post(t, approve, url.Values{"confirm": {"1"}}); code != http.StatusGone || !strings.Contains(page, "already decided") {
		t.Fatalf("second use: %d\n%s", code, page)
	}
	if code, _ := r.post(t, linkPath(t, l.RejectURL), url.Values{"confirm": {"1"}, "reason": {"no"}}); code != http.StatusGone {
		t.Fatalf("reject link after the decision: %d", code)
	}
	if n := r.resolvedEvents(t, "acme", taskID); n != 1 {
		t.Fatalf("%d InterruptResolved events, want 1", n)
	}
}

// sign makes a link with the deployment's key, as the server would, with c's fields.
func (r *channelsRig) sign(c links.Claims) string {
	if c.Expires == 0 {
		c.Expires = time.Now().Add(time.Hour).Unix()
	}
	if c.Channel == "" {
		c.Channel = "link"
	}
	return links.Path + links.Issue(r.key, c, time.Now())
}

// TestApprovalLinkAttacks: links that must decide nothing.
func TestApprovalLinkAttacks(t *testing.T) {
	r := startChannels(t, func(c *config.Config) { c.HITL.Links.RevokedBefore = "2026-01-01T00:00:00Z" })
	_, in := r.raise(t, "acme", `{"n":1}`)
	id := in.GetInterruptId()
	l := r.webhookLinks(t, id)
	_, beta := r.raise(t, "beta", `{"n":1}`)
	confirm := url.Values{"confirm": {"1"}, "reason": {"because"}}

	t.Run("altered token", func(t *testing.T) {
		path := linkPath(t, l.ApproveURL)
		payload, sig, _ := strings.Cut(strings.TrimPrefix(path, links.Path), ".")
		b, _ := base64.RawURLEncoding.DecodeString(payload)
		altered := links.Path + base64.RawURLEncoding.EncodeToString(bytes.Replace(b, []byte(`"t":"acme"`), []byte(`"t":"beta"`), 1)) + "." + sig
		for _, p := range []string{altered, path + "x", links.Path + "garbage"} {
			if code, _ := r.get(t, p); code != http.StatusNotFound {
				t.Fatalf("GET %s: %d, want 404", p, code)
			}
			if code, _ := r.post(t, p, confirm); code != http.StatusNotFound {
				t.Fatalf("POST %s: %d, want 404", p, code)
			}
		}
		r.wantPending(t, "acme", id, "altered tokens")
	})
	t.Run("another tenant", func(t *testing.T) {
		// Validly signed, for acme's approver, naming beta's interrupt.
		p := r.sign(links.Claims{Tenant: "acme", Interrupt: beta.GetInterruptId(), Digest: beta.GetArgsDigest(), Approver: "acme-approver", Action: links.Approve})
		if code, _ := r.post(t, p, confirm); code != http.StatusNotFound {
			t.Fatalf("POST: %d, want 404", code)
		}
		// And beta's tenant with acme's approver as the principal.
		p = r.sign(links.Claims{Tenant: "beta", Interrupt: beta.GetInterruptId(), Digest: beta.GetArgsDigest(), Approver: "acme-approver", Action: links.Approve})
		if code, _ := r.post(t, p, confirm); code != http.StatusForbidden {
			t.Fatalf("POST as acme-approver in beta: %d, want 403", code)
		}
		r.wantPending(t, "beta", beta.GetInterruptId(), "links for another tenant")
	})
	t.Run("arguments changed", func(t *testing.T) {
		// A link made for other arguments than the interrupt's now (what an edit that
		// restarts a quorum leaves behind).
		p := r.sign(links.Claims{Tenant: "acme", Interrupt: id, Digest: strings.Repeat("0", 64), Approver: "acme-approver", Action: links.Approve})
		if code, page := r.get(t, p); code != http.StatusGone || !strings.Contains(page, "arguments changed") {
			t.Fatalf("GET: %d\n%s", code, page)
		}
		if code, _ := r.post(t, p, confirm); code != http.StatusGone {
			t.Fatalf("POST: %d", code)
		}
		r.wantPending(t, "acme", id, "a link for other arguments")
	})
	t.Run("expired and revoked", func(t *testing.T) {
		p := r.sign(links.Claims{Tenant: "acme", Interrupt: id, Digest: in.GetArgsDigest(), Approver: "acme-approver", Action: links.Approve,
			Expires: time.Now().Add(-time.Second).Unix()})
		if code, _ := r.post(t, p, confirm); code != http.StatusGone {
			t.Fatalf("expired: %d", code)
		}
		p = r.sign(links.Claims{Tenant: "acme", Interrupt: id, Digest: in.GetArgsDigest(), Approver: "acme-approver", Action: links.Approve,
			Issued: time.Date(2025, 12, 31, 0, 0, 0, 0, time.UTC).Unix()})
		if code, page := r.post(t, p, confirm); code != http.StatusGone || !strings.Contains(page, "revoked") {
			t.Fatalf("revoked: %d\n%s", code, page)
		}
		r.wantPending(t, "acme", id, "expired and revoked links")
	})
	t.Run("approver without the right", func(t *testing.T) {
		p := r.sign(links.Claims{Tenant: "acme", Interrupt: id, Digest: in.GetArgsDigest(), Approver: "acme-user", Action: links.Approve})
		if code, _ := r.post(t, p, confirm); code != http.StatusForbidden {
			t.Fatalf("status %d, want 403", code)
		}
		r.wantPending(t, "acme", id, "a link for a principal without the approver role")
	})
	t.Run("reject needs a reason", func(t *testing.T) {
		if code, _ := r.post(t, linkPath(t, l.RejectURL), url.Values{"confirm": {"1"}}); code != http.StatusBadRequest {
			t.Fatalf("status %d, want 400", code)
		}
		r.wantPending(t, "acme", id, "a rejection without a reason")
	})
	t.Run("after an edit", func(t *testing.T) {
		ctx := context.Background()
		if _, err := r.mt.by["acme"][auth.RoleApprover].c.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{InterruptId: id,
			Decision: &agentplanev1.ResolveInterruptRequest_Edit{Edit: &agentplanev1.EditDecision{ArgumentsJson: `{"n":2}`}}}); err != nil {
			t.Fatal(err)
		}
		if code, _ := r.post(t, linkPath(t, l.RejectURL), confirm); code != http.StatusGone {
			t.Fatalf("reject link after the edit: %d, want 410", code)
		}
		if got := r.interrupt(t, "acme", id); got.GetDecision().GetType() != agentplanev1.DecisionType_DECISION_TYPE_EDIT {
			t.Fatalf("decision %v, want the edit", got.GetDecision())
		}
	})
}

// TestApprovalEmailOverSMTP: the approval email goes through a real SMTP server,
// upgraded with STARTTLS and authenticated, with a plain-text and an HTML part that
// both carry the approver's links, hostile values escaped and no header injected;
// a relay that refuses it for a while gets it again from the outbox; its approve link
// decides as the recipient's principal.
func TestApprovalEmailOverSMTP(t *testing.T) {
	r := startChannels(t, nil)
	r.smtp.FailNext(2, 451)
	_, in := r.raise(t, "acme", `{"n":1}`)
	id := in.GetInterruptId()
	mails := r.smtp.WaitFor(t, testutil.WaitLimit, "the approval email", func(m []webhookstest.Mail) bool { return len(m) >= 1 })
	if n := r.smtp.Refused(); n != 2 {
		t.Fatalf("the relay refused %d attempts, want 2 before the one it took", n)
	}
	m := mails[0]
	if !m.TLS || m.User != r.smtp.User || m.From != "approvals@example.com" || len(m.To) != 1 || m.To[0] != "alice@example.com" {
		t.Fatalf("envelope %+v", m)
	}
	subj, text, html := readMail(t, m.Data)
	if !strings.Contains(subj, "Approval needed") || !strings.Contains(subj, gatedTool) {
		t.Fatalf("Subject %q", subj)
	}
	linkRE := regexp.MustCompile(regexp.QuoteMeta(consoleBase+links.Path) + `[A-Za-z0-9_.-]+`)
	textLinks, htmlLinks := linkRE.FindAllString(text, -1), linkRE.FindAllString(html, -1)
	if len(textLinks) != 2 || len(htmlLinks) != 2 || textLinks[0] != htmlLinks[0] {
		t.Fatalf("links: text %v, html %v\n%s\n%s", textLinks, htmlLinks, text, html)
	}
	wantEscaped(t, text, html)

	approve := linkPath(t, textLinks[0])
	if code, page := r.get(t, approve); code != http.StatusOK || !strings.Contains(page, "acme-approver") {
		t.Fatalf("GET: %d\n%s", code, page)
	}
	r.wantPending(t, "acme", id, "following the email's link")
	if code, _ := r.post(t, approve, url.Values{"confirm": {"1"}}); code != http.StatusOK {
		t.Fatalf("POST: %d", code)
	}
	if got := r.interrupt(t, "acme", id); got.GetDecision().GetDecidedBy() != "acme-approver" ||
		got.GetDecision().GetType() != agentplanev1.DecisionType_DECISION_TYPE_APPROVE {
		t.Fatalf("decision %v", got.GetDecision())
	}

	// A rejection's reason, a reviewer's free text, reaches the resolved email escaped.
	_, in2 := r.raise(t, "acme", `{"n":1}`)
	if _, err := r.mt.by["acme"][auth.RoleApprover].c.Hitl.ResolveInterrupt(context.Background(), &agentplanev1.ResolveInterruptRequest{
		InterruptId: in2.GetInterruptId(), Decision: &agentplanev1.ResolveInterruptRequest_Reject{Reject: &agentplanev1.RejectDecision{Reason: hostile}}}); err != nil {
		t.Fatal(err)
	}
	mails = r.smtp.WaitFor(t, testutil.WaitLimit, "the rejection email", func(m []webhookstest.Mail) bool { return len(m) >= 4 })
	for _, m := range mails[2:] {
		subj, text, html := readMail(t, m.Data)
		if strings.Contains(subj, "resolved") && strings.Contains(text, "reject") {
			wantEscaped(t, text, html)
			return
		}
	}
	t.Fatal("no rejection email")
}

// readMail parses a message: only the headers we write, a multipart/alternative body
// of a text and an HTML part (quoted-printable decoded).
func readMail(t *testing.T, data []byte) (subject, text, html string) {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	for k := range msg.Header {
		switch k {
		case "From", "To", "Subject", "Date", "Message-Id", "Mime-Version", "Auto-Submitted", "Content-Type":
		default:
			t.Fatalf("unexpected header %s: %q", k, msg.Header.Get(k))
		}
	}
	subject, _ = new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("Content-Type %q", msg.Header.Get("Content-Type"))
	}
	parts := map[string]string{}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextPart() // decodes quoted-printable
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		parts[ct] = string(b)
	}
	return subject, parts["text/plain"], parts["text/html"]
}

// wantEscaped fails unless the hostile value is in the email, escaped in its HTML
// part and on one line in its text part.
func wantEscaped(t *testing.T, text, html string) {
	t.Helper()
	if strings.Contains(html, "<script>") || strings.Contains(html, "<img") || !strings.Contains(html, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatalf("the HTML part does not escape the hostile value:\n%s", html)
	}
	if !strings.Contains(text, "<script>alert(1)") || strings.Contains(text, "\r\nBcc:") || strings.Contains(text, "\nBcc:") {
		t.Fatalf("the text part: want the value on one line:\n%s", text)
	}
}

// TestApprovalChannelsBehindTheGuard: the channels' paths are a form area of the
// HTTP guard, like the console: a body must be a form (a cross-site simple request
// as text/plain or JSON is refused), and no origin is a CORS origin for them, listed
// or not; Slack's own form posts (no Origin) pass to the signature check.
func TestApprovalChannelsBehindTheGuard(t *testing.T) {
	const app = "https://app.example.com"
	r := startChannels(t, func(c *config.Config) { c.HTTP.CORSOrigins = []string{app} })
	_, in := r.raise(t, "acme", `{"n":1}`)
	approve := linkPath(t, r.webhookLinks(t, in.GetInterruptId()).ApproveURL)
	for _, c := range []guardReq{
		{name: "link, listed origin", method: "POST", path: approve, body: "confirm=1",
			header: []string{"Origin", app, "Content-Type", "application/x-www-form-urlencoded"}, want: http.StatusForbidden},
		{name: "link preflight, listed origin", method: "OPTIONS", path: approve,
			header: []string{"Origin", app, "Access-Control-Request-Method", "POST"}, want: http.StatusForbidden},
		{name: "link as text/plain", method: "POST", path: approve, body: "confirm=1",
			header: []string{"Content-Type", "text/plain"}, want: http.StatusUnsupportedMediaType},
		{name: "slack as JSON", method: "POST", path: "/hitl/slack/interactions", body: `{"payload":"x"}`,
			header: []string{"Content-Type", "application/json"}, want: http.StatusUnsupportedMediaType},
		{name: "slack form, unsigned", method: "POST", path: "/hitl/slack/interactions", body: "payload=x",
			header: []string{"Content-Type", "application/x-www-form-urlencoded"}, want: http.StatusUnauthorized},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := guardDo(t, r.mt.in.HTTPAddr, c)
			if resp.StatusCode != c.want {
				t.Fatalf("%d %s, want %d", resp.StatusCode, body, c.want)
			}
			if resp.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Fatal("a channel path answered as a CORS origin")
			}
		})
	}
	r.wantPending(t, "acme", in.GetInterruptId(), "requests the guard refused")
}

// TestChannelsAcrossPostgresReplicas: two control planes on one PostgreSQL database
// sharing the link key. A click on one and the same click on the other (a double click
// balanced across replicas, which the per-replica replay cache cannot see) are one
// decision; a link sent by either and used through one is dead on the other.
func TestChannelsAcrossPostgresReplicas(t *testing.T) {
	dsn := pgtest.DSN(t)
	r := startChannels(t, func(c *config.Config) {
		c.Store.Backend = config.BackendPostgres
		c.Store.Postgres.DSN = dsn
	})
	other := servertest.StartConfig(t, r.mt.in.Config) // the same data_dir: the same link key file
	one, two := r.base, "http://"+other.HTTPAddr
	at := func(base string) { r.base = base }
	defer at(one)

	taskID, in := r.raise(t, "acme", `{"n":1}`)
	value, _ := button(t, r.slackMessage(t, in.GetInterruptId()), webhooks.SlackActionApprove)
	at(one)
	if code := r.click(t, slackAlice, webhooks.SlackActionApprove, value); code != http.StatusOK {
		t.Fatalf("click on replica one: %d", code)
	}
	at(two)
	if code := r.click(t, slackAlice, webhooks.SlackActionApprove, value); code != http.StatusOK {
		t.Fatalf("click on replica two: %d", code)
	}
	if n := r.resolvedEvents(t, "acme", taskID); n != 1 {
		t.Fatalf("%d InterruptResolved events, want 1", n)
	}

	taskID, in = r.raise(t, "acme", `{"n":2}`)
	approve := linkPath(t, r.webhookLinks(t, in.GetInterruptId()).ApproveURL)
	at(two)
	if code, page := r.post(t, approve, url.Values{"confirm": {"1"}}); code != http.StatusOK {
		t.Fatalf("link on replica two: %d\n%s", code, page)
	}
	at(one)
	if code, _ := r.post(t, approve, url.Values{"confirm": {"1"}}); code != http.StatusGone {
		t.Fatalf("the same link on replica one: %d, want 410", code)
	}
	if n := r.resolvedEvents(t, "acme", taskID); n != 1 {
		t.Fatalf("%d InterruptResolved events, want 1", n)
	}
}

// TestApprovalEmailDeadLetterOn5xx: a relay's 5xx reply is final (no such mailbox, a
// refused sender): the message is a dead letter after one attempt, for an operator to
// retry once the cause is fixed, and the retry delivers it.
func TestApprovalEmailDeadLetterOn5xx(t *testing.T) {
	r := startChannels(t, nil)
	r.smtp.FailNext(1, 550)
	r.raise(t, "acme", `{"n":1}`)
	ctx := context.Background()
	var dead []*agentplanev1.WebhookDeadLetter
	deadline := time.Now().Add(testutil.WaitLimit)
	for len(dead) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no dead letter")
		}
		list, err := r.mt.admin.c.Admin.ListWebhookDeadLetters(ctx, &agentplanev1.ListWebhookDeadLettersRequest{Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		dead = list.GetDeadLetters()
		time.Sleep(10 * time.Millisecond)
	}
	if len(dead) != 1 || dead[0].GetEndpoint() != "acme-mail" || dead[0].GetAttempts() != 1 || !strings.Contains(dead[0].GetLastError(), "550") {
		t.Fatalf("dead letters %v", dead)
	}
	if _, err := r.mt.admin.c.Admin.RetryWebhookDeadLetter(ctx, &agentplanev1.RetryWebhookDeadLetterRequest{Id: dead[0].GetId()}); err != nil {
		t.Fatal(err)
	}
	r.smtp.WaitFor(t, testutil.WaitLimit, "the retried email", func(m []webhookstest.Mail) bool { return len(m) == 1 })
}
