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

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/hitl"
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
