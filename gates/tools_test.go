package gates

import (
	"errors"
	"testing"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

func TestToolNames(t *testing.T) {
	if got := A2aToolName("crm", "create_ticket"); got != "a2a__crm__create_ticket" {
		t.Fatalf("A2aToolName = %q", got)
	}
	if got := McpToolName("github", "list_issues"); got != "github.list_issues" {
		t.Fatalf("McpToolName = %q", got)
	}
	for _, tt := range []struct {
		name        string
		peer, skill string
		ok          bool
	}{
		{"a2a__crm__create_ticket", "crm", "create_ticket", true},
		{"a2a__crm__a__b", "crm", "a__b", true},
		{"a2a__crm", "", "", false},
		{"a2a____x", "", "", false},
		{"a2a__crm__", "", "", false},
		{"github.list", "", "", false},
	} {
		peer, skill, ok := ParseA2aToolName(tt.name)
		if peer != tt.peer || skill != tt.skill || ok != tt.ok {
			t.Errorf("ParseA2aToolName(%q) = %q %q %v", tt.name, peer, skill, ok)
		}
	}
	if s, tool, ok := ParseMcpToolName("github.repos.list"); !ok || s != "github" || tool != "repos.list" {
		t.Errorf("ParseMcpToolName = %q %q %v", s, tool, ok)
	}
	for name, want := range map[string]bool{"a2a__x__y": true, "A2A__x__y": true, "a2a__": true, "a2a_x": false, "github.a2a__x": false, "": false} {
		if got := IsA2ASkill(name); got != want {
			t.Errorf("IsA2ASkill(%q) = %v, want %v", name, got, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestAlwaysGated(t *testing.T) {
	destructive := &agentplanev1.McpToolAnnotations{DestructiveHint: ptr(true)}
	readOnly := &agentplanev1.McpToolAnnotations{ReadOnlyHint: ptr(true), DestructiveHint: ptr(false)}
	tests := []struct {
		name      string
		tool      string
		ann       *agentplanev1.McpToolAnnotations
		overrides []*agentplanev1.ToolAxisOverride
		want      bool
		reason    string
	}{
		{"a2a skill", "a2a__crm__create", nil, nil, true, GatedA2a},
		{"a2a skill, caller tries to loosen", "a2a__crm__create", nil,
			[]*agentplanev1.ToolAxisOverride{{Tool: "a2a__crm__create", Egress: ptr(false), Effect: ptr("read"), Irreversibility: ptr("never")}}, true, GatedA2a},
		{"a2a skill, read-only annotation ignored", "a2a__crm__read", readOnly, nil, true, GatedA2a},
		{"plain mcp tool", "github.list", nil, nil, false, ""},
		{"read-only hint", "github.list", readOnly, nil, false, ""},
		{"destructive hint", "github.delete_repo", destructive, nil, true, GatedMcpDestructive},
		{"destructive hint, caller tries to loosen", "github.delete_repo", destructive,
			[]*agentplanev1.ToolAxisOverride{{Tool: "github.delete_repo", Irreversibility: ptr("never"), Effect: ptr("read")}}, true, GatedMcpDestructive},
		{"caller tightens irreversibility", "fs.write", nil, []*agentplanev1.ToolAxisOverride{{Tool: "fs.write", Irreversibility: ptr("possible")}}, true, GatedAxisOverride},
		{"caller tightens to write egress", "http.post", nil, []*agentplanev1.ToolAxisOverride{{Tool: "http.post", Egress: ptr(true), Effect: ptr("write")}}, true, GatedAxisOverride},
		{"egress alone is a read", "http.get", nil, []*agentplanev1.ToolAxisOverride{{Tool: "http.get", Egress: ptr(true)}}, false, ""},
		{"override for another tool", "fs.read", nil, []*agentplanev1.ToolAxisOverride{{Tool: "fs.write", Irreversibility: ptr("always")}}, false, ""},
		{"unknown value fails closed", "fs.x", nil, []*agentplanev1.ToolAxisOverride{{Tool: "fs.x", Irreversibility: ptr("sometimes")}}, true, GatedAxisOverride},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason := AlwaysGated(tt.tool, tt.ann, tt.overrides)
			if got != tt.want || reason != tt.reason {
				t.Fatalf("AlwaysGated = %v %q, want %v %q", got, reason, tt.want, tt.reason)
			}
		})
	}
}

func TestApplyAxisOverridesKeepsLooseningForReport(t *testing.T) {
	base := BaseAxes("a2a__crm__create", nil)
	enforced, reported := ApplyAxisOverrides(base, &agentplanev1.ToolAxisOverride{Egress: ptr(false), Irreversibility: ptr("never")},
		&agentplanev1.ToolAxisOverride{Irreversibility: ptr("always")})
	if enforced != (Axes{Egress: true, Effect: EffectWrite, Irreversibility: IrreversibleAlways}) {
		t.Fatalf("enforced %+v", enforced)
	}
	if reported != (Axes{Egress: false, Effect: EffectWrite, Irreversibility: IrreversibleAlways}) {
		t.Fatalf("reported %+v", reported)
	}
	if _, r := ApplyAxisOverrides(base, &agentplanev1.ToolAxisOverride{Egress: ptr(false)}); r.Egress {
		t.Fatalf("a loosening value must be reported")
	}
}

func TestValidateToolAxes(t *testing.T) {
	ok := []*agentplanev1.ToolAxisOverride{{Tool: "s.t", Effect: ptr("write"), Irreversibility: ptr("always"), Egress: ptr(true)}, {Tool: "a2a__p__s"}}
	if err := ValidateToolAxes(ok); err != nil {
		t.Fatalf("valid axes refused: %v", err)
	}
	bad := []*agentplanev1.ToolAxisOverride{{Tool: ""}, {Tool: "s.t", Effect: ptr("delete")}, {Tool: "s.t", Irreversibility: ptr("rarely")}}
	var ae *AxisError
	if err := ValidateToolAxes(bad); !errors.As(err, &ae) {
		t.Fatalf("want *AxisError, got %v", err)
	}
	want := []string{"tool_axes[0].tool", "tool_axes[1].effect", "tool_axes[2].tool", "tool_axes[2].irreversibility"}
	if len(ae.Violations) != len(want) {
		t.Fatalf("violations %+v, want fields %v", ae.Violations, want)
	}
	for i, v := range ae.Violations {
		if v.Field != want[i] {
			t.Errorf("violation %d at %s, want %s", i, v.Field, want[i])
		}
	}
	if err := ValidateToolAxes(make([]*agentplanev1.ToolAxisOverride, MaxToolAxes+1)); !errors.As(err, &ae) {
		t.Fatalf("too many axes accepted")
	}
	if _, err := ResolveStartTask(Deployment{Posture: PostureStandard}, &agentplanev1.StartTaskRequest{ToolAxes: bad}); !errors.As(err, &ae) {
		t.Fatalf("ResolveStartTask must refuse bad axes, got %v", err)
	}
}
