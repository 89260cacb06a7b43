package spec

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

// Deployment is what validation knows about the deployment it runs in.
type Deployment struct {
	// PlatformMaxDepth is the platform's graph nesting cap; 0 means none.
	PlatformMaxDepth int64
	// StaticAgents is the static agent table: agent_id -> spec. The specs are used
	// as they are (LoadStaticAgents validates them); the map is not modified.
	StaticAgents map[string]*agentplanev1.AgentSpec
	// MaxDocumentBytes and MaxNesting bound document decoding; 0 selects
	// DefaultMaxDocumentBytes and DefaultMaxNesting. Typed specs are not measured
	// here (proto.Size would double the cost of validating one): the transport bounds
	// them, so set the gRPC server's MaxRecvMsgSize from the same configuration.
	MaxDocumentBytes int64
	MaxNesting       int
}

func (d Deployment) limits() Limits {
	return Limits{MaxDocumentBytes: d.MaxDocumentBytes, MaxNesting: d.MaxNesting}.withDefaults()
}

// Validator checks specs against the rule catalogue for one deployment. It is
// immutable and safe for concurrent use.
type Validator struct {
	d   Deployment
	lim Limits
	// staticIDs is the sorted static agent ids, for messages.
	staticIDs []string
}

// NewValidator returns a Validator for d.
func NewValidator(d Deployment) *Validator {
	ids := make([]string, 0, len(d.StaticAgents))
	for id := range d.StaticAgents {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return &Validator{d: d, lim: d.limits(), staticIDs: ids}
}

// DecodeWeight estimates what decoding in's document costs, in bytes, for callers
// that bound the documents decoded at once: its size, or for a dense document the
// size limit's share per value (MaxDocumentBytes/MaxValues) times the values its
// tokens may make, from the scan Decode refuses over-budget documents with. A YAML
// document whose lexer may run up to the scan's slack weighs up to twice the size
// limit; a document the scan refuses weighs its size (the scan is all it costs).
// A SpecJSON object weighs its encoded size (proto.Size, close to the JSON it is
// validated as). 0 for typed input. It costs one pass over the bytes.
func (v *Validator) DecodeWeight(in Input) int64 {
	if in.SpecJSON != nil {
		return int64(proto.Size(in.SpecJSON))
	}
	if len(in.Document) == 0 {
		return 0
	}
	format := in.Format
	if format == agentplanev1.DocumentFormat_DOCUMENT_FORMAT_UNSPECIFIED {
		format = DetectFormat(in.Document)
	}
	var values int
	if format == agentplanev1.DocumentFormat_DOCUMENT_FORMAT_JSON {
		if values, _, _ = countJSON(in.Document); values > v.lim.MaxValues {
			values = 0
		}
	} else {
		if n := yamlTokenBound(in.Document); n <= yamlScanSlack*yamlTokensPerValue*v.lim.MaxValues {
			values = n / yamlTokensPerValue
		}
	}
	return max(int64(len(in.Document)), int64(values)*(v.lim.MaxDocumentBytes/int64(v.lim.MaxValues)))
}

// Input is one thing to validate: exactly one of Agent, Graph, Document or SpecJSON.
type Input struct {
	Agent *agentplanev1.AgentSpec
	Graph *agentplanev1.GraphSpec
	// Document is a qar/v1 document, JSON or YAML, routed on its kind.
	Document []byte
	// SpecJSON is a qar/v1 document as a JSON object (the requests' spec). It is
	// validated as its canonical JSON encoding (Encode: keys sorted), like a document,
	// so its violations come in key order, and carry no position: there is no text to
	// point into.
	SpecJSON *structpb.Struct
	// Format is the syntax of Document; unspecified detects it (see DetectFormat).
	Format agentplanev1.DocumentFormat
	// DocumentName names the document in messages (a file name); optional.
	DocumentName string
	// TenantMaxDepth is the calling tenant's nesting cap; 0 means none.
	TenantMaxDepth int64
}

// InputFromRequest maps a ValidateSpecRequest to an Input.
func InputFromRequest(r *agentplanev1.ValidateSpecRequest) Input {
	return Input{
		Document:       r.GetDocument(),
		SpecJSON:       r.GetSpec(),
		Format:         r.GetFormat(),
		DocumentName:   r.GetDocumentName(),
		TenantMaxDepth: int64(r.GetTenantMaxDepth()),
	}
}

// Result is the outcome of validating one spec.
type Result struct {
	// Kind is KindAgent or KindGraph, or "" when a document could not be decoded.
	Kind string
	// Agent or Graph is the typed spec (for a document, as far as it decoded). It is
	// the caller's input for typed input; treat it as read-only.
	Agent *agentplanev1.AgentSpec
	Graph *agentplanev1.GraphSpec
	// Errors invalidate the spec. For a document, all findings (syntax, types, keys
	// and rules) are in text order, by the position each is reported at; findings at
	// the same place keep the walk order. Typed input has no text: its findings are in
	// a fixed walk order: fields in schema order, list elements by index, graph nodes
	// by name (the order of the canonical encoding).
	Errors []*agentplanev1.SpecViolation
	// Warnings do not invalidate the spec.
	Warnings []*agentplanev1.SpecViolation
}

// Valid reports whether the spec has no errors.
func (r *Result) Valid() bool { return len(r.Errors) == 0 }

// OverLimit returns the finding of a document that was refused for its size (bytes,
// values or alias expansion: DOC-TOO-LARGE), or nil. Nothing else was checked in such
// a document; the server answers it as LIMIT_EXCEEDED rather than as an invalid spec.
func (r *Result) OverLimit() *agentplanev1.SpecViolation {
	for _, e := range r.Errors {
		if e.GetRuleId() == RuleDocTooLarge {
			return e
		}
	}
	return nil
}

// Response renders the result as the API response (the wire's validation result, docs/vocabulary.md
// plus warnings and kind).
func (r *Result) Response() *agentplanev1.ValidateSpecResponse {
	return &agentplanev1.ValidateSpecResponse{
		Valid:    proto.Bool(r.Valid()),
		Errors:   r.Errors,
		Warnings: r.Warnings,
		Kind:     r.Kind,
	}
}

// Validate checks one spec and reports every violation. An invalid spec is a
// Result, not an error; the error is for input that is not a spec at all (none or
// more than one of Agent, Graph, Document and SpecJSON), an InvalidArgument apierr.
func (v *Validator) Validate(in Input) (*Result, error) {
	given := 0
	for _, set := range []bool{in.Agent != nil, in.Graph != nil, len(in.Document) > 0, in.SpecJSON != nil} {
		if set {
			given++
		}
	}
	if given != 1 {
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument,
			"give exactly one of spec or document (got %d)", given)
	}
	if in.SpecJSON != nil {
		return v.validateSpecJSON(in)
	}
	w := v.newWalker(in.TenantMaxDepth)
	res := &Result{}
	switch {
	case in.Agent != nil:
		res.Kind, res.Agent = KindAgent, in.Agent
		w.agent(in.Agent, nil, false)
	case in.Graph != nil:
		res.Kind, res.Graph = KindGraph, in.Graph
		w.rootGraph(in.Graph, nil)
	default:
		return v.validateDocument(in, w), nil
	}
	res.Errors = protos(w.errs)
	res.Warnings = protos(w.warns)
	return res, nil
}

func (v *Validator) validateDocument(in Input, w *walker) *Result {
	doc := Decode(in.Document, in.Format, v.lim)
	res := &Result{Kind: doc.Kind, Agent: doc.Agent, Graph: doc.Graph}
	w.doc = doc
	switch {
	case doc.Agent != nil:
		w.agent(doc.Agent, nil, false)
	case doc.Graph != nil:
		w.rootGraph(doc.Graph, nil)
	}
	// A value the decoder rejected (wrong type) is absent to the rules; one finding
	// per place is enough, so rule findings at or under it are dropped.
	var rejected []string
	for _, f := range doc.found {
		if f.rule == RuleDocType || f.rule == RuleDocYAML {
			rejected = append(rejected, f.path)
		}
	}
	keep := func(l findings) findings {
		out := l[:0]
		for _, f := range l {
			if !under(f.path, rejected) {
				f.pos, _ = doc.root.lookup(f.path)
				out = append(out, f)
			}
		}
		return out
	}
	res.Errors = protos(inTextOrder(append(slices.Clone(doc.found), keep(w.errs)...)))
	res.Warnings = protos(inTextOrder(keep(w.warns)))
	return res
}

// validateSpecJSON validates a JSON-object spec as the document of its canonical
// encoding, without positions.
func (v *Validator) validateSpecJSON(in Input) (*Result, error) {
	data, err := Encode(in.SpecJSON)
	if err != nil {
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "spec: %v", err)
	}
	in.SpecJSON, in.Document, in.Format = nil, data, agentplanev1.DocumentFormat_DOCUMENT_FORMAT_JSON
	res := v.validateDocument(in, v.newWalker(in.TenantMaxDepth))
	for _, l := range [][]*agentplanev1.SpecViolation{res.Errors, res.Warnings} {
		for _, e := range l {
			e.Position = nil
		}
	}
	return res, nil
}

// inTextOrder sorts a document's findings by position, keeping the walk order of
// findings at the same place (the API promises violations in document order).
func inTextOrder(l findings) findings {
	slices.SortStableFunc(l, func(a, b *violation) int {
		if a.pos.line != b.pos.line {
			return int(a.pos.line - b.pos.line)
		}
		return int(a.pos.col - b.pos.col)
	})
	return l
}

// under reports whether path is one of roots or inside one of them.
func under(path string, roots []string) bool {
	for _, r := range roots {
		if path == r || (strings.HasPrefix(path, r) && path[len(r)] == '/') {
			return true
		}
	}
	return false
}

func protos(l findings) []*agentplanev1.SpecViolation {
	if len(l) == 0 {
		return nil
	}
	out := make([]*agentplanev1.SpecViolation, len(l))
	for i, f := range l {
		out[i] = f.proto()
	}
	return out
}
