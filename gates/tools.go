package gates

import (
	"fmt"
	"strings"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// a2aPrefix starts every A2A skill's tool name.
const a2aPrefix = "a2a__"

// McpToolName is the mounted name of tool on MCP server: "<server>.<tool>".
func McpToolName(server, tool string) string { return server + "." + tool }

// A2aToolName is the mounted name of skill on A2A peer: "a2a__<peer>__<skill>".
// Peer names never contain "__" (ValidName), so the name parses back unambiguously.
func A2aToolName(peer, skill string) string { return a2aPrefix + peer + "__" + skill }

// ParseMcpToolName splits "<server>.<tool>" at the first '.'.
func ParseMcpToolName(name string) (server, tool string, ok bool) {
	server, tool, ok = strings.Cut(name, ".")
	if !ok || !ValidName(server) || tool == "" {
		return "", "", false
	}
	return server, tool, true
}

// ParseA2aToolName splits "a2a__<peer>__<skill>".
func ParseA2aToolName(name string) (peer, skill string, ok bool) {
	rest, ok := strings.CutPrefix(name, a2aPrefix)
	if !ok {
		return "", "", false
	}
	peer, skill, ok = strings.Cut(rest, "__")
	if !ok || !ValidName(peer) || skill == "" {
		return "", "", false
	}
	return peer, skill, true
}

// IsA2ASkill reports whether name is an A2A skill's tool name. It is deliberately
// broader than ParseA2aToolName (any case of the prefix, malformed rest): it decides
// gating, and a name that merely looks like an A2A skill is gated like one.
func IsA2ASkill(name string) bool {
	return len(name) >= len(a2aPrefix) && strings.EqualFold(name[:len(a2aPrefix)], a2aPrefix)
}

// Effect is whether a tool changes state somewhere.
type Effect uint8

// Effects, least risky first.
const (
	EffectRead Effect = iota
	EffectWrite
)

// Irreversibility is whether a tool's effect can be undone.
type Irreversibility uint8

// Irreversibilities, least risky first.
const (
	IrreversibleNever Irreversibility = iota
	IrreversiblePossible
	IrreversibleAlways
)

var (
	effectNames = []string{EffectRead: "read", EffectWrite: "write"}
	irrevNames  = []string{IrreversibleNever: "never", IrreversiblePossible: "possible", IrreversibleAlways: "always"}
)

func (e Effect) String() string          { return nameOf(effectNames, int(e)) }
func (i Irreversibility) String() string { return nameOf(irrevNames, int(i)) }

func nameOf(names []string, i int) string {
	if i >= 0 && i < len(names) {
		return names[i]
	}
	return fmt.Sprintf("unknown(%d)", i)
}

// Axes are a tool's risk axes. Larger values are riskier on every axis, so tightening
// is taking the maximum.
type Axes struct {
	Egress          bool
	Effect          Effect
	Irreversibility Irreversibility
}

// Gated reports whether axes make a call always gated: write-capable egress, or an
// effect that may not be undone.
func (a Axes) Gated() bool {
	return a.Effect == EffectWrite && a.Egress || a.Irreversibility >= IrreversiblePossible
}

// tighten returns the riskier of a and b on each axis.
func (a Axes) tighten(b Axes) Axes {
	return Axes{
		Egress:          a.Egress || b.Egress,
		Effect:          max(a.Effect, b.Effect),
		Irreversibility: max(a.Irreversibility, b.Irreversibility),
	}
}

// BaseAxes are a tool's axes before any caller override. An A2A skill is a remote
// agent acting on its own side: write-capable egress whose effect may not be undone.
// An MCP tool starts at the least risky values (its gating is then the interrupt
// policy's business) and its annotations may only tighten: destructiveHint=true makes
// it write, always irreversible. Annotations come from a third-party server and are
// untrusted, so no hint ever loosens anything.
func BaseAxes(toolName string, ann *agentplanev1.McpToolAnnotations) Axes {
	if IsA2ASkill(toolName) {
		return Axes{Egress: true, Effect: EffectWrite, Irreversibility: IrreversiblePossible}
	}
	var a Axes
	if ann.GetDestructiveHint() {
		a = a.tighten(Axes{Effect: EffectWrite, Irreversibility: IrreversibleAlways})
	}
	return a
}

// ApplyAxisOverrides folds a caller's overrides (those naming this tool) into base.
// enforced only ever tightens base: a loosening value (egress=false on an A2A skill,
// irreversibility=never) is ignored for enforcement. reported carries the caller's
// values verbatim over base, loosening included: the caller's judgement is shown to
// the approver (the risk face of an approval request), never used to let a call pass.
// A value outside the vocabulary tightens its axis to the maximum in enforced.
func ApplyAxisOverrides(base Axes, overrides ...*agentplanev1.ToolAxisOverride) (enforced, reported Axes) {
	enforced, reported = base, base
	for _, o := range overrides {
		if o == nil {
			continue
		}
		if o.Egress != nil {
			reported.Egress = *o.Egress
			enforced.Egress = enforced.Egress || *o.Egress
		}
		if o.Effect != nil {
			e, ok := parseAxis(effectNames, *o.Effect)
			if ok {
				reported.Effect = Effect(e)
			} else {
				e = int(EffectWrite)
			}
			enforced.Effect = max(enforced.Effect, Effect(e))
		}
		if o.Irreversibility != nil {
			i, ok := parseAxis(irrevNames, *o.Irreversibility)
			if ok {
				reported.Irreversibility = Irreversibility(i)
			} else {
				i = int(IrreversibleAlways)
			}
			enforced.Irreversibility = max(enforced.Irreversibility, Irreversibility(i))
		}
	}
	return enforced, reported
}

func parseAxis(names []string, s string) (int, bool) {
	for i, n := range names {
		if n == s {
			return i, true
		}
	}
	return 0, false
}

// Reasons AlwaysGated gives, written as ToolGated.reason.
const (
	GatedA2a            = "a2a.always_gated"
	GatedMcpDestructive = "mcp.destructive_hint"
	GatedAxisOverride   = "axes.caller_override"
)

// AlwaysGatedReasons is every Gated* reason.
var AlwaysGatedReasons = []string{GatedA2a, GatedMcpDestructive, GatedAxisOverride}

// AlwaysGated decides whether a call to toolName must wait for a human whatever the
// interrupt policy says (so also on a deployment with no policy), and why. A2A skills
// always are; an MCP tool is when its destructiveHint is true or when the caller's
// overrides for it (tool_axes entries naming it) tighten its axes to Axes.Gated.
// Nothing here can un-gate a call: annotations and overrides only tighten.
func AlwaysGated(toolName string, ann *agentplanev1.McpToolAnnotations, overrides []*agentplanev1.ToolAxisOverride) (bool, string) {
	base := BaseAxes(toolName, ann)
	switch {
	case IsA2ASkill(toolName):
		return true, GatedA2a
	case base.Gated():
		return true, GatedMcpDestructive
	}
	var mine []*agentplanev1.ToolAxisOverride
	for _, o := range overrides {
		if o.GetTool() == toolName {
			mine = append(mine, o)
		}
	}
	if enforced, _ := ApplyAxisOverrides(base, mine...); enforced.Gated() {
		return true, GatedAxisOverride
	}
	return false, ""
}

// Bounds on tool_axes.
const (
	MaxToolAxes      = 256
	MaxToolNameBytes = 256
)

// AxisError refuses malformed tool_axes; the service layer maps it to
// INVALID_ARGUMENT (one field violation per Violation).
type AxisError struct {
	Violations []AxisViolation
}

// AxisViolation is one problem, at a request field path such as tool_axes[2].effect.
type AxisViolation struct {
	Field       string
	Description string
}

func (e *AxisError) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.Field + ": " + v.Description
	}
	return "invalid tool_axes: " + strings.Join(parts, "; ")
}

// ValidateToolAxes checks a request's overrides: at most MaxToolAxes, each naming a
// tool (at most MaxToolNameBytes, once), with effect and irreversibility from their
// vocabularies. It returns nil or an *AxisError naming every problem.
func ValidateToolAxes(axes []*agentplanev1.ToolAxisOverride) error {
	var e AxisError
	bad := func(field, format string, args ...any) {
		e.Violations = append(e.Violations, AxisViolation{Field: field, Description: fmt.Sprintf(format, args...)})
	}
	if len(axes) > MaxToolAxes {
		bad("tool_axes", "%d entries, at most %d", len(axes), MaxToolAxes)
		return &e
	}
	seen := map[string]int{}
	for i, o := range axes {
		path := fmt.Sprintf("tool_axes[%d]", i)
		switch tool := o.GetTool(); {
		case tool == "" || len(tool) > MaxToolNameBytes:
			bad(path+".tool", "a tool name of 1..%d bytes is required", MaxToolNameBytes)
		default:
			if j, dup := seen[tool]; dup {
				bad(path+".tool", "%q already has an override at tool_axes[%d]", tool, j)
			}
			seen[tool] = i
		}
		if o.Effect != nil {
			if _, ok := parseAxis(effectNames, *o.Effect); !ok {
				bad(path+".effect", "%q: want one of %s", *o.Effect, strings.Join(effectNames, ", "))
			}
		}
		if o.Irreversibility != nil {
			if _, ok := parseAxis(irrevNames, *o.Irreversibility); !ok {
				bad(path+".irreversibility", "%q: want one of %s", *o.Irreversibility, strings.Join(irrevNames, ", "))
			}
		}
	}
	if len(e.Violations) == 0 {
		return nil
	}
	return &e
}
