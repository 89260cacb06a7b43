package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
	"github.com/agentplane/agentplane/server/webhooks"
	"github.com/agentplane/agentplane/server/webhooks/webhookstest"
)

// startWithRules is a multi-tenant server whose tenant acme asks two of group
// finance (alice, bob and acme-user, who starts the tasks and may approve too) for
// the gated tool, never the starter.
func startWithRules(t *testing.T) (mt *multiTenant, alice, bob *actor) {
	t.Helper()
	var extra []config.Token
	mk := func(name string) *actor {
		tok, hash, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		extra = append(extra, config.Token{Name: name, SHA256: hash, Tenant: "acme", Roles: []string{"approver"}})
		return &actor{name: name, tenant: "acme", roles: []auth.Role{auth.RoleApprover}, token: tok}
	}
	alice, bob = mk("alice"), mk("bob")
	mt = startMultiTenant(t, []string{"acme", "globex"}, func(c *config.Config) {
		for i := range c.Auth.Tokens {
			if c.Auth.Tokens[i].Name == "acme-user" {
				c.Auth.Tokens[i].Roles = []string{"user", "approver"}
			}
		}
		c.Auth.Tokens = append(c.Auth.Tokens, extra...)
		c.HITL.Groups = []config.ApproverGroup{{Name: "finance", Tenant: "acme", Principals: []string{"alice", "bob", "acme-user"}}}
		c.HITL.Rules = []config.ApprovalRule{{Name: "two-for-money", Tenant: "acme", Tools: []string{gatedTool}, Group: "finance", Quorum: 2}}
	})
	for _, a := range []*actor{alice, bob} {
		c, err := client.Dial(context.Background(), mt.in.GRPCAddr, client.WithToken(a.token))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		a.c = c
	}
	return mt, alice, bob
}

func TestApprovalRulesOverTheAPIAndTheConsole(t *testing.T) {
	mt, alice, bob := startWithRules(t)
	ctx := context.Background()
	_, in, _ := raiseInterruptLeased(t, mt, "acme")
	id := in.GetInterruptId()
	starter := mt.by["acme"][auth.RoleUser]
	approve := func(a *actor, ctx context.Context) error {
		_, err := a.c.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{InterruptId: id,
			Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}}})
		return err
	}
	get := func() *agentplanev1.Interrupt {
		t.Helper()
		got, err := alice.c.Hitl.GetInterrupt(ctx, &agentplanev1.GetInterruptRequest{InterruptId: id})
		if err != nil {
			t.Fatal(err)
		}
		return got.GetInterrupt()
	}
	rq := get().GetRequirement()
	if rq.GetRule() != "two-for-money" || rq.GetQuorum() != 2 || rq.GetStartedBy() != starter.name ||
		!slices.Equal(rq.GetEligible(), []string{"alice", "bob"}) || rq.GetApprovalsNeeded() != 2 {
		t.Fatalf("requirement = %v", rq)
	}

	// The starter, though an approver and a member of the group: refused over the API
	// and in the console.
	if err := approve(starter, ctx); reasonOf(err) != apierr.ReasonApproverNotEligible || status.Code(err) != codes.PermissionDenied {
		t.Fatalf("the starter's approval over the API: %v", err)
	}
	su := signIn(t, mt.in.HTTPAddr, starter)
	su.get("/ui/interrupts/" + id)
	resp, body := su.post("/ui/interrupts/"+id, url.Values{"decision": {"approve"}, "args_digest": {in.GetArgsDigest()}})
	wantStatus(t, "the starter's approval in the console", resp, http.StatusForbidden, "")
	if !strings.Contains(body, "separates duties") {
		t.Errorf("the console's refusal does not say why:\n%.2000s", body)
	}

	// alice in the console: recorded, not enough.
	u := signIn(t, mt.in.HTTPAddr, alice)
	u.get("/ui/interrupts/" + id)
	resp, _ = u.post("/ui/interrupts/"+id, url.Values{"decision": {"approve"}, "args_digest": {in.GetArgsDigest()}, "request_id": {"r1"}})
	wantStatus(t, "alice's approval in the console", resp, http.StatusSeeOther, "")
	_, page := u.get("/ui/interrupts/" + id)
	for _, want := range []string{`id="requirement"`, `data-principal="alice"`, "alice via console", "1 more from bob", `id="in-state">pending`} {
		if !strings.Contains(page, want) {
			t.Errorf("the interrupt page lacks %q", want)
		}
	}
	// One person counts once: alice again, through the API.
	if err := approve(alice, ctx); reasonOf(err) != apierr.ReasonAlreadyVoted {
		t.Fatalf("alice's second approval: %v", err)
	}
	// bob, claiming a channel no client can claim: recorded as the API's.
	claim := metadata.AppendToOutgoingContext(ctx, hitl.ChannelHeader, string(hitl.ChannelSlack))
	if err := approve(bob, claim); err != nil {
		t.Fatal(err)
	}
	done := get()
	if d := done.GetDecision(); done.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED || d.GetDecidedBy() != "bob" || d.GetChannel() != "api" {
		t.Fatalf("after bob: %v", done)
	}

	// The audit over HTTP/JSON, as the API's other clients read it.
	req, _ := http.NewRequest(http.MethodGet, "http://"+mt.in.HTTPAddr+"/v1/audit?since=2000-01-01T00:00:00Z&pageSize=10", nil)
	req.Header.Set("Authorization", "Bearer "+alice.token)
	hresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(hresp.Body)
	hresp.Body.Close()
	var list struct {
		Records []struct {
			Principal, Channel, Action, InterruptID string
			Resolved                                bool
		}
	}
	if err := json.Unmarshal(raw, &list); err != nil || hresp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/audit: %d %s", hresp.StatusCode, raw)
	}
	var rows []string
	for _, r := range list.Records {
		rows = append(rows, r.Principal+" "+r.Channel+" "+r.Action+" "+map[bool]string{true: "resolved"}[r.Resolved])
	}
	if !slices.Equal(rows, []string{"alice console AUDIT_ACTION_APPROVE ", "bob api AUDIT_ACTION_APPROVE resolved"}) {
		t.Fatalf("audit = %q", rows)
	}
	// Another tenant's audit is its own.
	other, err := mt.by["globex"][auth.RoleApprover].c.Hitl.ListAuditRecords(ctx, &agentplanev1.ListAuditRecordsRequest{})
	if err != nil || len(other.GetRecords()) != 0 {
		t.Fatalf("globex's audit: %v %v", other, err)
	}
	// A runtime may not read it.
	if _, err := mt.by["acme"][auth.RoleRuntime].c.Hitl.ListAuditRecords(ctx, &agentplanev1.ListAuditRecordsRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a runtime reading the audit: %v", err)
	}
}

// TestApprovalRulesOnTwoPostgresReplicas: a quorum whose votes come through two
// replicas sharing one database, an escalation whose durable timers run once
// between them, and its webhooks, each delivered once, saying who may still approve.
func TestApprovalRulesOnTwoPostgresReplicas(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8G"
	recv := webhookstest.New(t, secret)
	dsn := pgtest.DSN(t)
	names := []string{"starter", "alice", "bob", "carol", "rt"}
	toks := map[string]string{}
	var cfgTokens []config.Token
	for _, n := range names {
		tok, hash, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		role := map[string]string{"starter": "user", "rt": "runtime"}[n]
		if role == "" {
			role = "approver"
		}
		toks[n] = tok
		cfgTokens = append(cfgTokens, config.Token{Name: n, SHA256: hash, Tenant: "acme", Roles: []string{role}})
	}
	replica := func() *servertest.Instance {
		return servertest.Start(t, func(c *config.Config) {
			c.Store.Backend = config.BackendPostgres
			c.Store.Postgres.DSN = dsn
			c.Auth.RequirePrincipal = true
			c.Auth.Tokens = cfgTokens
			c.HITL.Groups = []config.ApproverGroup{
				{Name: "finance", Tenant: "acme", Principals: []string{"alice", "bob"}},
				{Name: "treasury", Tenant: "acme", Principals: []string{"carol"}},
			}
			c.HITL.Rules = []config.ApprovalRule{{Name: "two-for-money", Tenant: "acme", Group: "finance", Quorum: 2,
				Escalation: config.Escalation{RemindAfter: config.Duration(time.Second), EscalateAfter: config.Duration(2 * time.Second), EscalateTo: "treasury"}}}
			n := &c.Notifications
			n.AllowPrivateDestinations = true
			n.PollInterval = config.Duration(10 * time.Millisecond)
			n.Webhooks = []config.Webhook{{Name: "ops", Tenant: "acme", URL: recv.URL, Secret: secret, Events: config.WebhookEvents}}
		})
	}
	r1, r2 := replica(), replica()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitLimit)
	defer cancel()
	as := func(in *servertest.Instance, who string) *client.Client {
		c, err := client.Dial(ctx, in.GRPCAddr, client.WithToken(toks[who]))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	started, err := as(r1, "starter").Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}, Input: client.UserText("move 5"), InterruptPolicy: gatedPolicy(),
	})
	if err != nil {
		t.Fatal(err)
	}
	rt := as(r1, "rt")
	leases, err := rt.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt"})
	if err != nil || len(leases.GetLeases()) != 1 {
		t.Fatalf("lease: %v %v", leases, err)
	}
	l := leases.GetLeases()[0]
	ref := &agentplanev1.LeaseRef{TaskId: started.GetTask().GetTaskId(), LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
	checked, err := rt.Runtime.CheckToolCall(ctx, &agentplanev1.CheckToolCallRequest{Lease: ref, CallId: "c1", ToolName: gatedTool, AgentName: "teller", ArgumentsJson: `{"n": 5}`})
	if err != nil || checked.GetInterrupt() == nil {
		t.Fatalf("CheckToolCall = %v, %v", checked, err)
	}
	id := checked.GetInterrupt().GetInterruptId()
	approve := func(c *client.Client) (*agentplanev1.Interrupt, error) {
		resp, err := c.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{InterruptId: id,
			Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}}})
		return resp.GetInterrupt(), err
	}
	if got, err := approve(as(r1, "alice")); err != nil || got.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_PENDING {
		t.Fatalf("alice through r1: %v %v", got, err)
	}
	if _, err := approve(as(r2, "alice")); reasonOf(err) != apierr.ReasonAlreadyVoted {
		t.Fatalf("alice again through r2: %v", err)
	}
	// The escalation's two steps, each once although both replicas run the timers.
	recv.WaitFor(t, testutil.WaitLimit, "the escalation", func(ds []webhookstest.Delivery) bool {
		return slices.ContainsFunc(ds, func(d webhookstest.Delivery) bool {
			return strings.Contains(string(d.Body), config.EventInterruptEscalated)
		})
	})
	// carol, of the escalation group, through r2: the quorum is met.
	done, err := approve(as(r2, "carol"))
	if err != nil || done.GetDecision().GetDecidedBy() != "carol" {
		t.Fatalf("carol through r2: %v %v", done, err)
	}
	recv.WaitFor(t, testutil.WaitLimit, "the resolution", func(ds []webhookstest.Delivery) bool {
		return slices.ContainsFunc(ds, func(d webhookstest.Delivery) bool {
			return strings.Contains(string(d.Body), config.EventInterruptResolved)
		})
	})
	types := map[string]int{}
	for _, d := range recv.Deliveries() {
		var m webhooks.Message
		if err := json.Unmarshal(d.Body, &m); err != nil || d.Verified != nil {
			t.Fatalf("%s: %v %v", d.ID, err, d.Verified)
		}
		types[m.Type]++
		rq := m.Data.Requirement
		switch m.Type {
		case config.EventInterruptVote:
			if rq == nil || !slices.Equal(rq.Approvals, []string{"alice"}) || rq.ApprovalsNeeded != 1 || !slices.Equal(rq.Eligible, []string{"bob"}) {
				t.Errorf("interrupt.vote: %+v", rq)
			}
		case config.EventInterruptEscalated:
			if rq == nil || rq.EscalationGroup != "treasury" || !rq.Escalated || !slices.Equal(rq.Eligible, []string{"bob", "carol"}) {
				t.Errorf("interrupt.escalated: %+v", rq)
			}
		}
	}
	want := map[string]int{config.EventInterruptCreated: 1, config.EventInterruptVote: 1, config.EventInterruptReminder: 1,
		config.EventInterruptEscalated: 1, config.EventInterruptResolved: 1}
	for ev, n := range want {
		if types[ev] != n {
			t.Errorf("%s delivered %d times, want %d (all: %v)", ev, types[ev], n, types)
		}
	}
	// The audit, read through either replica, is one log.
	audit, err := as(r2, "bob").Hitl.ListAuditRecords(ctx, &agentplanev1.ListAuditRecordsRequest{InterruptId: id})
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, r := range audit.GetRecords() {
		rows = append(rows, r.GetPrincipal()+" "+strings.TrimPrefix(r.GetAction().String(), "AUDIT_ACTION_"))
	}
	if !slices.Equal(rows, []string{"alice APPROVE", "system REMIND", "system ESCALATE", "carol APPROVE"}) {
		t.Fatalf("audit = %v", rows)
	}
}
