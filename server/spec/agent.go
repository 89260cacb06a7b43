package spec

import (
	"regexp"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	"google.golang.org/protobuf/types/known/structpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// toolNamePattern is the function-name pattern model APIs accept.
var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)

// agent applies the D10 rules to a at p. spawned says a is a spawnable agent's
// inline spec.
func (w *walker) agent(a *agentplanev1.AgentSpec, p *Path, spawned bool) {
	w.apiVersion(a.GetApiVersion(), p, RuleAgentAPIVersion)
	w.kind(a.GetKind(), KindAgent, p, RuleAgentKind)
	w.instructions(a.GetInstructions(), p.Child("instructions"))
	if strings.TrimSpace(a.GetModel()) == "" {
		w.errf(RuleModel, p.Child("model"), "model is required: the model identifier, non-empty")
	}
	declared := w.tools(a.GetTools(), p.Child("tools"))
	w.excludedTools(a.GetExcludedTools(), declared, p.Child("excluded_tools"))
	w.outputSchemas(a.GetOutputSchema(), a.GetDepsSchema(), p)
	w.skills(a.GetSkills(), p.Child("skills"))
	w.spawnable(a.GetSpawnableAgents(), p.Child("spawnable_agents"))
	if a.GetCustomCode() != nil && !isNull(a.GetCustomCode()) {
		w.errf(RuleCustomCode, p.Child("custom_code"), "custom_code is reserved and must be null or absent: sandboxed code execution is not available")
	}
	w.contentTrust(a.GetContentTrust(), p.Child("content_trust"))
	if spawned && a.GetAutoPauseOnTurnEnd() {
		w.errf(RuleUnsupportedSpawn, p.Child("auto_pause_on_turn_end"),
			"a spawned agent cannot run in chat mode: it has no user turn to pause for; remove auto_pause_on_turn_end")
	}
}

func isNull(v *structpb.Value) bool {
	_, ok := v.GetKind().(*structpb.Value_NullValue)
	return ok
}

func (w *walker) instructions(ins *agentplanev1.Instructions, p *Path) {
	switch src := ins.GetSource().(type) {
	case *agentplanev1.Instructions_Text:
		if strings.TrimSpace(src.Text) == "" {
			w.errf(RuleInstructions, p, "instructions text is empty; write the system instructions or use {preset: %q}", knownPresets[0])
		}
	case *agentplanev1.Instructions_Preset:
		switch preset := src.Preset.GetPreset(); {
		case preset == "":
			w.errf(RuleInstructionsPreset, p.Child("preset"), "preset is required; known presets: %s", oneOf(knownPresets))
		case !slices.Contains(knownPresets, preset):
			w.errf(RuleInstructionsPreset, p.Child("preset"), "unknown preset %q; known presets: %s", preset, oneOf(knownPresets))
		}
	default:
		w.errf(RuleInstructions, p, "instructions are required: text, or {preset: %q, append: ...}", knownPresets[0])
	}
}

// tools checks the tool list and returns the declared names (for excluded_tools).
func (w *walker) tools(tools []*agentplanev1.FunctionTool, p *Path) map[string]int {
	names := make(map[string]int, len(tools))
	for i, t := range tools {
		tp := p.Index(i)
		switch t.GetType() {
		case "function":
		case "":
			w.errf(RuleToolShape, tp.Child("type"), `type is required; set it to "function"`)
		default:
			w.errf(RuleToolShape, tp.Child("type"), `type must be "function", got %q`, t.GetType())
		}
		fn := t.GetFunction()
		if fn == nil {
			w.errf(RuleToolShape, tp.Child("function"), "function is required: {name, parameters, ...}")
			continue
		}
		fp := tp.Child("function")
		name := fn.GetName()
		switch {
		case !toolNamePattern.MatchString(name):
			w.errf(RuleToolName, fp.Child("name"), "tool name %q must be 1 to 64 letters, digits, '_', '-' or '.'", name)
		case name == VerdictToolName:
			w.errf(RuleToolReserved, fp.Child("name"), "the tool name %q is reserved: the control plane grants it to evaluator nodes; rename this tool", name)
		}
		if first, dup := names[name]; dup && name != "" {
			w.errf(RuleToolUnique, fp.Child("name"), "tool name %q is already declared by tools[%d]; tool names are unique", name, first)
		} else if !dup {
			names[name] = i
		}
		if fn.GetParameters() == nil {
			w.errf(RuleToolParameters, fp.Child("parameters"), "parameters is required: a JSON Schema with type object")
			continue
		}
		pp := fp.Child("parameters")
		if !w.schema(fn.GetParameters(), pp, RuleToolParameters) {
			continue
		}
		if !isObjectType(fn.GetParameters().GetFields()["type"], true) {
			w.errf(RuleToolParameters, pp.Child("type"), `a tool's parameters schema must have type "object"`)
			continue
		}
		if fn.Strict == nil || *fn.Strict {
			w.strictSchema(fn.GetParameters(), pp, RuleToolStrict, "this tool's parameters")
		}
	}
	return names
}

func (w *walker) excludedTools(excluded []string, declared map[string]int, p *Path) {
	for i, name := range excluded {
		ep := p.Index(i)
		if strings.TrimSpace(name) == "" {
			w.errf(RuleExcludedTools, ep, "excluded tool name is empty")
			continue
		}
		if j := slices.Index(excluded[:i], name); j >= 0 {
			w.errf(RuleExcludedTools, ep, "%q is already excluded by excluded_tools[%d]", name, j)
			continue
		}
		if t, ok := declared[name]; ok {
			w.warnf(WarnExcludedDeclared, ep, "%q is declared in tools[%d] and excluded here, so the declaration has no effect", name, t)
		}
	}
}

func (w *walker) skills(skills []*agentplanev1.SkillRef, p *Path) {
	seen := make(map[string]int, len(skills))
	for i, s := range skills {
		if s == nil {
			s = &agentplanev1.SkillRef{}
		}
		sp := p.Index(i)
		vendor := DefaultVendor
		if s.Vendor != nil {
			vendor = s.GetVendor()
			if strings.TrimSpace(vendor) == "" {
				w.errf(RuleSkillNamed, sp.Child("vendor"), "vendor is empty; leave it out for %q or name the vendor", DefaultVendor)
			}
		}
		if strings.TrimSpace(s.GetName()) == "" {
			w.errf(RuleSkillNamed, sp.Child("name"), "skill name is required")
		} else {
			key := vendor + "\x00" + s.GetName()
			if j, dup := seen[key]; dup {
				w.errf(RuleSkillUnique, sp.Child("name"), "skill %s/%s is already listed at skills[%d]", vendor, s.GetName(), j)
			} else {
				seen[key] = i
			}
		}
		if s.Version != nil && s.GetVersion() != "*" {
			if _, err := semver.NewConstraint(s.GetVersion()); err != nil || strings.TrimSpace(s.GetVersion()) == "" {
				w.errf(RuleSkillVersion, sp.Child("version"), "version %q is neither \"*\" nor a semver range (for example ^1.2 or >=1.0.0 <2.0.0)", s.GetVersion())
			}
		}
	}
}

func (w *walker) spawnable(refs []*agentplanev1.SpawnableAgentRef, p *Path) {
	seen := make(map[string]int, len(refs))
	for i, r := range refs {
		if r == nil {
			r = &agentplanev1.SpawnableAgentRef{}
		}
		rp := p.Index(i)
		name := r.GetName()
		if strings.TrimSpace(name) == "" {
			w.errf(RuleSpawnNamed, rp.Child("name"), "spawnable agent name is required")
		} else if j, dup := seen[name]; dup {
			w.errf(RuleSpawnNamed, rp.Child("name"), "spawnable agent name %q is already used by spawnable_agents[%d]", name, j)
		} else {
			seen[name] = i
		}
		hasID, hasSpec := r.AgentId != nil, r.GetSpec() != nil
		switch {
		case hasID && hasSpec:
			w.errf(RuleSpawnShape, rp, "give agent_id or spec, not both")
		case !hasID && !hasSpec:
			w.errf(RuleSpawnShape, rp, "give agent_id (a static agent) or spec (an inline AgentSpec)")
		case hasID && strings.TrimSpace(r.GetAgentId()) == "":
			w.errf(RuleSpawnShape, rp.Child("agent_id"), "agent_id is empty")
		case hasID && !w.staticKnown(r.GetAgentId()):
			w.errf(RuleUnsupportedSpawn, rp.Child("agent_id"), "this deployment cannot spawn %q: it is not in the static agent table (%s)", r.GetAgentId(), w.knownStatic())
		case hasSpec:
			w.agent(r.GetSpec(), rp.Child("spec"), true)
		}
	}
}
