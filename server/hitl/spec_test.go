package hitl

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

func agentNode(hitl *string, a *agentplanev1.AgentSpec) *agentplanev1.GraphAgent {
	if a == nil {
		a = &agentplanev1.AgentSpec{Model: "m"}
	}
	return &agentplanev1.GraphAgent{Role: "collaborator", Hitl: hitl, Spec: &agentplanev1.NodeSpec{Spec: &agentplanev1.NodeSpec_Agent{Agent: a}}}
}

func graphNode(hitl *string, g *agentplanev1.GraphSpec) *agentplanev1.GraphAgent {
	return &agentplanev1.GraphAgent{Role: "collaborator", Hitl: hitl, Spec: &agentplanev1.NodeSpec{Spec: &agentplanev1.NodeSpec_Graph{Graph: g}}}
}

func graphSpec(g *agentplanev1.GraphSpec) *agentplanev1.ResolvedSpec {
	return &agentplanev1.ResolvedSpec{Spec: &agentplanev1.ResolvedSpec_Graph{Graph: g}}
}

func agentSpec(a *agentplanev1.AgentSpec) *agentplanev1.ResolvedSpec {
	return &agentplanev1.ResolvedSpec{Spec: &agentplanev1.ResolvedSpec_Agent{Agent: a}}
}

var (
	enabled     = proto.String(string(ModeEnabled))
	passthrough = proto.String(string(ModePassthrough))
	disabled    = proto.String(string(ModeDisabled))
)

func TestResolveMode(t *testing.T) {
	// outer: entry "sup" (inherits the default), "on", "off", "pass" (passthrough) and
	// the nested graphs "sub_on" (enabled) and "sub_off" (disabled) and "sub_pass"
	// (passthrough), whose nodes pass through or set their own modes.
	inner := func(def *string) *agentplanev1.GraphSpec {
		return &agentplanev1.GraphSpec{HitlDefault: def, Agents: map[string]*agentplanev1.GraphAgent{
			"leaf_pass": agentNode(passthrough, nil),
			"leaf_on":   agentNode(enabled, nil),
			"leaf_def":  agentNode(nil, nil),
		}}
	}
	outer := func(def *string) *agentplanev1.ResolvedSpec {
		return graphSpec(&agentplanev1.GraphSpec{HitlDefault: def, Entry: "sup", Agents: map[string]*agentplanev1.GraphAgent{
			"sup":      agentNode(nil, nil),
			"on":       agentNode(enabled, nil),
			"off":      agentNode(disabled, nil),
			"pass":     agentNode(passthrough, nil),
			"weird":    agentNode(proto.String("sometimes"), nil),
			"sub_on":   graphNode(enabled, &agentplanev1.GraphSpec{Agents: map[string]*agentplanev1.GraphAgent{"a_pass": agentNode(passthrough, nil), "a_def": agentNode(nil, nil)}}),
			"sub_off":  graphNode(disabled, &agentplanev1.GraphSpec{Agents: map[string]*agentplanev1.GraphAgent{"b_pass": agentNode(passthrough, nil), "b_on": agentNode(enabled, nil)}}),
			"sub_pass": graphNode(passthrough, inner(passthrough)),
		}})
	}
	tests := []struct {
		name      string
		spec      *agentplanev1.ResolvedSpec
		hasPolicy bool
		node      string
		want      ModeResolution
	}{
		{"plain agent with a policy", agentSpec(&agentplanev1.AgentSpec{}), true, "a", ModeResolution{Mode: ModeEnabled, Declared: ModeEnabled, Found: true}},
		{"plain agent without a policy", agentSpec(&agentplanev1.AgentSpec{}), false, "a", ModeResolution{Mode: ModeDisabled, Declared: ModeDisabled, Found: true}},
		{"default is disabled", outer(nil), true, "sup", ModeResolution{Mode: ModeDisabled, Declared: ModeDisabled, DecidedBy: "sup", Found: true}},
		{"graph default inherited", outer(enabled), false, "sup", ModeResolution{Mode: ModeEnabled, Declared: ModeEnabled, DecidedBy: "sup", Found: true}},
		{"node enabled", outer(nil), false, "on", ModeResolution{Mode: ModeEnabled, Declared: ModeEnabled, DecidedBy: "on", Found: true}},
		{"node disabled overrides enabled default", outer(enabled), false, "off", ModeResolution{Mode: ModeDisabled, Declared: ModeDisabled, DecidedBy: "off", Found: true}},
		{"top-level passthrough reaches the control plane", outer(disabled), false, "pass", ModeResolution{Mode: ModeEnabled, Declared: ModePassthrough, Found: true}},
		{"unknown mode is disabled", outer(enabled), false, "weird", ModeResolution{Mode: ModeDisabled, Declared: ModeDisabled, DecidedBy: "weird", Found: true}},
		{"nested passthrough to enabled host", outer(nil), false, "a_pass", ModeResolution{Mode: ModeEnabled, Declared: ModePassthrough, DecidedBy: "sub_on", Found: true}},
		{"nested passthrough to disabled host", outer(enabled), false, "b_pass", ModeResolution{Mode: ModeDisabled, Declared: ModePassthrough, DecidedBy: "sub_off", Found: true}},
		{"nested enabled decides itself", outer(nil), false, "b_on", ModeResolution{Mode: ModeEnabled, Declared: ModeEnabled, DecidedBy: "b_on", Found: true}},
		{"nested node inherits its own graph's default, not the outer one", outer(enabled), false, "a_def", ModeResolution{Mode: ModeDisabled, Declared: ModeDisabled, DecidedBy: "a_def", Found: true}},
		{"passthrough all the way up", outer(nil), false, "leaf_pass", ModeResolution{Mode: ModeEnabled, Declared: ModePassthrough, Found: true}},
		{"passthrough default of a nested graph", outer(nil), false, "leaf_def", ModeResolution{Mode: ModeEnabled, Declared: ModePassthrough, Found: true}},
		{"unknown node gets the graph default", outer(enabled), false, "ghost", ModeResolution{Mode: ModeEnabled, Declared: ModeEnabled, DecidedBy: "ghost"}},
		{"unknown node, default disabled", outer(nil), false, "ghost", ModeResolution{Mode: ModeDisabled, Declared: ModeDisabled, DecidedBy: "ghost"}},
		{"unknown node, default passthrough", outer(passthrough), false, "ghost", ModeResolution{Mode: ModeEnabled, Declared: ModePassthrough}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ResolveMode(tt.spec, tt.hasPolicy, tt.node); got != tt.want {
				t.Errorf("ResolveMode = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestAutoPauseOnTurnEnd(t *testing.T) {
	g := func(def *bool, sup *bool) *agentplanev1.ResolvedSpec {
		n := agentNode(nil, nil)
		n.Role, n.AutoPauseOnTurnEnd = "supervisor", sup
		return graphSpec(&agentplanev1.GraphSpec{Entry: "sup", AutoPauseOnTurnEndDefault: def, Agents: map[string]*agentplanev1.GraphAgent{
			"sup": n, "worker": {Role: "collaborator", AutoPauseOnTurnEnd: proto.Bool(true)},
		}})
	}
	tests := []struct {
		name string
		spec *agentplanev1.ResolvedSpec
		node string
		want bool
	}{
		{"agent on", agentSpec(&agentplanev1.AgentSpec{AutoPauseOnTurnEnd: proto.Bool(true)}), "", true},
		{"agent unset", agentSpec(&agentplanev1.AgentSpec{}), "", false},
		{"graph default on", g(proto.Bool(true), nil), "sup", true},
		{"entry overrides the default off", g(proto.Bool(true), proto.Bool(false)), "sup", false},
		{"entry on", g(nil, proto.Bool(true)), "sup", true},
		{"only the entry pauses", g(proto.Bool(true), nil), "worker", false},
		{"nothing set", g(nil, nil), "sup", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AutoPauseOnTurnEnd(tt.spec, tt.node); got != tt.want {
				t.Errorf("AutoPauseOnTurnEnd = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestToolSchema(t *testing.T) {
	params, _ := structpb.NewStruct(map[string]any{"type": "object"})
	a := &agentplanev1.AgentSpec{Tools: []*agentplanev1.FunctionTool{{Type: "function", Function: &agentplanev1.FunctionDef{Name: "write", Parameters: params}}}}
	nested := &agentplanev1.GraphSpec{Agents: map[string]*agentplanev1.GraphAgent{"inner": agentNode(nil, a)}}
	g := graphSpec(&agentplanev1.GraphSpec{Agents: map[string]*agentplanev1.GraphAgent{"w": agentNode(nil, a), "sub": graphNode(nil, nested)}})
	tests := []struct {
		name       string
		spec       *agentplanev1.ResolvedSpec
		node, tool string
		found      bool
	}{
		{"plain agent", agentSpec(a), "", "write", true},
		{"plain agent, undeclared tool", agentSpec(a), "", "mcp.x", false},
		{"graph node", g, "w", "write", true},
		{"nested node", g, "inner", "write", true},
		{"graph node is a graph", g, "sub", "write", false},
		{"unknown node", g, "ghost", "write", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ok := ToolSchema(tt.spec, tt.node, tt.tool)
			if ok != tt.found || (ok && !proto.Equal(s, params)) {
				t.Errorf("ToolSchema = %v, %v; want found=%v", s, ok, tt.found)
			}
		})
	}
}

func TestHitlReasonTrust(t *testing.T) {
	ct := func(mode *string, maxU, maxT *int32) *agentplanev1.ContentTrustPolicy {
		return &agentplanev1.ContentTrustPolicy{HitlReasonPolicy: mode, MaxUntrustedBytes: maxU, MaxTrustedBytes: maxT}
	}
	trusted, untrusted := proto.String(TrustTrusted), proto.String(TrustUntrusted)
	inner := &agentplanev1.GraphSpec{ContentTrust: ct(nil, proto.Int32(50), nil), Agents: map[string]*agentplanev1.GraphAgent{
		"leaf": agentNode(nil, &agentplanev1.AgentSpec{ContentTrust: ct(nil, nil, proto.Int32(7))}),
	}}
	g := graphSpec(&agentplanev1.GraphSpec{ContentTrust: ct(trusted, proto.Int32(99), proto.Int32(1000)), Agents: map[string]*agentplanev1.GraphAgent{
		"own":  agentNode(nil, &agentplanev1.AgentSpec{ContentTrust: ct(untrusted, nil, nil)}),
		"bare": agentNode(nil, nil),
		"sub":  graphNode(nil, inner),
	}})
	tests := []struct {
		name string
		spec *agentplanev1.ResolvedSpec
		node string
		want *agentplanev1.ContentTrustPolicy
	}{
		{"plain agent", agentSpec(&agentplanev1.AgentSpec{ContentTrust: ct(trusted, nil, nil)}), "", ct(trusted, nil, nil)},
		{"plain agent without settings", agentSpec(&agentplanev1.AgentSpec{}), "", ct(nil, nil, nil)},
		{"node's own mode, graph's caps", g, "own", ct(untrusted, proto.Int32(99), proto.Int32(1000))},
		{"node without settings takes the graph's", g, "bare", ct(trusted, proto.Int32(99), proto.Int32(1000))},
		{"nearest wins per field", g, "leaf", ct(trusted, proto.Int32(50), proto.Int32(7))},
		{"unknown node takes the top graph's", g, "ghost", ct(trusted, proto.Int32(99), proto.Int32(1000))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HitlReasonTrust(tt.spec, tt.node); !proto.Equal(got, tt.want) {
				t.Errorf("HitlReasonTrust = %v, want %v", got, tt.want)
			}
		})
	}
}
