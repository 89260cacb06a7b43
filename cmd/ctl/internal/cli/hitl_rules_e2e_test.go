package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/console"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/servertest"
)

// TestChannelHeaderIsTheServers: ctl and the console name their channel with the
// header the server reads.
func TestChannelHeaderIsTheServers(t *testing.T) {
	if channelHeader != hitl.ChannelHeader || console.ChannelHeader != hitl.ChannelHeader {
		t.Fatalf("ctl sends %q, the console %q, the server reads %q", channelHeader, console.ChannelHeader, hitl.ChannelHeader)
	}
}

// TestHitlRulesThroughCtl: under a two-of-finance rule, ctl shows the rule's state,
// refuses the task's starter, counts a person once, records each approval as ctl's,
// and lists and exports the audit.
func TestHitlRulesThroughCtl(t *testing.T) {
	tokens := map[string]string{}
	var cfgTokens []config.Token
	for name, roles := range map[string][]string{"starter": {"user", "approver"}, "alice": {"approver"}, "bob": {"approver"}, "rt": {"runtime"}} {
		tok, hash, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		tokens[name] = tok
		cfgTokens = append(cfgTokens, config.Token{Name: name, SHA256: hash, Tenant: "acme", Roles: roles})
	}
	in := servertest.Start(t, func(c *config.Config) {
		c.Auth.RequirePrincipal = true
		c.Auth.Tokens = cfgTokens
		c.HITL.Groups = []config.ApproverGroup{{Name: "finance", Tenant: "acme", Principals: []string{"starter", "alice", "bob"}}}
		c.HITL.Rules = []config.ApprovalRule{{Name: "two-for-money", Tenant: "acme", Tags: []string{"money"}, Group: "finance", Quorum: 2}}
	})
	id := raiseMoneyInterrupt(t, in.GRPCAddr, tokens["starter"], tokens["rt"])
	as := func(who string, args ...string) (int, string, string) {
		return runCtl(t, in.GRPCAddr, append([]string{"--token", tokens[who]}, args...)...)
	}

	code, out, errOut := as("alice", "hitl", "show", id)
	for _, want := range []string{"approval rule   two-for-money: 2 of group finance, not the starter (starter)", "approved by     -",
		"still needed    2 more from alice, bob"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("show: exit %d (%s), output lacks %q:\n%s", code, errOut, want, out)
		}
	}
	if code, _, errOut := as("starter", "hitl", "approve", id); code == 0 || !strings.Contains(errOut, "INTERRUPT_APPROVER_NOT_ELIGIBLE") ||
		!strings.Contains(errOut, "separates duties") {
		t.Errorf("the starter approving: exit %d: %s", code, errOut)
	}
	if code, out, errOut := as("alice", "hitl", "approve", id, "--reason", "checked the invoice"); code != 0 ||
		!strings.Contains(out, "state           pending") || !strings.Contains(out, "approved by     alice via ctl") || !strings.Contains(out, "still needed    1 more from bob") {
		t.Errorf("alice approving: exit %d (%s):\n%s", code, errOut, out)
	}
	if code, _, errOut := as("alice", "hitl", "approve", id); code == 0 || !strings.Contains(errOut, "INTERRUPT_ALREADY_VOTED") {
		t.Errorf("alice approving twice: exit %d: %s", code, errOut)
	}
	if code, out, errOut := as("bob", "hitl", "approve", id); code != 0 || !strings.Contains(out, "approve by bob") || !strings.Contains(out, "via ctl") {
		t.Errorf("bob approving: exit %d (%s):\n%s", code, errOut, out)
	}

	code, out, errOut = as("alice", "hitl", "audit", "--since", "1h")
	if code != 0 || !strings.Contains(out, "approve (resolved)") || strings.Count(out, " ctl ") != 2 || !strings.Contains(out, "checked the invoice") {
		t.Errorf("audit: exit %d (%s):\n%s", code, errOut, out)
	}
	code, out, errOut = as("alice", "hitl", "audit", "--since", "1h", "--export", "--limit", "1")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("export: exit %d (%s): %q", code, errOut, out)
	}
	for i, want := range []string{"alice", "bob"} {
		var rec struct{ Principal, Channel, ArgsDigest string }
		if err := json.Unmarshal([]byte(lines[i]), &rec); err != nil || rec.Principal != want || rec.Channel != "ctl" || rec.ArgsDigest == "" {
			t.Errorf("export line %d = %s (%v)", i, lines[i], err)
		}
	}
	if code, out, _ := as("alice", "hitl", "audit", "--since", "2099-01-01T00:00:00Z", "-o", "json"); code != 0 || strings.Contains(out, "alice") {
		t.Errorf("audit in the future: exit %d: %s", code, out)
	}
	if code, _, errOut := as("alice", "hitl", "audit", "--since", "yesterday"); code != exitUsage {
		t.Errorf("a bad --since: exit %d: %s", code, errOut)
	}
}

// raiseMoneyInterrupt starts a task as the starter and has the runtime ask about a
// call the policy gates with tag money; it returns the interrupt's id.
func raiseMoneyInterrupt(t *testing.T, addr, starterToken, runtimeToken string) string {
	t.Helper()
	ctx := context.Background()
	dial := func(tok string) *client.Client {
		c, err := client.Dial(ctx, addr, client.WithToken(tok))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	user, rt := dial(starterToken), dial(runtimeToken)
	params, _ := structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}},
		"required": []any{"n"}, "additionalProperties": false})
	started, err := user.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(&agentplanev1.AgentSpec{ApiVersion: "qar/v1", Kind: "AgentSpec", Name: proto.String("teller"),
			Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "Ask before paying."}},
			Model:        "m", Tools: []*agentplanev1.FunctionTool{{Type: "function", Function: &agentplanev1.FunctionDef{Name: "pay", Parameters: params}}}})},
		Input: client.UserText("pay 1"),
		InterruptPolicy: &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Allowlist{Allowlist: &agentplanev1.ToolListPolicy{
			Tools: []string{"pay"}, Tags: map[string]*agentplanev1.TagList{"pay": {Tags: []string{"money"}}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	leased, err := rt.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt", MaxTasks: 1})
	if err != nil || len(leased.GetLeases()) != 1 {
		t.Fatalf("LeaseTasks: %v %v", leased, err)
	}
	l := leased.GetLeases()[0]
	check, err := rt.Runtime.CheckToolCall(ctx, &agentplanev1.CheckToolCallRequest{
		Lease:  &agentplanev1.LeaseRef{TaskId: started.GetTask().GetTaskId(), LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()},
		CallId: "c1", ToolName: "pay", AgentName: "teller", ArgumentsJson: `{"n":1}`,
	})
	if err != nil || check.GetInterrupt().GetRequirement().GetRule() != "two-for-money" {
		t.Fatalf("CheckToolCall: %v %v", check, err)
	}
	return check.GetInterrupt().GetInterruptId()
}
