package gates

import (
	"errors"
	"slices"
	"strings"
	"testing"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

func TestNewPolicyRefuses(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings, each must appear
	}{
		{"unknown posture", Config{CompliancePosture: "lenient"}, []string{`gates.compliance_posture: unknown compliance posture "lenient"`, `"airgapped"`}},
		{"unknown locked key", Config{LockedKeys: []string{"mcp", "toolPolicy"}}, []string{`gates.locked_keys[1]: unknown locked key "toolPolicy"`, `"tool_policy"`}},
		{"tenant unknown key", Config{Tenants: map[string]TenantConfig{"acme": {LockedKeys: []string{"nope"}}}}, []string{`tenants.acme.locked_keys[0]`}},
		{"tenant unknown posture", Config{Tenants: map[string]TenantConfig{"acme": {CompliancePosture: "x"}}}, []string{`tenants.acme.compliance_posture: unknown`}},
		{"tenant loosens posture", Config{CompliancePosture: "restricted", Tenants: map[string]TenantConfig{"acme": {CompliancePosture: "standard"}}},
			[]string{`tenants.acme.compliance_posture: "standard" is looser than the deployment's "restricted"`, `"restricted", "airgapped"`}},
		{"baseline metadata", Config{McpServers: []*agentplanev1.McpServer{{Name: "m", Url: "http://169.254.169.254/"}}}, []string{`gates.mcp_servers[0] ("m"): url.forbidden_host`}},
		{"baseline bad name", Config{A2aPeers: []*agentplanev1.A2APeer{{Name: "a__b", Url: "https://x.example/"}}}, []string{`gates.a2a_peers[0] ("a__b"): name.invalid`}},
		{"baseline duplicate", Config{A2aPeers: []*agentplanev1.A2APeer{{Name: "a", Url: "https://x.example/"}, {Name: "A", Url: "https://y.example/"}}},
			[]string{`gates.a2a_peers[1] ("A"): name.duplicate of gates.a2a_peers[0]`}},
		{"every problem named", Config{CompliancePosture: "x", LockedKeys: []string{"y"}}, []string{"compliance_posture", "locked_keys[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateDeployment(tt.cfg)
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestNewPolicyAccepts(t *testing.T) {
	policy, err := NewPolicy(Config{
		RequirePrincipal:  true,
		LockedKeys:        []string{"retention_policy", "mcp", "mcp"},
		CompliancePosture: "restricted",
		// Operators may point the baseline at their own network over plain http.
		McpServers: []*agentplanev1.McpServer{{Name: "internal", Url: "http://10.0.0.7:8080/mcp", Headers: map[string]string{"Authorization": "Bearer x"}}},
		Tenants: map[string]TenantConfig{
			"acme": {LockedKeys: []string{"a2a"}, CompliancePosture: "airgapped"},
			"same": {CompliancePosture: "restricted"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	base := policy.Deployment()
	if base.Mode != MultiTenant || base.Posture != PostureRestricted || !slices.Equal(base.Locked, []LockedKey{KeyMcp, KeyRetentionPolicy}) {
		t.Fatalf("deployment %+v", base)
	}
	acme := policy.For("acme")
	if acme.Posture != PostureAirgapped || !slices.Equal(acme.Locked, []LockedKey{KeyMcp, KeyA2a, KeyRetentionPolicy}) || len(acme.McpBaseline) != 1 {
		t.Fatalf("acme %+v", acme)
	}
	if other := policy.For("unknown-tenant"); other.Posture != PostureRestricted || !slices.Equal(other.Locked, base.Locked) {
		t.Fatalf("unconfigured tenant %+v, want the deployment's", other)
	}
}

func TestPostures(t *testing.T) {
	if got := PostureAirgapped.Denied(); !slices.Equal(got, AllCapabilities()) {
		t.Fatalf("airgapped denies %v, want every capability", got)
	}
	all := AllPostures()
	for i, p := range all {
		for j, q := range all {
			if got, want := p.AtLeastAsStrictAs(q), i >= j; got != want {
				t.Errorf("%s.AtLeastAsStrictAs(%s) = %v, want %v", p, q, got, want)
			}
		}
	}
	if p := Posture("bypassed"); !p.Denies(CapMcpServers) || len(p.Denied()) != len(AllCapabilities()) {
		t.Fatalf("a posture outside the closed set must deny everything")
	}
	if p, err := ParsePosture(""); err != nil || p != PostureStandard {
		t.Fatalf(`ParsePosture("") = %q, %v`, p, err)
	}
}

func TestAssertUnlocked(t *testing.T) {
	locked := func(keys ...LockedKey) Deployment { return Deployment{Posture: PostureStandard, Locked: keys} }
	policy := &agentplanev1.InterruptPolicy{}
	axes := []*agentplanev1.ToolAxisOverride{{Tool: "s.t"}}
	tests := []struct {
		name string
		d    Deployment
		req  *agentplanev1.StartTaskRequest
		want []LockedKey
	}{
		{"nothing locked", locked(), &agentplanev1.StartTaskRequest{McpServers: mcpList(nonEmpty), InterruptPolicy: policy}, nil},
		{"absent", locked(KeyMcp, KeyA2a, KeyToolPolicy), &agentplanev1.StartTaskRequest{}, nil},
		{"nil request", locked(KeyMcp, KeyA2a, KeyToolPolicy), nil, nil},
		{"empty mcp", locked(KeyMcp), &agentplanev1.StartTaskRequest{McpServers: mcpList(empty)}, []LockedKey{KeyMcp}},
		{"non-empty mcp", locked(KeyMcp), &agentplanev1.StartTaskRequest{McpServers: mcpList(nonEmpty)}, []LockedKey{KeyMcp}},
		{"a2a unlocked when mcp locked", locked(KeyMcp), &agentplanev1.StartTaskRequest{A2APeers: a2aList(nonEmpty)}, nil},
		{"both named", locked(KeyMcp, KeyA2a), &agentplanev1.StartTaskRequest{McpServers: mcpList(empty), A2APeers: a2aList(empty)}, []LockedKey{KeyMcp, KeyA2a}},
		{"interrupt policy", locked(KeyToolPolicy), &agentplanev1.StartTaskRequest{InterruptPolicy: policy}, []LockedKey{KeyToolPolicy}},
		{"tool axes", locked(KeyToolPolicy), &agentplanev1.StartTaskRequest{ToolAxes: axes}, []LockedKey{KeyToolPolicy}},
		{"multi-tenant still refuses", Deployment{Mode: MultiTenant, Posture: PostureStandard, Locked: []LockedKey{KeyA2a}}, &agentplanev1.StartTaskRequest{A2APeers: a2aList(nonEmpty)}, []LockedKey{KeyA2a}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := AssertUnlocked(tt.d, tt.req)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("unexpected refusal %v", err)
				}
				return
			}
			var lk *LockedKeyError
			if !errors.As(err, &lk) || !slices.Equal(lk.Keys, tt.want) {
				t.Fatalf("got %v, want locked %v", err, tt.want)
			}
		})
	}
}

func TestCapabilitiesReport(t *testing.T) {
	c := Capabilities(Deployment{Mode: SingleUser, Posture: PostureRestricted, Locked: []LockedKey{KeyToolPolicy}})
	if c.GetMcpInjection() || c.GetA2AInjection() || c.GetMaxCallerPeers() != 0 {
		t.Fatalf("restricted posture must close both lanes: %v", c)
	}
	if !slices.Equal(c.GetDeniedCapabilities(), []string{"mcp_servers", "a2a_peers", "web_fetch"}) || c.GetCompliancePosture() != "restricted" ||
		!slices.Equal(c.GetLockedKeys(), []string{"tool_policy"}) {
		t.Fatalf("report %v", c)
	}
	if c := Capabilities(Deployment{Posture: PostureStandard}); c.GetMaxCallerPeers() != MaxCallerPeers || c.GetRequirePrincipal() {
		t.Fatalf("open single-user report %v", c)
	}
}
