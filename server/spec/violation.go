package spec

import (
	"fmt"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// violation is a finding while it is being collected; it becomes a SpecViolation
// once positions are known.
type violation struct {
	rule string
	path string
	msg  string
	pos  pos // zero when unknown
}

func (v *violation) proto() *agentplanev1.SpecViolation {
	out := &agentplanev1.SpecViolation{RuleId: v.rule, Path: v.path, Message: v.msg}
	if v.pos.line > 0 {
		out.Position = &agentplanev1.SourcePosition{Line: v.pos.line, Column: v.pos.col}
	}
	return out
}

// list collects violations in the order they are found.
type findings []*violation

func (l *findings) add(rule string, p *Path, format string, args ...any) {
	*l = append(*l, &violation{rule: rule, path: p.String(), msg: fmt.Sprintf(format, args...)})
}

// FormatViolation renders a violation the way compilers print errors, for people and
// editors: "name:line:col: RULE_ID path: message". name is the document's name (for
// example a file name) and may be empty; the position is left out when unknown, and
// the root path is written as `""` so that the field is never blank.
func FormatViolation(name string, v *agentplanev1.SpecViolation) string {
	path := v.GetPath()
	if path == "" {
		path = `""`
	}
	prefix := name
	if p := v.GetPosition(); p != nil {
		prefix = fmt.Sprintf("%s:%d:%d", name, p.GetLine(), p.GetColumn())
	}
	if prefix != "" {
		prefix += ": "
	}
	return fmt.Sprintf("%s%s %s: %s", prefix, v.GetRuleId(), path, v.GetMessage())
}
