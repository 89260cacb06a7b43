// Package spec validates qar/v1 agent and graph specs: the typed proto messages that
// gRPC clients send and the JSON or YAML documents that files, the CLI and HTTP send.
// SpecService.ValidateSpec and TaskService.StartTask both call it, so a spec is held
// to exactly one set of rules wherever it enters.
//
// # Entry points
//
//   - NewValidator(Deployment).Validate(Input) checks one spec (typed or document) and
//     returns a Result with every violation at once; Result.Response is the API answer.
//   - Validator.Resolve turns a valid Result into the ResolvedSpec a runtime runs
//     (static agents inlined, the verdict tool granted to evaluator nodes).
//   - Decode and Encode convert between documents and the typed model; DocumentSchema
//     is a JSON Schema of the document format for editors.
//   - Rules, LookupRule: the rule catalogue; docs/rules.md is generated from it.
//   - CheckVerdict, CheckAllocation, ValidateArgs: checks for values that arrive after
//     a task has started (verdicts, subgraph allocations, edited tool arguments).
//   - LoadStaticAgents reads the deployment's static agent table from files.
//
// # Guarantees
//
//   - Every violation carries a stable rule id from the catalogue, an RFC 6901 JSON
//     pointer into the spec ("" is the root; a node named a/b is /agents/a~1b) and a
//     message that says what to do. Violations from documents carry a line and column.
//   - All violations are reported, not the first: document findings (syntax, types,
//     unknown, SDK-only and repeated keys) in text order, then rule findings in a fixed
//     walk order (fields in schema order, list elements by index, graph nodes in
//     document order, or by name for typed input).
//   - Typed input and its document (Encode) give identical results: the document is
//     decoded to the typed model and one walker applies the rules to both.
//   - Work is bounded: documents are limited in bytes, nesting and (YAML) alias
//     expansion, and anything outside the limits is a violation, never a panic.
//   - Schemas inside specs never make the control plane read a file or fetch a URL.
//   - Validators are immutable and safe for concurrent use.
//
// # Rule ids
//
// D10-* are agent rules, D11-* graph topology, D13-* limits and nesting, DOC-* the
// document syntax; -W ids are warnings, which do not invalidate a spec. The ids the wire
// vocabulary names (docs/vocabulary.md) keep their meaning (D10-R1 custom_code,
// D11-R3 unique node names, D11-R12 verdict confidence, D13-R2 max_depth over the
// cap, D13-R3 subgraph allocation, D13-R5 parent_close_policy). D10-UNSUPPORTED is a wire surface this
// deployment does not run (an apiVersion other than qar/v1, an unknown kind);
// D10-UNSUPPORTED-SPAWN a spawnable agent it cannot spawn (an agent_id outside the
// static table, or an inline spawnable spec asking for chat mode).
package spec
