package spec

// Rule ids. The ids the wire vocabulary names (docs/vocabulary.md) keep their meaning; the rest follow the same
// scheme: D10 agent, D11 graph topology, D13 limits and nesting, DOC document syntax.
// -R ids are errors, -W ids are warnings. An id never changes meaning once published;
// a retired rule keeps its id reserved. The catalogue (rules.go) documents each one.
const (
	RuleDocSyntax     = "DOC-SYNTAX"
	RuleDocTooLarge   = "DOC-TOO-LARGE"
	RuleDocTooDeep    = "DOC-TOO-DEEP"
	RuleDocType       = "DOC-TYPE"
	RuleDocUnknownKey = "DOC-UNKNOWN-KEY"
	RuleDocSDKKey     = "DOC-SDK-KEY"
	RuleDocDuplicate  = "DOC-DUPLICATE-KEY"
	RuleDocYAML       = "DOC-YAML"

	RuleCustomCode         = "D10-R1"
	RuleAgentAPIVersion    = "D10-R2"
	RuleAgentKind          = "D10-R3"
	RuleInstructions       = "D10-R4"
	RuleInstructionsPreset = "D10-R5"
	RuleModel              = "D10-R6"
	RuleToolShape          = "D10-R7"
	RuleToolName           = "D10-R8"
	RuleToolUnique         = "D10-R9"
	RuleToolReserved       = "D10-R10"
	RuleToolParameters     = "D10-R11"
	RuleToolStrict         = "D10-R12"
	RuleExcludedTools      = "D10-R13"
	RuleSchemaNamed        = "D10-R14"
	RuleSchemaValid        = "D10-R15"
	RuleSchemaStrict       = "D10-R16"
	RuleSkillNamed         = "D10-R17"
	RuleSkillUnique        = "D10-R18"
	RuleSkillVersion       = "D10-R19"
	RuleSpawnNamed         = "D10-R20"
	RuleSpawnShape         = "D10-R21"
	RuleTrustMode          = "D10-R22"
	RuleTrustBytes         = "D10-R23"
	RuleUnsupported        = "D10-UNSUPPORTED"
	RuleUnsupportedSpawn   = "D10-UNSUPPORTED-SPAWN"
	WarnExcludedDeclared   = "D10-W1"

	RuleGraphAPIVersion     = "D11-R1"
	RuleGraphKind           = "D11-R2"
	RuleNodeUnique          = "D11-R3"
	RuleNodesNonEmpty       = "D11-R4"
	RuleNodeName            = "D11-R5"
	RuleEntry               = "D11-R6"
	RuleEntrySupervisor     = "D11-R7"
	RuleRole                = "D11-R8"
	RuleHITLMode            = "D11-R9"
	RuleNodeSpec            = "D11-R10"
	RuleStaticAgent         = "D11-R11"
	RuleVerdictConfidence   = "D11-R12"
	RuleVerdictValue        = "D11-R13"
	RuleVerdictRationale    = "D11-R14"
	RuleEdgeEnds            = "D11-R15"
	RuleEdgeKind            = "D11-R16"
	RuleEdgeUnique          = "D11-R17"
	RuleEvaluateTarget      = "D11-R18"
	RuleOnErrorShape        = "D11-R19"
	RuleOnErrorRoute        = "D11-R20"
	RuleTerminationNonEmpty = "D11-R21"
	RuleTerminationShape    = "D11-R22"
	RuleTerminationAgent    = "D11-R23"
	WarnUnreachable         = "D11-W1"
	WarnEvaluatorIdle       = "D11-W2"
	WarnEvaluatorEdgeKind   = "D11-W3"

	RuleLimitMin             = "D13-R1"
	RuleMaxDepthOverCap      = "D13-R2"
	RuleAllocationOverBudget = "D13-R3"
	RuleBudget               = "D13-R4"
	RuleParentClosePolicy    = "D13-R5"
	RuleNestingDepth         = "D13-R6"
	RuleAllocationPositive   = "D13-R7"
	WarnMaxStepsDefault      = "D13-W1"
)

// The wire vocabulary's fixed words.
const (
	// APIVersion is the only apiVersion this control plane runs.
	APIVersion = "qar/v1"
	// KindAgent is the kind of an inline agent document.
	KindAgent = "AgentSpec"
	// KindGraph is the kind of an inline graph document.
	KindGraph = "GraphSpec"
	// VerdictToolName is the reserved tool the control plane grants to evaluator nodes
	// (docs/vocabulary.md, Verdicts). A spec may not declare it.
	VerdictToolName = "verdict"
	// DefaultVendor is the skill vendor assumed when a skill names none.
	DefaultVendor = "qodo"
)

// Closed vocabularies. Widening one is an apiVersion change, not a patch.
var (
	knownPresets     = []string{"qodo-default"}
	roles            = []string{"supervisor", "collaborator", "evaluator"}
	hitlModes        = []string{"enabled", "passthrough", "disabled"}
	trustModes       = []string{"trusted", "untrusted"}
	edgeKinds        = []string{"handoff", "ai_tool", "evaluate"}
	terminationKinds = []string{"agent_returns", "max_steps_reached", "error_uncaught"}
	verdictValues    = []string{"pass", "fail", "needs_revision"}
)
