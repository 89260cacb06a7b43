package spec

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Rule scopes: where a rule applies.
const (
	ScopeDocument   = "document"
	ScopeAgent      = "agent"
	ScopeGraph      = "graph"
	ScopeVerdict    = "verdict"
	ScopeAllocation = "allocation"
)

// rule is one catalogue entry. example is a document that breaks the rule under
// ExampleDeployment; for the verdict scope it is a VerdictResult in JSON, for the
// allocation scope {"allocation": SubgraphAllocation, "remaining": Budget}.
type rule struct {
	id, summary, description, scope, example string
	warning                                  bool
}

// ExampleDeployment is the deployment the catalogue's failing examples assume: a
// platform nesting cap of 3, one static agent "reviewer", documents up to 4 KiB and
// 32 levels deep.
func ExampleDeployment() Deployment {
	return Deployment{
		PlatformMaxDepth: 3,
		StaticAgents: map[string]*agentplanev1.AgentSpec{
			"reviewer": {
				ApiVersion:   APIVersion,
				Kind:         KindAgent,
				Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "Review the change."}},
				Model:        "gpt-4.1",
			},
		},
		MaxDocumentBytes: 4096,
		MaxNesting:       32,
	}
}

// catalogue is every rule, in id order (a test keeps it that way).
var catalogue = []rule{
	{
		id:      RuleCustomCode,
		scope:   ScopeAgent,
		summary: "custom_code must be null or absent",
		description: "custom_code is reserved for sandboxed code execution, which no runtime offers yet. " +
			"The key is accepted only as null so that documents written for later versions fail loudly " +
			"instead of silently running without their code. Remove the key.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
custom_code: {language: python, source: "print(1)"}
`,
	},
	{
		id:      RuleAgentAPIVersion,
		scope:   ScopeAgent,
		summary: "an agent declares apiVersion qar/v1",
		description: "apiVersion names the wire format the document is written in; without it the " +
			"control plane cannot know which rules apply. Add `apiVersion: qar/v1`. A version this " +
			"deployment does not run is D10-UNSUPPORTED.",
		example: `kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
`,
	},
	{
		id:      RuleAgentKind,
		scope:   ScopeAgent,
		summary: "an agent declares kind AgentSpec",
		description: "kind is the discriminator documents are routed on. The SDK may leave it out and " +
			"fill it in before sending, but on the wire it is required. Inside spawnable_agents only " +
			"an AgentSpec is allowed. An unknown kind is D10-UNSUPPORTED.",
		example: `apiVersion: qar/v1
instructions: Summarise the ticket.
model: gpt-4.1
`,
	},
	{
		id:      RuleInstructions,
		scope:   ScopeAgent,
		summary: "instructions are non-empty text or a preset",
		description: "instructions is either the system prompt as text (not blank) or an object " +
			"{preset, append} naming a server-side preset. One of the two is required.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: "   "
model: gpt-4.1
`,
	},
	{
		id:      RuleInstructionsPreset,
		scope:   ScopeAgent,
		summary: "an instructions preset is one the server knows",
		description: "A preset names instructions kept by the server; the known presets are " +
			"qodo-default. An unknown or empty name cannot be expanded. Use a known preset or write " +
			"the instructions as text.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: {preset: qodo-classic}
model: gpt-4.1
`,
	},
	{
		id:          RuleModel,
		scope:       ScopeAgent,
		summary:     "model is a non-empty model identifier",
		description: "Every agent names the model it runs on. Set model to a model identifier the runtime knows.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: ""
`,
	},
	{
		id:      RuleToolShape,
		scope:   ScopeAgent,
		summary: `a tool is {type: "function", function: {...}}`,
		description: "Tools use the function-tool shape models accept: type is \"function\" and " +
			"function holds the definition. Other tool types are not part of qar/v1.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
tools:
  - type: web_search
    function: {name: search, parameters: {type: object}, strict: false}
`,
	},
	{
		id:      RuleToolName,
		scope:   ScopeAgent,
		summary: "a tool name is 1-64 letters, digits, '_', '-' or '.'",
		description: "Model APIs refuse function names outside ^[a-zA-Z0-9_.-]{1,64}$; a spec with " +
			"such a name would fail only when the model is called. Rename the tool.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
tools:
  - type: function
    function: {name: "search the web", parameters: {type: object}, strict: false}
`,
	},
	{
		id:      RuleToolUnique,
		scope:   ScopeAgent,
		summary: "tool names are unique within an agent",
		description: "A model calls a tool by name, so two tools with one name make the call " +
			"ambiguous. The second declaration is reported; rename or remove it.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
tools:
  - {type: function, function: {name: search, parameters: {type: object}, strict: false}}
  - {type: function, function: {name: search, parameters: {type: object}, strict: false}}
`,
	},
	{
		id:      RuleToolReserved,
		scope:   ScopeAgent,
		summary: "the tool name verdict is reserved",
		description: "The control plane grants the verdict tool to evaluator nodes (docs/vocabulary.md, Verdicts) and " +
			"collects their decisions through it. A spec that declared it would send its model after " +
			"a tool whose calls are refused, or shadow the real one. Rename the tool.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
tools:
  - {type: function, function: {name: verdict, parameters: {type: object}, strict: false}}
`,
	},
	{
		id:      RuleToolParameters,
		scope:   ScopeAgent,
		summary: "a tool's parameters are a valid JSON Schema with type object",
		description: "parameters is required and must compile as a JSON Schema (draft 2020-12 unless " +
			"it names another draft with $schema), with type object at the root since tool arguments " +
			"are an object. External $refs are not followed. Findings point inside the schema.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
tools:
  - type: function
    function:
      name: search
      strict: false
      parameters: {type: object, properties: {q: {type: text}}}
`,
	},
	{
		id:      RuleToolStrict,
		scope:   ScopeAgent,
		summary: "strict tool parameters meet strict-mode rules",
		description: "strict defaults to true. A strict schema has type object at the root, and every " +
			"object schema in it sets additionalProperties: false and lists every property in " +
			"required (an optional property is written as nullable). Fix the schema or set " +
			"strict: false on the tool.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
tools:
  - type: function
    function:
      name: search
      parameters: {type: object, properties: {q: {type: string}}}
`,
	},
	{
		id:      RuleExcludedTools,
		scope:   ScopeAgent,
		summary: "excluded_tools entries are non-empty and not repeated",
		description: "excluded_tools removes tools by name from the agent's effective tool set. An " +
			"empty name excludes nothing and a repeated one is a copy-paste slip; remove it.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
excluded_tools: [shell, shell]
`,
	},
	{
		id:      RuleSchemaNamed,
		scope:   ScopeAgent,
		summary: "output_schema and deps_schema are named and hold a schema",
		description: "A structured-output or dependencies schema is {name, schema, strict}; " +
			"output_schema wraps it as {json_schema: ...}. name and schema are required. Applies to " +
			"agents and graphs.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
output_schema:
  json_schema: {schema: {type: object}, strict: false}
`,
	},
	{
		id:      RuleSchemaValid,
		scope:   ScopeAgent,
		summary: "output_schema and deps_schema hold a valid JSON Schema",
		description: "The schema must compile as a JSON Schema (draft 2020-12 unless it names another " +
			"draft). External $refs are not followed. Findings point inside the schema.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
deps_schema: {name: deps, schema: {type: object, required: id}, strict: false}
`,
	},
	{
		id:      RuleSchemaStrict,
		scope:   ScopeAgent,
		summary: "strict output_schema and deps_schema meet strict-mode rules",
		description: "strict defaults to true, and a strict schema follows the same rules as strict " +
			"tool parameters (D10-R12). Fix the schema or set strict: false.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
output_schema:
  json_schema:
    name: summary
    schema: {type: object, properties: {text: {type: string}}, required: [text]}
`,
	},
	{
		id:          RuleSkillNamed,
		scope:       ScopeAgent,
		summary:     "a skill names itself (and its vendor, when given)",
		description: "A skill reference needs a name; vendor defaults to qodo, but when given it must not be empty.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
skills: [{vendor: acme}]
`,
	},
	{
		id:      RuleSkillUnique,
		scope:   ScopeAgent,
		summary: "a skill appears once per vendor and name",
		description: "The lockfile resolves one version per vendor/name; listing a skill twice (the " +
			"default vendor counts as qodo) leaves it unclear which entry wins.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
skills: [{name: triage}, {vendor: qodo, name: triage, version: ^2}]
`,
	},
	{
		id:          RuleSkillVersion,
		scope:       ScopeAgent,
		summary:     `a skill version is "*" or a semver range`,
		description: "version is resolved against the deployment's lockfile: \"*\" (the default) or a semver range such as ^1.2, ~1.4.0 or >=1.0.0 <2.0.0.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
skills: [{name: triage, version: latest}]
`,
	},
	{
		id:          RuleSpawnNamed,
		scope:       ScopeAgent,
		summary:     "spawnable agents are named, with unique names",
		description: "An agent spawns a child by name, so each spawnable agent needs a name no other entry uses.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
spawnable_agents: [{name: helper, agent_id: reviewer}, {name: helper, agent_id: reviewer}]
`,
	},
	{
		id:          RuleSpawnShape,
		scope:       ScopeAgent,
		summary:     "a spawnable agent has agent_id or an inline spec, not both",
		description: "A spawnable agent is either a static agent (agent_id, non-empty) or an inline AgentSpec (spec), which is validated like any agent.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
spawnable_agents: [{name: helper}]
`,
	},
	{
		id:      RuleTrustMode,
		scope:   ScopeAgent,
		summary: "content-trust modes are trusted or untrusted",
		description: "Each *_policy field of content_trust says how a content source reaches the " +
			"model: trusted (verbatim) or untrusted (fenced and capped). Any other value would leave " +
			"the runtime guessing. Applies to agents and graphs.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
content_trust: {tool_output_policy: sanitized}
`,
	},
	{
		id:          RuleTrustBytes,
		scope:       ScopeAgent,
		summary:     "content-trust byte caps are positive",
		description: "max_untrusted_bytes and max_trusted_bytes cap one piece of content; zero or a negative cap is meaningless. Leave the field out for the deployment default.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
content_trust: {max_untrusted_bytes: 0}
`,
	},
	{
		id:      RuleUnsupported,
		scope:   ScopeAgent,
		summary: "the spec asks for a wire surface this deployment does not run",
		description: "Reported when a document names an apiVersion other than qar/v1, or a kind " +
			"other than AgentSpec and GraphSpec, at the top or in a graph node. Such a document may " +
			"be valid for another version of the format; this control plane cannot run it. Applies " +
			"to agents and graphs.",
		example: `apiVersion: qar/v2
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
`,
	},
	{
		id:      RuleUnsupportedSpawn,
		scope:   ScopeAgent,
		summary: "a spawnable agent is one this deployment can spawn",
		description: "Reported when a spawnable agent's agent_id is not in the deployment's static " +
			"agent table, or when an inline spawnable spec asks for chat mode " +
			"(auto_pause_on_turn_end: true): a spawned agent has no user turn to pause for, so the " +
			"deployment cannot run it as written.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
spawnable_agents: [{name: helper, agent_id: translator}]
`,
	},
	{
		id:      WarnExcludedDeclared,
		scope:   ScopeAgent,
		warning: true,
		summary: "a tool is both declared and excluded",
		description: "excluded_tools removes a tool the same spec declares in tools, so the " +
			"declaration has no effect. Usually one of the two is a leftover.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
tools: [{type: function, function: {name: search, parameters: {type: object}, strict: false}}]
excluded_tools: [search]
`,
	},
	{
		id:          RuleGraphAPIVersion,
		scope:       ScopeGraph,
		summary:     "a graph declares apiVersion qar/v1",
		description: "As D10-R2, for graphs (including nested graphs).",
		example: `kind: GraphSpec
agents: {lead: {role: supervisor, spec: {agent_id: reviewer}}}
entry: lead
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:          RuleGraphKind,
		scope:       ScopeGraph,
		summary:     "a graph declares kind GraphSpec",
		description: "As D10-R3, for graphs. A document without kind is routed by its keys (agents, entry, ...) so that its other findings are still useful.",
		example: `apiVersion: qar/v1
agents: {lead: {role: supervisor, spec: {agent_id: reviewer}}}
entry: lead
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:      RuleNodeUnique,
		scope:   ScopeGraph,
		summary: "node names are unique",
		description: "A node's name is its key under agents, and entry, edges and termination refer " +
			"to it. A document that repeats a key under agents defines two nodes with one name; the " +
			"first is used and the repeat is reported here.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents:
  lead: {role: supervisor, spec: {agent_id: reviewer}}
  lead: {role: collaborator, spec: {agent_id: reviewer}}
entry: lead
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:          RuleNodesNonEmpty,
		scope:       ScopeGraph,
		summary:     "a graph has at least one node",
		description: "agents must hold at least the supervisor the graph enters at.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents: {}
entry: lead
termination: [{kind: error_uncaught}]
`,
	},
	{
		id:      RuleNodeName,
		scope:   ScopeGraph,
		summary: "a node name is 1-64 letters, digits, '_', '-' or '.'",
		description: "Node names are referenced by entry, edges and termination, and an ai_tool edge " +
			"offers its target to the producer's model as a tool, so names follow the tool-name pattern.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents: {"lead writer": {role: supervisor, spec: {agent_id: reviewer}}}
entry: lead writer
termination: [{kind: error_uncaught}]
`,
	},
	{
		id:          RuleEntry,
		scope:       ScopeGraph,
		summary:     "entry names a node of the graph",
		description: "entry is required and must be the name of a node under agents.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents: {lead: {role: supervisor, spec: {agent_id: reviewer}}}
entry: leader
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:          RuleEntrySupervisor,
		scope:       ScopeGraph,
		summary:     "the entry node is a supervisor",
		description: "The graph starts at its entry node, which dispatches the others; only a supervisor does that.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents: {lead: {role: collaborator, spec: {agent_id: reviewer}}}
entry: lead
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:          RuleRole,
		scope:       ScopeGraph,
		summary:     "a node's role is supervisor, collaborator or evaluator",
		description: "role is required (it has no default) and the set is closed: widening it is an apiVersion change.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents: {lead: {role: manager, spec: {agent_id: reviewer}}}
entry: lead
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:          RuleHITLMode,
		scope:       ScopeGraph,
		summary:     "HITL modes are enabled, passthrough or disabled",
		description: "A node's hitl and the graph's hitl_default take one of the three modes. Leave a node's hitl out to inherit hitl_default (which is not the same as disabled).",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents: {lead: {role: supervisor, hitl: ask, spec: {agent_id: reviewer}}}
entry: lead
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:      RuleNodeSpec,
		scope:   ScopeGraph,
		summary: "a node's spec is an inline agent, a nested graph or {agent_id}",
		description: "spec is required. In a document it is routed on kind (AgentSpec or GraphSpec); " +
			"an object with only agent_id is a static reference.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents: {lead: {role: supervisor, spec: {}}}
entry: lead
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:          RuleStaticAgent,
		scope:       ScopeGraph,
		summary:     "a static agent_id is in the deployment's static agent table",
		description: "{agent_id} refers to an agent registered with the deployment (server config spec.static_agents). The message lists the known ids.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents: {lead: {role: supervisor, spec: {agent_id: planner}}}
entry: lead
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:      RuleVerdictConfidence,
		scope:   ScopeVerdict,
		summary: "a verdict's confidence is between 0 and 1",
		description: "confidence is optional; when given it is a probability-like score in [0, 1]. " +
			"Checked wherever a verdict arrives (CheckVerdict).",
		example: `{"verdict": "pass", "confidence": 1.5}`,
	},
	{
		id:          RuleVerdictValue,
		scope:       ScopeVerdict,
		summary:     "a verdict is pass, fail or needs_revision",
		description: "The supervisor's next turn branches on the verdict, so the set is closed and the value required.",
		example:     `{"verdict": "approved"}`,
	},
	{
		id:          RuleVerdictRationale,
		scope:       ScopeVerdict,
		summary:     "a verdict other than pass gives a rationale",
		description: "A reviewer that does not approve says why, so that the work can be fixed and the record read later.",
		example:     `{"verdict": "fail"}`,
	},
	{
		id:          RuleEdgeEnds,
		scope:       ScopeGraph,
		summary:     "an edge's from and to name nodes of the graph",
		description: "An edge is a spawn permission between two nodes of the same graph; both ends are required and must exist.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents: {lead: {role: supervisor, spec: {agent_id: reviewer}}}
edges: [{from: lead, to: writer, kind: handoff}]
entry: lead
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:          RuleEdgeKind,
		scope:       ScopeGraph,
		summary:     "an edge's kind is handoff, ai_tool or evaluate",
		description: "kind is required (no default) and the set is closed.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents:
  lead: {role: supervisor, spec: {agent_id: reviewer}}
  writer: {role: collaborator, spec: {agent_id: reviewer}}
edges: [{from: lead, to: writer, kind: call}]
entry: lead
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:          RuleEdgeUnique,
		scope:       ScopeGraph,
		summary:     "an edge is declared once",
		description: "Two edges with the same from, to and kind grant the same permission twice; the second one is reported.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents:
  lead: {role: supervisor, spec: {agent_id: reviewer}}
  writer: {role: collaborator, spec: {agent_id: reviewer}}
edges:
  - {from: lead, to: writer, kind: handoff}
  - {from: lead, to: writer, kind: handoff}
entry: lead
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:          RuleEvaluateTarget,
		scope:       ScopeGraph,
		summary:     "an evaluate edge targets an evaluator",
		description: "An evaluate edge binds the target's verdict to the producer, and only evaluators give verdicts.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents:
  lead: {role: supervisor, spec: {agent_id: reviewer}}
  writer: {role: collaborator, spec: {agent_id: reviewer}}
edges: [{from: lead, to: writer, kind: evaluate}]
entry: lead
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:      RuleOnErrorShape,
		scope:   ScopeGraph,
		summary: "on_error is {abort: true} or {route_to: node}",
		description: "Exactly one of the two shapes; abort, when given, is true (to not abort, route " +
			"the error or leave on_error out).",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents:
  lead: {role: supervisor, spec: {agent_id: reviewer}}
  writer: {role: collaborator, spec: {agent_id: reviewer}}
edges: [{from: lead, to: writer, kind: handoff, on_error: {abort: true, route_to: lead}}]
entry: lead
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:          RuleOnErrorRoute,
		scope:       ScopeGraph,
		summary:     "on_error.route_to names a node of the graph",
		description: "A routed error goes to a recovery node, which must exist.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents:
  lead: {role: supervisor, spec: {agent_id: reviewer}}
  writer: {role: collaborator, spec: {agent_id: reviewer}}
edges: [{from: lead, to: writer, kind: handoff, on_error: {route_to: fixer}}]
entry: lead
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:          RuleTerminationNonEmpty,
		scope:       ScopeGraph,
		summary:     "a graph has at least one termination condition",
		description: "termination says when the graph is done; a graph without one has no defined end.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents: {lead: {role: supervisor, spec: {agent_id: reviewer}}}
entry: lead
termination: []
`,
	},
	{
		id:      RuleTerminationShape,
		scope:   ScopeGraph,
		summary: "a termination condition is well formed",
		description: "kind is agent_returns (with agent), max_steps_reached or error_uncaught (without " +
			"agent).",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents: {lead: {role: supervisor, spec: {agent_id: reviewer}}}
entry: lead
termination: [{kind: agent_returns}]
`,
	},
	{
		id:          RuleTerminationAgent,
		scope:       ScopeGraph,
		summary:     "agent_returns names a node of the graph",
		description: "The graph ends when the named node returns, so the node must exist.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents: {lead: {role: supervisor, spec: {agent_id: reviewer}}}
entry: lead
termination: [{kind: agent_returns, agent: writer}]
`,
	},
	{
		id:          WarnUnreachable,
		scope:       ScopeGraph,
		warning:     true,
		summary:     "a node is reachable from entry",
		description: "A node no chain of edges (or on_error routes) leads to from the entry node never runs. Usually an edge is missing.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents:
  lead: {role: supervisor, spec: {agent_id: reviewer}}
  writer: {role: collaborator, spec: {agent_id: reviewer}}
entry: lead
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:          WarnEvaluatorIdle,
		scope:       ScopeGraph,
		warning:     true,
		summary:     "an evaluator is dispatched by an evaluate edge",
		description: "An evaluator's verdict is collected through an evaluate edge; an evaluator that no evaluate edge targets is never asked for one.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents:
  lead: {role: supervisor, spec: {agent_id: reviewer}}
  judge: {role: evaluator, spec: {agent_id: reviewer}}
edges: [{from: lead, to: judge, kind: handoff}]
entry: lead
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:          WarnEvaluatorEdgeKind,
		scope:       ScopeGraph,
		warning:     true,
		summary:     "an evaluator is reached by an evaluate edge, not handoff or ai_tool",
		description: "A handoff or ai_tool edge into an evaluator runs it without collecting its verdict. Use kind evaluate.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents:
  lead: {role: supervisor, spec: {agent_id: reviewer}}
  judge: {role: evaluator, spec: {agent_id: reviewer}}
edges: [{from: lead, to: judge, kind: ai_tool}, {from: lead, to: judge, kind: evaluate}]
entry: lead
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:          RuleLimitMin,
		scope:       ScopeGraph,
		summary:     "limits are at least 1",
		description: "max_steps, max_depth and per_agent_iterations, when given, are integers >= 1. Leave a field out for the deployment default.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents: {lead: {role: supervisor, spec: {agent_id: reviewer}}}
entry: lead
limits: {max_steps: 0}
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:      RuleMaxDepthOverCap,
		scope:   ScopeGraph,
		summary: "a declared max_depth is within the deployment's cap",
		description: "The nesting cap in effect is min(platform, tenant, max_depth). A max_depth over " +
			"the deployment's cap (platform and tenant) promises nesting the deployment will not " +
			"allow; lower it.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents: {lead: {role: supervisor, spec: {agent_id: reviewer}}}
entry: lead
limits: {max_depth: 5}
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:      RuleAllocationOverBudget,
		scope:   ScopeAllocation,
		summary: "a subgraph allocation fits in the outer graph's remaining budget",
		description: "When a supervisor dispatches a subgraph it may hand over an allocation; no " +
			"field may exceed what the outer graph has left. Checked at dispatch (CheckAllocation).",
		example: `{"allocation": {"input_tokens": 50000}, "remaining": {"input_tokens": 10000, "output_tokens": 5000, "wall_clock_s": 60, "max_steps": 10}}`,
	},
	{
		id:          RuleBudget,
		scope:       ScopeGraph,
		summary:     "a budget sets every field, each greater than 0",
		description: "A graph budget is all-or-nothing: total_input_tokens, total_output_tokens and total_wall_clock_s are all required and positive.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents: {lead: {role: supervisor, spec: {agent_id: reviewer}}}
entry: lead
limits: {budget: {total_input_tokens: 100000, total_output_tokens: 20000}}
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:          RuleParentClosePolicy,
		scope:       ScopeGraph,
		summary:     "parent_close_policy must be null or absent",
		description: "parent_close_policy is reserved until the semantics of closing a parent with running children are designed. Remove the key.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents: {lead: {role: supervisor, spec: {agent_id: reviewer}}}
entry: lead
parent_close_policy: terminate
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:      RuleNestingDepth,
		scope:   ScopeGraph,
		summary: "nested graphs stay within the effective nesting cap",
		description: "The top-level graph is depth 1 and each nested graph one more. A graph's " +
			"max_depth caps the levels of its own subtree; the platform and tenant caps apply from the " +
			"top. The first nested graph over the cap is reported.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents:
  lead:
    role: supervisor
    spec:
      apiVersion: qar/v1
      kind: GraphSpec
      agents: {inner: {role: supervisor, spec: {agent_id: reviewer}}}
      entry: inner
      termination: [{kind: agent_returns, agent: inner}]
entry: lead
limits: {max_depth: 1}
termination: [{kind: agent_returns, agent: lead}]
`,
	},
	{
		id:          RuleAllocationPositive,
		scope:       ScopeAllocation,
		summary:     "subgraph allocation values are positive",
		description: "An allocation field that is given is greater than 0; leave it out to take min(inner declared, outer remaining).",
		example:     `{"allocation": {"max_steps": 0}, "remaining": {"input_tokens": 10000, "output_tokens": 5000, "wall_clock_s": 60, "max_steps": 10}}`,
	},
	{
		id:          WarnMaxStepsDefault,
		scope:       ScopeGraph,
		warning:     true,
		summary:     "max_steps_reached has a declared max_steps",
		description: "A max_steps_reached condition fires at limits.max_steps; without one the deployment default decides when the graph ends.",
		example: `apiVersion: qar/v1
kind: GraphSpec
agents: {lead: {role: supervisor, spec: {agent_id: reviewer}}}
entry: lead
termination: [{kind: max_steps_reached}]
`,
	},
	{
		id:      RuleDocDuplicate,
		scope:   ScopeDocument,
		summary: "an object does not repeat a key",
		description: "JSON and YAML parsers disagree on what a repeated key means (most keep the " +
			"last, silently). The first occurrence is used and each repeat reported. Under a graph's " +
			"agents a repeat is D11-R3.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
model: gpt-4.1-mini
`,
	},
	{
		id:      RuleDocSDKKey,
		scope:   ScopeDocument,
		summary: "SDK-only keys do not cross the wire",
		description: "mcpTools and mcpToolOverrides are resolved by the SDK into tools[] before a " +
			"spec is sent. Arriving on the wire they mean a client skipped that step: send the " +
			"projected tools instead.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
mcpTools: [github]
`,
	},
	{
		id:          RuleDocSyntax,
		scope:       ScopeDocument,
		summary:     "the document is well-formed JSON or YAML",
		description: "A document that does not parse (or is empty, or not UTF-8) is reported at the line and column where parsing stopped; nothing else is checked.",
		example:     `{"apiVersion": "qar/v1", "kind": "AgentSpec",}`,
	},
	{
		id:      RuleDocTooDeep,
		scope:   ScopeDocument,
		summary: "the document nests no deeper than the deployment's limit",
		description: "Objects and arrays nest at most the deployment's limit (64 by default; the " +
			"examples assume 32). Deeper input is refused before it is fully read, so validation work " +
			"stays bounded.",
		example: `{"apiVersion": "qar/v1", "kind": "AgentSpec", "custom_code": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
	},
	{
		id:      RuleDocTooLarge,
		scope:   ScopeDocument,
		summary: "the document is no larger than the deployment's limit",
		description: "Documents are at most the deployment's size limit (1 MiB by default; the " +
			"examples assume 4 KiB), and hold at most one value per 64 bytes of that limit (at least " +
			"1024), YAML aliases expanded. The value count is bounded from a scan of the document's " +
			"structural characters before it is parsed, so a dense document costs a scan, not a tree. " +
			"The API answers such a document as RESOURCE_EXHAUSTED LIMIT_EXCEEDED (with this finding " +
			"attached), not as an invalid spec.",
		example: `a: &a [x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
`,
	},
	{
		id:      RuleDocType,
		scope:   ScopeDocument,
		summary: "each value has the type the wire format gives it",
		description: "A string where a string is expected, an integer for counts, an object for " +
			"objects, and so on; null means absent. The document itself is an object. In YAML, quote " +
			"a value such as 1.0 to make it a string.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: 4
`,
	},
	{
		id:      RuleDocUnknownKey,
		scope:   ScopeDocument,
		summary: "objects hold only the keys of the wire format",
		description: "The wire format forbids extra keys, so a misspelt optional field is caught " +
			"instead of ignored. The message suggests the key that was probably meant.",
		example: `apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
model: gpt-4.1
output_shema: {json_schema: {name: out, schema: {type: object}}}
`,
	},
	{
		id:      RuleDocYAML,
		scope:   ScopeDocument,
		summary: "YAML stays within the JSON data model",
		description: "A spec is JSON data, whatever its syntax: merge keys (<<), complex keys, custom " +
			"tags, .inf and .nan, and several documents in one file have no JSON equivalent and are " +
			"refused where they occur.",
		example: `base: &base {model: gpt-4.1}
apiVersion: qar/v1
kind: AgentSpec
instructions: Summarise the ticket.
<<: *base
`,
	},
}

var ruleIndex = func() map[string]*rule {
	m := make(map[string]*rule, len(catalogue))
	for i := range catalogue {
		m[catalogue[i].id] = &catalogue[i]
	}
	return m
}()

func (r *rule) proto() *agentplanev1.Rule {
	sev := agentplanev1.RuleSeverity_RULE_SEVERITY_ERROR
	if r.warning {
		sev = agentplanev1.RuleSeverity_RULE_SEVERITY_WARNING
	}
	return &agentplanev1.Rule{
		RuleId:         r.id,
		Summary:        r.summary,
		Description:    r.description,
		Severity:       sev,
		FailingExample: r.example,
		Scope:          r.scope,
	}
}

// Rules returns the rule catalogue in id order (see CompareRuleIDs). The messages
// are new copies; callers may keep or modify them.
func Rules() []*agentplanev1.Rule {
	out := make([]*agentplanev1.Rule, len(catalogue))
	for i := range catalogue {
		out[i] = catalogue[i].proto()
	}
	return out
}

// LookupRule returns the catalogue entry for id (a new copy), or false.
func LookupRule(id string) (*agentplanev1.Rule, bool) {
	r, ok := ruleIndex[id]
	if !ok {
		return nil, false
	}
	return proto.CloneOf(r.proto()), true
}

// CompareRuleIDs orders rule ids the way the catalogue lists them: by family (D10,
// D11, D13, then DOC); within a family errors (-R) by number, then named ids (such as
// -UNSUPPORTED), then warnings (-W) by number; DOC ids alphabetically. ListRules
// pages in this order.
func CompareRuleIDs(a, b string) int {
	ka, kb := ruleSortKey(a), ruleSortKey(b)
	return cmp.Or(
		strings.Compare(ka.family, kb.family),
		cmp.Compare(ka.class, kb.class),
		cmp.Compare(ka.num, kb.num),
		strings.Compare(ka.name, kb.name),
	)
}

type sortKey struct {
	family string
	class  int // 1 errors, 2 named, 3 warnings
	num    int
	name   string
}

func ruleSortKey(id string) sortKey {
	family, rest, _ := strings.Cut(id, "-")
	if family == "DOC" {
		return sortKey{family: "~DOC", class: 2, name: rest} // '~' sorts after digits and letters
	}
	for _, c := range []struct {
		prefix string
		class  int
	}{{"R", 1}, {"W", 3}} {
		if n, err := strconv.Atoi(strings.TrimPrefix(rest, c.prefix)); err == nil && strings.HasPrefix(rest, c.prefix) {
			return sortKey{family: family, class: c.class, num: n}
		}
	}
	return sortKey{family: family, class: 2, name: rest}
}

// catalogueSorted reports whether the catalogue is in CompareRuleIDs order.
func catalogueSorted() bool {
	return slices.IsSortedFunc(catalogue, func(a, b rule) int { return CompareRuleIDs(a.id, b.id) })
}
