package gates

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// shape is how a request carries one lane's list.
type shape int

const (
	absent shape = iota
	empty
	nonEmpty
)

func (s shape) String() string { return [...]string{"absent", "empty", "non-empty"}[s] }

// wantDenied is the posture table written out independently of postureDenies, so the
// matrix checks the gates against the documented meaning, not against themselves.
var wantDenied = map[Posture]map[Capability]bool{
	PostureStandard:   {},
	PostureRestricted: {CapMcpServers: true, CapA2aPeers: true, CapWebFetch: true},
	PostureAirgapped:  {CapMcpServers: true, CapA2aPeers: true, CapWorkflows: true, CapWebFetch: true, CapOrgMemoryMount: true},
}

func mcpList(s shape) *agentplanev1.McpServerList {
	switch s {
	case empty:
		return &agentplanev1.McpServerList{}
	case nonEmpty:
		return &agentplanev1.McpServerList{Servers: []*agentplanev1.McpServer{{Name: "mine", Url: "https://mcp.example.com/sse"}}}
	}
	return nil
}

func a2aList(s shape) *agentplanev1.A2APeerList {
	switch s {
	case empty:
		return &agentplanev1.A2APeerList{}
	case nonEmpty:
		return &agentplanev1.A2APeerList{Peers: []*agentplanev1.A2APeer{{Name: "mine", Url: "https://agent.example.com/"}}}
	}
	return nil
}

func names[E Entry](es []E) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.GetName())
	}
	return out
}

// TestInjectionMatrix runs every combination of mode, locked subset of {mcp, a2a},
// posture and request shape of both lanes, through the real config path (NewPolicy)
// and the real request path (ResolveStartTask), and proves:
//   - the capability bit is true exactly when a non-empty caller list is honoured
//     (its entry appears in the effective list);
//   - a locked lane refuses a present list (empty or not) with CONFIG_LOCKED_KEY
//     naming the key, and never an absent one;
//   - an unlocked, closed lane ignores a non-empty list and says so, with the reason;
//   - the baseline is always in the effective list.
func TestInjectionMatrix(t *testing.T) {
	lockSets := [][]string{nil, {"mcp"}, {"a2a"}, {"mcp", "a2a"}}
	cases := 0
	for _, mode := range []Mode{SingleUser, MultiTenant} {
		for _, locked := range lockSets {
			for _, posture := range AllPostures() {
				policy, err := NewPolicy(Config{
					RequirePrincipal:  mode == MultiTenant,
					LockedKeys:        locked,
					CompliancePosture: string(posture),
					McpServers:        []*agentplanev1.McpServer{{Name: "base", Url: "https://mcp.internal.example/"}},
					A2aPeers:          []*agentplanev1.A2APeer{{Name: "base", Url: "https://agent.internal.example/"}},
				})
				if err != nil {
					t.Fatalf("NewPolicy: %v", err)
				}
				d := policy.For("default")
				caps := Capabilities(d)
				for _, ms := range []shape{absent, empty, nonEmpty} {
					for _, as := range []shape{absent, empty, nonEmpty} {
						cases++
						name := fmt.Sprintf("%s/locked=%v/%s/mcp=%s/a2a=%s", mode, locked, posture, ms, as)
						t.Run(name, func(t *testing.T) {
							checkMatrixCase(t, mode, locked, posture, ms, as, d, caps)
						})
					}
				}
			}
		}
	}
	if want := 2 * 4 * 3 * 9; cases != want {
		t.Fatalf("ran %d cases, want %d", cases, want)
	}
}

func checkMatrixCase(t *testing.T, mode Mode, locked []string, posture Posture, ms, as shape, d Deployment, caps *agentplanev1.Capabilities) {
	t.Helper()
	type laneWant struct {
		key      LockedKey
		cap      Capability
		shape    shape
		bit      bool
		locked   bool
		honoured bool
		why      IgnoreReason
	}
	lanes := []*laneWant{{key: KeyMcp, cap: CapMcpServers, shape: ms, bit: caps.GetMcpInjection()},
		{key: KeyA2a, cap: CapA2aPeers, shape: as, bit: caps.GetA2AInjection()}}
	var wantLocked []LockedKey
	for _, l := range lanes {
		l.locked = slices.Contains(locked, string(l.key))
		l.honoured = !l.locked && mode == SingleUser && !wantDenied[posture][l.cap]
		switch {
		case mode == MultiTenant:
			l.why = IgnoredMultiTenant
		case wantDenied[posture][l.cap]:
			l.why = IgnoredCompliancePosture
		}
		if l.bit != l.honoured {
			t.Errorf("%s capability bit = %v, want %v", l.key, l.bit, l.honoured)
		}
		if l.locked && l.shape != absent {
			wantLocked = append(wantLocked, l.key)
		}
	}
	if got := caps.GetLockedKeys(); !slices.Equal(got, locked) && len(got)+len(locked) > 0 {
		t.Errorf("capabilities locked_keys = %v, want %v", got, locked)
	}

	req := &agentplanev1.StartTaskRequest{McpServers: mcpList(ms), A2APeers: a2aList(as)}
	st, err := ResolveStartTask(d, req)
	if len(wantLocked) > 0 {
		var lk *LockedKeyError
		if !errors.As(err, &lk) || !slices.Equal(lk.Keys, wantLocked) {
			t.Fatalf("want *LockedKeyError for %v, got %v", wantLocked, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("unexpected refusal: %v", err)
	}
	effective := [][]string{names(st.Mcp.Effective), names(st.A2a.Effective)}
	ignored := []*agentplanev1.InjectionIgnored{st.Mcp.Ignored, st.A2a.Ignored}
	for i, l := range lanes {
		if !slices.Contains(effective[i], "base") {
			t.Errorf("%s: baseline missing from %v", l.key, effective[i])
		}
		inEffective := slices.Contains(effective[i], "mine")
		if l.shape == nonEmpty && inEffective != l.bit {
			t.Errorf("%s: caller entry honoured=%v but capability bit=%v", l.key, inEffective, l.bit)
		}
		if l.shape != nonEmpty && inEffective {
			t.Errorf("%s: caller entry in effective list without being sent", l.key)
		}
		wantIgnored := l.shape == nonEmpty && !l.honoured
		if (ignored[i] != nil) != wantIgnored {
			t.Fatalf("%s: ignored event = %v, want present=%v", l.key, ignored[i], wantIgnored)
		}
		if wantIgnored && (ignored[i].GetReason() != string(l.why) || !slices.Equal(ignored[i].GetNames(), []string{"mine"})) {
			t.Errorf("%s: ignored = %v, want reason %q naming mine", l.key, ignored[i], l.why)
		}
	}
	var wantEvents int
	for _, l := range lanes {
		if l.shape == nonEmpty && !l.honoured {
			wantEvents++
		}
	}
	if len(st.Events) != wantEvents {
		t.Errorf("events = %v, want %d ignored events", st.Events, wantEvents)
	}
}

// TestTenantTighteningReachesCapabilities proves a tenant's stricter settings are
// what that tenant's capability bit and request path see, while others keep the
// deployment's.
func TestTenantTighteningReachesCapabilities(t *testing.T) {
	policy, err := NewPolicy(Config{Tenants: map[string]TenantConfig{
		"locked":     {LockedKeys: []string{"a2a"}},
		"restricted": {CompliancePosture: "restricted"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		tenant   string
		mcp, a2a bool
	}{
		{"default", true, true},
		{"locked", true, false},
		{"restricted", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.tenant, func(t *testing.T) {
			d := policy.For(tt.tenant)
			c := Capabilities(d)
			if c.GetMcpInjection() != tt.mcp || c.GetA2AInjection() != tt.a2a {
				t.Fatalf("caps mcp=%v a2a=%v, want %v %v", c.GetMcpInjection(), c.GetA2AInjection(), tt.mcp, tt.a2a)
			}
			r, err := ResolveMcp(d, mcpList(nonEmpty))
			if err != nil || slices.Contains(names(r.Effective), "mine") != tt.mcp {
				t.Fatalf("ResolveMcp = %v, %v; want honoured=%v", names(r.Effective), err, tt.mcp)
			}
		})
	}
}
