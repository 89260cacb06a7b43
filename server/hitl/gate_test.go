package hitl

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/gates"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// The gate is wired with gates.AlwaysGated in the server; keep the signatures in step.
var _ AlwaysGatedFunc = gates.AlwaysGated

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func TestGateCheck(t *testing.T) {
	g := NewGate(nil, gates.AlwaysGated)
	args := `{"path": "/etc/passwd"}`
	digest := ArgsDigest(args)
	plain := agentSpec(&agentplanev1.AgentSpec{Model: "m"})
	graph := func(def *string) *agentplanev1.ResolvedSpec {
		return graphSpec(&agentplanev1.GraphSpec{HitlDefault: def, Entry: "sup", Agents: map[string]*agentplanev1.GraphAgent{
			"sup":  agentNode(nil, nil),
			"pass": agentNode(passthrough, nil),
			"sub":  graphNode(disabled, &agentplanev1.GraphSpec{Agents: map[string]*agentplanev1.GraphAgent{"inner": agentNode(passthrough, nil)}}),
		}})
	}
	destructive := &agentplanev1.McpToolAnnotations{DestructiveHint: proto.Bool(true)}
	call := func(tool, node string, ann *agentplanev1.McpToolAnnotations) Call {
		return Call{CallID: "c1", ToolName: tool, ArgumentsJSON: args, AgentName: node, TripIndex: 1, Annotations: ann}
	}
	tests := []struct {
		name    string
		task    TaskGating
		call    Call
		outcome agentplanev1.GateOutcome
		reason  string
		tags    []string
		detail  string // substring, for REJECT
	}{
		{"no policy allows", TaskGating{Spec: plain}, call("fs.read", "a", nil), agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW, ReasonNoPolicy, nil, ""},
		{"allowlist miss allows", TaskGating{Spec: plain, Policy: allowlist([]string{"fs.delete"}, nil)}, call("fs.read", "a", nil), agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW, ReasonNotMatched, nil, ""},
		{"allowlist hit interrupts a plain agent with a policy", TaskGating{Spec: plain, Policy: allowlist([]string{"fs.delete"}, map[string][]string{"fs.delete": {"destructive"}})},
			call("fs.delete", "a", nil), agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT, ReasonAllowlist, []string{"destructive"}, ""},
		{"denylist interrupts", TaskGating{Spec: plain, Policy: denylist([]string{"fs.read"}, nil)}, call("fs.delete", "a", nil), agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT, ReasonDenylist, nil, ""},
		{"predicate interrupts with tags", TaskGating{Spec: plain, Policy: predicate("args.path.startsWith('/etc') ? ['system'] : []")},
			call("fs.delete", "a", nil), agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT, ReasonPredicate, []string{"system"}, ""},
		{"predicate sees the session", TaskGating{Spec: plain, SessionID: "s-9", Policy: predicate("session_id == 's-9'")},
			call("fs.delete", "a", nil), agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT, ReasonPredicate, nil, ""},
		{"failing predicate interrupts", TaskGating{Spec: plain, Policy: predicate("args.missing == 1")}, call("x", "a", nil), agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT, ReasonPredicateError, nil, ""},
		{"A2A skill without policy is rejected on a plain agent", TaskGating{Spec: plain}, call("a2a__billing__refund", "a", nil),
			agentplanev1.GateOutcome_GATE_OUTCOME_REJECT, ReasonHITLDisabled, nil, "a2a.always_gated"},
		{"A2A skill is gated although the denylist lets it pass", TaskGating{Spec: plain, Policy: denylist([]string{"a2a__billing__refund"}, nil)},
			call("a2a__billing__refund", "a", nil), agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT, gates.GatedA2a, nil, ""},
		{"always gated keeps the policy's tags", TaskGating{Spec: plain, Policy: allowlist([]string{"srv.drop"}, map[string][]string{"srv.drop": {"db"}})},
			call("srv.drop", "a", destructive), agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT, gates.GatedMcpDestructive, []string{"db"}, ""},
		{"read-only hint cannot loosen", TaskGating{Spec: plain, Policy: allowlist([]string{"srv.drop"}, nil)},
			call("srv.drop", "a", &agentplanev1.McpToolAnnotations{ReadOnlyHint: proto.Bool(true)}), agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT, ReasonAllowlist, nil, ""},
		{"graph default disabled rejects", TaskGating{Spec: graph(nil), Policy: allowlist([]string{"fs.delete"}, nil)},
			call("fs.delete", "sup", nil), agentplanev1.GateOutcome_GATE_OUTCOME_REJECT, ReasonHITLDisabled, nil, `HITL is disabled for node "sup"`},
		{"graph default enabled interrupts", TaskGating{Spec: graph(enabled), Policy: allowlist([]string{"fs.delete"}, nil)},
			call("fs.delete", "sup", nil), agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT, ReasonAllowlist, nil, ""},
		{"passthrough at the top interrupts", TaskGating{Spec: graph(nil), Policy: allowlist([]string{"fs.delete"}, nil)},
			call("fs.delete", "pass", nil), agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT, ReasonAllowlist, nil, ""},
		{"passthrough to a disabled host rejects", TaskGating{Spec: graph(enabled), Policy: allowlist([]string{"fs.delete"}, nil)},
			call("fs.delete", "inner", nil), agentplanev1.GateOutcome_GATE_OUTCOME_REJECT, ReasonHITLDisabled, nil, `passes approvals through to node "sub"`},
		{"unknown node in a disabled graph rejects", TaskGating{Spec: graph(nil), Policy: allowlist([]string{"fs.delete"}, nil)},
			call("fs.delete", "ghost", nil), agentplanev1.GateOutcome_GATE_OUTCOME_REJECT, ReasonHITLDisabled, nil, "not in the graph"},
		{"disabled mode does not touch allowed calls", TaskGating{Spec: graph(nil), Policy: allowlist([]string{"fs.delete"}, nil)},
			call("fs.read", "sup", nil), agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW, ReasonNotMatched, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := g.Check(context.Background(), tt.task, tt.call, t0)
			if err != nil {
				t.Fatal(err)
			}
			if r.Outcome != tt.outcome || r.Reason != tt.reason || !slices.Equal(r.Tags, tt.tags) {
				t.Fatalf("Check = %v %s %q (%s), want %v %s %q", r.Outcome, r.Reason, r.Tags, r.Detail, tt.outcome, tt.reason, tt.tags)
			}
			if r.ArgsDigest != digest {
				t.Errorf("ArgsDigest = %s, want %s", r.ArgsDigest, digest)
			}
			d := r.Decision
			switch r.Outcome {
			case agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW:
				if d.GetType() != agentplanev1.DecisionType_DECISION_TYPE_APPROVE || d.GetArgumentsJson() != args || d.GetArgsDigest() != digest || d.GetCallId() != "c1" ||
					d.GetSource() != agentplanev1.DecisionSource_DECISION_SOURCE_POLICY || d.GetDecidedBy() != SystemPrincipal {
					t.Errorf("ALLOW decision %v does not carry the call's args", d)
				}
			case agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT:
				if d != nil {
					t.Errorf("INTERRUPT carries decision %v", d)
				}
			case agentplanev1.GateOutcome_GATE_OUTCOME_REJECT:
				if d.GetType() != agentplanev1.DecisionType_DECISION_TYPE_REJECT || d.GetSource() != agentplanev1.DecisionSource_DECISION_SOURCE_HITL_DISABLED ||
					d.GetArgumentsJson() != "" || d.GetRuledArgsDigest() != digest || d.GetArgsDigest() != digest || d.GetCallId() != "c1" || d.GetDecidedBy() != SystemPrincipal || !d.GetDecideTime().AsTime().Equal(t0) {
					t.Errorf("REJECT decision %v is not a synthesized rejection", d)
				}
				if !strings.Contains(d.GetModelReason(), tt.detail) || d.GetReason() != d.GetModelReason() || !strings.Contains(d.GetReason(), tt.call.ToolName) {
					t.Errorf("rejection reason %q does not explain %q", d.GetModelReason(), tt.detail)
				}
			}
		})
	}
}

func TestGateCheckBadCalls(t *testing.T) {
	g := NewGate(nil, gates.AlwaysGated)
	for name, c := range map[string]Call{
		"no tool name": {ArgumentsJSON: "{}"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := g.Check(context.Background(), TaskGating{Spec: agentSpec(&agentplanev1.AgentSpec{})}, c, t0)
			if e := asAPIErr(t, err); e.Code != codes.InvalidArgument {
				t.Errorf("Check error %v, want InvalidArgument", err)
			}
		})
	}
}

func TestGateBrokenPolicyGates(t *testing.T) {
	g := NewGate(nil, func(string, *agentplanev1.McpToolAnnotations, []*agentplanev1.ToolAxisOverride) (bool, string) {
		return false, ""
	})
	// A stored predicate that no longer compiles (as after an upgrade of CEL).
	r, err := g.Check(context.Background(), TaskGating{Spec: agentSpec(&agentplanev1.AgentSpec{}), Policy: predicate("nonsense(")}, Call{ToolName: "t"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT || r.Reason != ReasonPolicyBroken {
		t.Errorf("Check = %v %s, want INTERRUPT %s", r.Outcome, r.Reason, ReasonPolicyBroken)
	}
}

func TestNewGateNeedsAlwaysGated(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewGate without alwaysGated did not panic")
		}
	}()
	NewGate(nil, nil)
}

func TestToolGatedEventAndInterrupt(t *testing.T) {
	g := NewGate(nil, gates.AlwaysGated)
	args := `{"id": 12345678901234567}`
	c := Call{CallID: "call-3", ToolName: "a2a__bank__pay", ToolDescription: "Pays", ArgumentsJSON: args, AgentName: "sup", TripIndex: 4}
	task := TaskGating{Spec: agentSpec(&agentplanev1.AgentSpec{}), Policy: predicate("['money']"), SessionID: "s1"}
	r, err := g.Check(context.Background(), task, c, t0)
	if err != nil {
		t.Fatal(err)
	}
	ev := ToolGatedEvent(c, r, "I1")
	want := &agentplanev1.ToolGated{CallId: "call-3", ToolName: "a2a__bank__pay", Outcome: agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT,
		InterruptId: "I1", Tags: []string{"money"}, Reason: gates.GatedA2a, Node: "sup", ArgumentsJson: args}
	if !proto.Equal(ev, want) {
		t.Errorf("ToolGatedEvent = %v, want %v", ev, want)
	}
	in := NewToolInterrupt(InterruptMeta{InterruptID: "I1", TaskID: "T1", Tenant: "default", SessionID: "s1", OriginalInput: "pay the bill", Now: t0, Timeout: time.Hour}, c, r)
	if in.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_PENDING || in.GetKind() != agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL ||
		in.GetArgsDigest() != r.ArgsDigest || in.GetCallId() != "call-3" || in.GetNode() != "sup" || in.GetTaskId() != "T1" || in.GetTenant() != "default" ||
		!in.GetDeadline().AsTime().Equal(t0.Add(time.Hour)) {
		t.Errorf("interrupt %v", in)
	}
	req := in.GetApproval()
	ctx := req.GetContext()
	if req.GetInterruptId() != "I1" || req.GetToolName() != c.ToolName || req.GetToolDescription() != "Pays" || req.GetArgumentsJson() != args ||
		!req.GetRequestTime().AsTime().Equal(t0) || ctx.GetAgentName() != "sup" || ctx.GetTripIndex() != 4 || ctx.GetSessionId() != "s1" ||
		ctx.GetOriginalInput() != "pay the bill" || !slices.Equal(ctx.GetTags(), []string{"money"}) {
		t.Errorf("approval request %v", req)
	}
	if DeadlinePassed(in, t0.Add(time.Hour-time.Nanosecond)) || !DeadlinePassed(in, t0.Add(time.Hour)) {
		t.Error("DeadlinePassed is wrong around the deadline")
	}
	noDeadline := NewToolInterrupt(InterruptMeta{InterruptID: "I2", Now: t0}, c, r)
	if noDeadline.GetDeadline() != nil || DeadlinePassed(noDeadline, t0.Add(1000*time.Hour)) {
		t.Error("an interrupt without timeout has a deadline")
	}
	pause := NewAutoPauseInterrupt(InterruptMeta{InterruptID: "P1", TaskID: "T1", Now: t0, Timeout: time.Minute}, "sup")
	if pause.GetKind() != agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE || pause.GetTurnEnd().GetAgentName() != "sup" || pause.GetApproval() != nil ||
		pause.GetDeadline() != nil || pause.GetArgsDigest() == "" || pause.GetNode() != "sup" {
		t.Errorf("auto-pause interrupt %v", pause)
	}
}

func BenchmarkGateCheck(b *testing.B) {
	args := `{"path": "/etc/passwd", "recursive": true}`
	spec := graphSpec(&agentplanev1.GraphSpec{HitlDefault: enabled, Entry: "sup", Agents: map[string]*agentplanev1.GraphAgent{
		"sup": agentNode(nil, nil), "worker": agentNode(nil, nil),
	}})
	for _, bp := range benchPolicies() {
		b.Run(bp.name, func(b *testing.B) {
			g := NewGate(nil, gates.AlwaysGated)
			// A fresh message per iteration is what the server sees (decoded from the
			// store), so the cache key is computed every time.
			task := TaskGating{Spec: spec, Policy: bp.policy, SessionID: "s"}
			c := Call{CallID: "c", ToolName: "fs.delete", ArgumentsJSON: args, AgentName: "worker", TripIndex: 1}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.Check(ctx, task, c, t0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
