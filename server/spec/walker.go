package spec

import (
	"fmt"
	"slices"
	"strings"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// walker applies the rules to one spec. It is used once, by one goroutine.
type walker struct {
	v *Validator
	// deployCap is min(platform, tenant) over the caps that are set; 0 means none.
	deployCap int64
	platform  int64
	tenant    int64
	// doc, when the input was a document, gives the order of graph nodes.
	doc   *Document
	errs  findings
	warns findings
}

func (v *Validator) newWalker(tenantMaxDepth int64) *walker {
	w := &walker{v: v, platform: v.d.PlatformMaxDepth, tenant: tenantMaxDepth}
	w.deployCap = minCap(w.platform, w.tenant)
	return w
}

// minCap is the smallest positive value of caps, or 0 when none is positive.
func minCap(caps ...int64) int64 {
	var out int64
	for _, c := range caps {
		if c > 0 && (out == 0 || c < out) {
			out = c
		}
	}
	return out
}

func (w *walker) errf(rule string, p *Path, format string, args ...any) {
	w.errs.add(rule, p, format, args...)
}

func (w *walker) warnf(rule string, p *Path, format string, args ...any) {
	w.warns.add(rule, p, format, args...)
}

// oneOf formats a closed set for a message: "a", "b" or "c".
func oneOf(set []string) string {
	q := make([]string, len(set))
	for i, s := range set {
		q[i] = fmt.Sprintf("%q", s)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// apiVersion checks apiVersion for the rule that owns it (D10-R2 or D11-R1).
func (w *walker) apiVersion(got string, p *Path, rule string) {
	switch got {
	case APIVersion:
	case "":
		w.errf(rule, p.Child("apiVersion"), "apiVersion is required; set it to %q", APIVersion)
	default:
		w.errf(RuleUnsupported, p.Child("apiVersion"), "apiVersion %q is not supported by this deployment; it runs %q", got, APIVersion)
	}
}

// kind checks kind for the rule that owns it (D10-R3 or D11-R2).
func (w *walker) kind(got, want string, p *Path, rule string) {
	switch got {
	case want:
	case "":
		w.errf(rule, p.Child("kind"), "kind is required; set it to %q", want)
	case KindAgent, KindGraph:
		w.errf(rule, p.Child("kind"), "kind must be %q here, got %q", want, got)
	default:
		w.errf(RuleUnsupported, p.Child("kind"), "kind %q is not a spec kind this deployment runs (%s)", got, oneOf([]string{KindAgent, KindGraph}))
	}
}

func (w *walker) staticKnown(id string) bool {
	_, ok := w.v.d.StaticAgents[id]
	return ok
}

// knownStatic lists the static agent ids for a message, capped so a large table does
// not flood it.
func (w *walker) knownStatic() string {
	ids := w.v.staticIDs
	if len(ids) == 0 {
		return "this deployment has no static agents"
	}
	more := ""
	if len(ids) > 10 {
		ids, more = ids[:10], fmt.Sprintf(", and %d more", len(ids)-10)
	}
	return "known: " + strings.Join(ids, ", ") + more
}

func (w *walker) contentTrust(ct *agentplanev1.ContentTrustPolicy, p *Path) {
	if ct == nil {
		return
	}
	modes := []struct {
		name string
		v    *string
	}{
		{"evaluator_rationale_policy", ct.EvaluatorRationalePolicy},
		{"hitl_reason_policy", ct.HitlReasonPolicy},
		{"tool_output_policy", ct.ToolOutputPolicy},
		{"bulletin_post_policy", ct.BulletinPostPolicy},
	}
	for _, m := range modes {
		if m.v != nil && !slices.Contains(trustModes, *m.v) {
			w.errf(RuleTrustMode, p.Child(m.name), "%s must be %s, got %q", m.name, oneOf(trustModes), *m.v)
		}
	}
	caps := []struct {
		name string
		v    *int32
	}{
		{"max_untrusted_bytes", ct.MaxUntrustedBytes},
		{"max_trusted_bytes", ct.MaxTrustedBytes},
	}
	for _, c := range caps {
		if c.v != nil && *c.v <= 0 {
			w.errf(RuleTrustBytes, p.Child(c.name), "%s must be a positive number of bytes, got %d", c.name, *c.v)
		}
	}
}

// namedSchema checks an output_schema.json_schema or deps_schema.
func (w *walker) namedSchema(s *agentplanev1.JsonSchemaSpec, p *Path) {
	if strings.TrimSpace(s.GetName()) == "" {
		w.errf(RuleSchemaNamed, p.Child("name"), "name is required: the schema's name, non-empty")
	}
	if s.GetSchema() == nil {
		w.errf(RuleSchemaNamed, p.Child("schema"), "schema is required: a JSON Schema object")
		return
	}
	strict := s.Strict == nil || *s.Strict
	if w.schema(s.GetSchema(), p.Child("schema"), RuleSchemaValid) && strict {
		w.strictSchema(s.GetSchema(), p.Child("schema"), RuleSchemaStrict, "the schema")
	}
}

func (w *walker) outputSchemas(out *agentplanev1.OutputSchemaSpec, deps *agentplanev1.JsonSchemaSpec, p *Path) {
	if out != nil {
		op := p.Child("output_schema")
		if out.GetJsonSchema() == nil {
			w.errf(RuleSchemaNamed, op.Child("json_schema"), "json_schema is required: {name, schema, strict}")
		} else {
			w.namedSchema(out.GetJsonSchema(), op.Child("json_schema"))
		}
	}
	if deps != nil {
		w.namedSchema(deps, p.Child("deps_schema"))
	}
}
