package spec

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/api/specwire"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Default document limits, used when a Limits field is zero.
const (
	DefaultMaxDocumentBytes = 1 << 20
	DefaultMaxNesting       = 64
	// DefaultValueBytes derives the default value budget from the size limit: one
	// value per this many bytes (never fewer than MinMaxValues values).
	DefaultValueBytes = 64
	MinMaxValues      = 1024
)

// Limits bound the work of decoding one document.
type Limits struct {
	// MaxDocumentBytes is the largest document accepted. A YAML document may not
	// expand (through aliases) to more values than this either.
	MaxDocumentBytes int64
	// MaxNesting is the deepest nesting of objects and arrays accepted; the root
	// object is level 1.
	MaxNesting int
	// MaxValues bounds the values (objects, arrays and scalars, YAML aliases
	// expanded) of one document. It is checked before the parser builds anything,
	// from a count of the document's structural characters, so that a dense document
	// (a list of a million one-letter scalars) costs a scan, not a tree. 0 derives it
	// from MaxDocumentBytes (one value per DefaultValueBytes bytes).
	MaxValues int
}

func (l Limits) withDefaults() Limits {
	if l.MaxDocumentBytes <= 0 {
		l.MaxDocumentBytes = DefaultMaxDocumentBytes
	}
	if l.MaxNesting <= 0 {
		l.MaxNesting = DefaultMaxNesting
	}
	if l.MaxValues <= 0 {
		l.MaxValues = int(max(l.MaxDocumentBytes/DefaultValueBytes, MinMaxValues))
	}
	return l
}

// Document is a decoded spec document: the typed spec it holds, what was wrong with
// it as a document, and where each of its values is.
type Document struct {
	// Kind is the kind the document was routed on: KindAgent or KindGraph, or "" when
	// nothing could be decoded (syntax error, limit, not an object).
	Kind string
	// Agent or Graph is the typed spec, as far as it could be decoded. Values that had
	// the wrong type, unknown keys and repeated keys are left out (a list element is
	// kept as a zero value so later elements keep their indices).
	Agent *agentplanev1.AgentSpec
	Graph *agentplanev1.GraphSpec

	root  *node
	found findings
	// order records the key order of every graph's agents.
	order map[*agentplanev1.GraphSpec][]string
}

// Violations returns what was wrong with the document as a document (syntax, types,
// keys, limits), in document order, with positions.
func (d *Document) Violations() []*agentplanev1.SpecViolation {
	out := make([]*agentplanev1.SpecViolation, len(d.found))
	for i, v := range d.found {
		out[i] = v.proto()
	}
	return out
}

// Position returns the 1-based line and column of the value at the RFC 6901 pointer
// ptr, or of its nearest ancestor present in the document (so a missing required
// field is located at the object that lacks it). An object member is located at its
// key. ok is false when the document has no tree or ptr is not a pointer.
func (d *Document) Position(ptr string) (line, column int, ok bool) {
	p, ok := d.root.lookup(ptr)
	return int(p.line), int(p.col), ok
}

// nodeOrder returns the agents of g in document order.
func (d *Document) nodeOrder(g *agentplanev1.GraphSpec) []string {
	if d == nil {
		return nil
	}
	return d.order[g]
}

// Decode decodes a qar/v1 document (JSON or YAML) into the typed model, routing on
// its kind. It never fails: everything wrong with the input is a violation in the
// returned Document, and work is bounded by lim (size, nesting, alias expansion).
// The decoder checks the document's shape only; Validator.Validate applies the rules.
func Decode(data []byte, format agentplanev1.DocumentFormat, lim Limits) *Document {
	lim = lim.withDefaults()
	d := &Document{}
	stop := func(e *parseError) *Document {
		d.found = append(d.found, &violation{rule: e.rule, msg: e.msg, pos: e.pos})
		return d
	}
	if int64(len(data)) > lim.MaxDocumentBytes {
		return stop(&parseError{rule: RuleDocTooLarge, pos: pos{1, 1},
			msg: fmt.Sprintf("the document is %d bytes, over this deployment's limit of %d bytes", len(data), lim.MaxDocumentBytes)})
	}
	if !utf8.Valid(data) {
		off := 0
		for off < len(data) {
			r, n := utf8.DecodeRune(data[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		line := 1 + bytes.Count(data[:off], []byte("\n"))
		col := 1 + utf8.RuneCount(data[bytes.LastIndexByte(data[:off], '\n')+1:off])
		return stop(&parseError{rule: RuleDocSyntax, pos: pos{int32(line), int32(col)}, msg: "the document is not valid UTF-8"})
	}
	if format == agentplanev1.DocumentFormat_DOCUMENT_FORMAT_UNSPECIFIED {
		format = DetectFormat(data)
	}
	if format != agentplanev1.DocumentFormat_DOCUMENT_FORMAT_JSON {
		if e := yamlNonPrintable(data); e != nil {
			return stop(e)
		}
	}
	var root *node
	var perr *parseError
	if format == agentplanev1.DocumentFormat_DOCUMENT_FORMAT_JSON {
		root, perr = parseJSON(data, lim.MaxNesting, lim.MaxValues)
	} else {
		var found []*violation
		root, found, perr = parseYAML(data, lim.MaxNesting, lim.MaxValues)
		d.found = append(d.found, found...)
	}
	if perr != nil {
		d.found = d.found[:0]
		return stop(perr)
	}
	d.root = root
	if root.kind != kindObject {
		d.found = append(d.found, &violation{rule: RuleDocType, pos: root.pos,
			msg: fmt.Sprintf("a spec document is an object (kind AgentSpec or GraphSpec), got %s", root.kind)})
		return d
	}
	b := &binder{found: d.found}
	switch routeKind(root, false) {
	case KindGraph:
		d.Kind = KindGraph
		d.Graph = &agentplanev1.GraphSpec{}
		b.message(root, d.Graph.ProtoReflect(), nil)
	default:
		d.Kind = KindAgent
		d.Agent = &agentplanev1.AgentSpec{}
		b.message(root, d.Agent.ProtoReflect(), nil)
	}
	d.found, d.order = inTextOrder(b.found), b.order
	return d
}

// yamlNonPrintable finds the first character YAML does not allow in a stream
// (c-printable: C0 controls other than tab, LF and CR, DEL, C1 controls other than
// NEL, U+FFFE and U+FFFF). goccy/go-yaml accepts them, so a raw NUL would otherwise
// reach a string. JSON's own rules (no raw control characters in strings) are the
// JSON parser's. data is valid UTF-8.
func yamlNonPrintable(data []byte) *parseError {
	line, col := int32(1), int32(1)
	for _, r := range string(data) {
		bad := (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0x7f ||
			(r >= 0x80 && r <= 0x9f && r != 0x85) || r == 0xfffe || r == 0xffff
		if bad {
			return &parseError{rule: RuleDocSyntax, pos: pos{line, col},
				msg: fmt.Sprintf("the control character U+%04X is not allowed in a YAML document; write it as an escape in a double-quoted string", r)}
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return nil
}

// DetectFormat guesses the syntax of a document the way ValidateSpec does when no
// format is given: JSON when the first non-space character is '{', YAML otherwise.
func DetectFormat(data []byte) agentplanev1.DocumentFormat {
	s := strings.TrimPrefix(string(data), "\xef\xbb\xbf")
	s = strings.TrimLeft(s, " \t\r\n")
	if strings.HasPrefix(s, "{") {
		return agentplanev1.DocumentFormat_DOCUMENT_FORMAT_JSON
	}
	return agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML
}

// graphShapedKeys are keys only a GraphSpec has; they route a document whose kind is
// missing or unknown, so that its other mistakes are still reported usefully.
var graphShapedKeys = specwire.GraphShapedKeys

// routeKind decides what an object is: kind AgentSpec or GraphSpec decides; without a
// known kind, a node spec with agent_id is a static reference, and otherwise the keys
// decide. A kind that is missing or unknown is reported by the rules, not here.
func routeKind(n *node, nodeSpec bool) string {
	k := n.member("kind")
	if k != nil && k.val.kind == kindString && (k.val.str == KindAgent || k.val.str == KindGraph) {
		return k.val.str
	}
	if nodeSpec {
		if k == nil && n.member("agent_id") != nil {
			return kindStatic
		}
		if len(n.members) == 0 {
			return ""
		}
	}
	for _, key := range graphShapedKeys {
		if n.member(key) != nil {
			return KindGraph
		}
	}
	return KindAgent
}

const kindStatic = "static"

// sdkOnlyKeys are AgentSpec fields of the SDK that it resolves before sending; they
// never cross the wire.
var sdkOnlyKeys = []string{"mcpTools", "mcpToolOverrides"}

// binder binds a tree to the typed model by reflection over the generated
// descriptors, so the wire keys are exactly the proto JSON names and a field added
// to the proto is decoded without touching this file.
type binder struct {
	found findings
	order map[*agentplanev1.GraphSpec][]string
}

func (b *binder) report(rule string, p *Path, at pos, format string, args ...any) {
	b.found = append(b.found, &violation{rule: rule, path: p.String(), msg: fmt.Sprintf(format, args...), pos: at})
}

// at is a place being bound: the enclosing container's path and the key or index in
// it. The place's own *Path is only built when needed (a finding, or descending into
// a container), which keeps binding scalars free of allocations.
type at struct {
	parent *Path
	key    string
	index  int // -1 for an object member
}

func memberAt(p *Path, key string) at { return at{parent: p, key: key, index: -1} }
func elemAt(p *Path, i int) at        { return at{parent: p, index: i} }

func (a at) path() *Path {
	if a.index >= 0 {
		return a.parent.Index(a.index)
	}
	return a.parent.Child(a.key)
}

func (b *binder) typeError(n *node, a at, want string) {
	hint := ""
	if n.kind == kindNumber && strings.Contains(want, "string") {
		hint = "; quote the value to make it a string"
	}
	b.report(RuleDocType, a.path(), n.pos, "must be %s, got %s%s", want, n.kind, hint)
}

// message binds object n into m. The caller has checked that n is an object.
func (b *binder) message(n *node, m protoreflect.Message, p *Path) {
	fields := m.Descriptor().Fields()
	for i := range n.members {
		mb := &n.members[i]
		if mb.dup {
			b.report(RuleDocDuplicate, p.Child(mb.key), mb.keyPos, "key %q appears more than once in this object; the first one is used", mb.key)
			continue
		}
		fd := fields.ByJSONName(mb.key)
		if fd == nil {
			b.unknownKey(m.Descriptor(), mb, p)
			continue
		}
		b.field(mb.val, m, fd, p, mb.key)
	}
}

func (b *binder) unknownKey(md protoreflect.MessageDescriptor, mb *member, p *Path) {
	if md.FullName() == "agentplane.v1.AgentSpec" && slices.Contains(sdkOnlyKeys, mb.key) {
		b.report(RuleDocSDKKey, p.Child(mb.key), mb.keyPos,
			"%s is an SDK-only field: the SDK resolves it into tools[] before sending, so it never crosses the wire; send the projected tools instead", mb.key)
		return
	}
	msg := fmt.Sprintf("unknown key %q in %s", mb.key, wireName(md))
	if mb.key == "agent_id" && (md.Name() == "AgentSpec" || md.Name() == "GraphSpec") {
		msg += "; a node's spec is an inline agent, a nested graph or {agent_id} alone, never a mix"
	} else if s := suggestKey(md, mb.key); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	} else {
		msg += "; the wire format allows no extra keys"
	}
	b.report(RuleDocUnknownKey, p.Child(mb.key), mb.keyPos, "%s", msg)
}

// wireName names a message the way the wire vocabulary (docs/vocabulary.md) does.
func wireName(md protoreflect.MessageDescriptor) string {
	switch md.Name() {
	case "FunctionTool":
		return "a tool"
	case "FunctionDef":
		return "a tool's function"
	case "GraphAgent":
		return "a graph node"
	case "StaticAgentRef":
		return "a static agent reference {agent_id}"
	}
	return string(md.Name())
}

// suggestKey finds the key the author probably meant: the same letters in another
// case or with underscores (api_version for apiVersion), or one edit away.
func suggestKey(md protoreflect.MessageDescriptor, key string) string {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }
	fields := md.Fields()
	// One edit for short keys, two for longer ones: more would suggest unrelated keys.
	best, bestDist := "", 2
	if len(key) > 5 {
		bestDist = 3
	}
	for i := 0; i < fields.Len(); i++ {
		name := fields.Get(i).JSONName()
		if norm(name) == norm(key) {
			return name
		}
		if d := editDistance(name, key, bestDist); d < bestDist {
			best, bestDist = name, d
		}
	}
	return best
}

// editDistance is the edit distance of a and b counting a swap of two adjacent
// letters as one edit (modle -> model), or limit when it is at least limit. The
// strings compared are keys and node names; longer ones are not compared.
func editDistance(a, b string, limit int) int {
	if len(a) > 64 || len(b) > 64 || abs(len(a)-len(b)) >= limit {
		return limit
	}
	rows := [3][]int{make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)}
	for j := range rows[1] {
		rows[1][j] = j
	}
	for i := 1; i <= len(a); i++ {
		pp, prev, cur := rows[0], rows[1], rows[2]
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], pp[j-2]+1)
			}
		}
		rows[0], rows[1], rows[2] = prev, cur, pp
	}
	return min(rows[1][len(b)], limit)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// field binds the member key of object m. Null means absent, the way the wire's
// optional fields use it, except for the google.protobuf.Value fields (custom_code,
// parent_close_policy) where an explicit null is the one accepted value.
func (b *binder) field(v *node, m protoreflect.Message, fd protoreflect.FieldDescriptor, parent *Path, key string) {
	if v.kind == kindInvalid || (v.kind == kindNull && !isValueMessage(fd)) {
		return
	}
	a := memberAt(parent, key)
	switch {
	case fd.IsMap():
		if v.kind != kindObject {
			b.typeError(v, a, "an object")
			return
		}
		b.mapField(v, m, fd, a.path())
	case fd.IsList():
		if v.kind != kindArray {
			b.typeError(v, a, "an array")
			return
		}
		// An element that cannot be bound is kept as a zero value, so that every
		// later element keeps its index and the rules' paths match the document.
		// Findings at the element itself are suppressed (see validateDocument).
		p := a.path()
		l := m.Mutable(fd).List()
		for i, item := range v.items {
			if fd.Kind() == protoreflect.MessageKind {
				el := l.NewElement()
				b.messageValue(item, el.Message(), elemAt(p, i))
				l.Append(el)
				continue
			}
			val, ok := b.scalar(item, fd, elemAt(p, i))
			if !ok {
				val = zeroScalar(fd)
			}
			l.Append(val)
		}
	case fd.Kind() == protoreflect.MessageKind:
		val := m.NewField(fd)
		if b.messageValue(v, val.Message(), a) {
			m.Set(fd, val)
		}
	default:
		if val, ok := b.scalar(v, fd, a); ok {
			m.Set(fd, val)
		}
	}
}

// zeroScalar is the zero value of a scalar field's element (fd.Default is not
// defined for repeated fields).
func zeroScalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(false)
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(0)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(0)
	}
	return protoreflect.ValueOfString("")
}

func isValueMessage(fd protoreflect.FieldDescriptor) bool {
	return fd.Kind() == protoreflect.MessageKind && fd.Message().FullName() == "google.protobuf.Value"
}

func (b *binder) mapField(v *node, m protoreflect.Message, fd protoreflect.FieldDescriptor, p *Path) {
	mp := m.Mutable(fd).Map()
	graph, _ := m.Interface().(*agentplanev1.GraphSpec)
	for i := range v.members {
		mb := &v.members[i]
		cp := memberAt(p, mb.key)
		if mb.dup {
			if graph != nil {
				b.report(RuleNodeUnique, cp.path(), mb.keyPos, "node name %q is used twice; node names are unique (the first definition is used)", mb.key)
			} else {
				b.report(RuleDocDuplicate, cp.path(), mb.keyPos, "key %q appears more than once in this object; the first one is used", mb.key)
			}
			continue
		}
		if mb.val.kind == kindInvalid {
			continue
		}
		val := mp.NewValue()
		if fd.MapValue().Kind() == protoreflect.MessageKind {
			if !b.messageValue(mb.val, val.Message(), cp) {
				continue
			}
		} else {
			var ok bool
			if val, ok = b.scalar(mb.val, fd.MapValue(), cp); !ok {
				continue
			}
		}
		mp.Set(protoreflect.ValueOfString(mb.key).MapKey(), val)
		if graph != nil {
			if b.order == nil {
				b.order = map[*agentplanev1.GraphSpec][]string{}
			}
			b.order[graph] = append(b.order[graph], mb.key)
		}
	}
}

// messageValue binds n into the empty message m, handling the well-known types and
// the wire's unions. It reports false when n could not be bound at all.
func (b *binder) messageValue(n *node, m protoreflect.Message, a at) bool {
	switch m.Descriptor().FullName() {
	case "google.protobuf.Struct":
		if n.kind != kindObject {
			b.typeError(n, a, "an object")
			return false
		}
		b.structInto(n, m.Interface().(*structpb.Struct), a.path())
		return true
	case "google.protobuf.Value":
		v, ok := b.value(n, a)
		if ok {
			proto := m.Interface().(*structpb.Value)
			proto.Kind = v.Kind
		}
		return ok
	case "agentplane.v1.Instructions":
		ins := m.Interface().(*agentplanev1.Instructions)
		switch n.kind {
		case kindString:
			ins.Source = &agentplanev1.Instructions_Text{Text: n.str}
			return true
		case kindObject:
			preset := &agentplanev1.InstructionsPreset{}
			b.message(n, preset.ProtoReflect(), a.path())
			ins.Source = &agentplanev1.Instructions_Preset{Preset: preset}
			return true
		}
		b.typeError(n, a, "a string or an object {preset, append}")
		return false
	case "agentplane.v1.NodeSpec":
		if n.kind != kindObject {
			b.typeError(n, a, "an object: an inline agent (kind AgentSpec), a nested graph (kind GraphSpec) or {agent_id}")
			return false
		}
		p := a.path()
		ns := m.Interface().(*agentplanev1.NodeSpec)
		switch routeKind(n, true) {
		case KindAgent:
			a := &agentplanev1.AgentSpec{}
			b.message(n, a.ProtoReflect(), p)
			ns.Spec = &agentplanev1.NodeSpec_Agent{Agent: a}
		case KindGraph:
			g := &agentplanev1.GraphSpec{}
			b.message(n, g.ProtoReflect(), p)
			ns.Spec = &agentplanev1.NodeSpec_Graph{Graph: g}
		case kindStatic:
			s := &agentplanev1.StaticAgentRef{}
			b.message(n, s.ProtoReflect(), p)
			ns.Spec = &agentplanev1.NodeSpec_StaticAgent{StaticAgent: s}
		}
		return true
	}
	if n.kind != kindObject {
		b.typeError(n, a, "an object")
		return false
	}
	b.message(n, m, a.path())
	return true
}

func (b *binder) scalar(n *node, fd protoreflect.FieldDescriptor, a at) (protoreflect.Value, bool) {
	if n.kind == kindInvalid {
		return protoreflect.Value{}, false
	}
	switch fd.Kind() {
	case protoreflect.StringKind:
		if n.kind == kindString {
			return protoreflect.ValueOfString(n.str), true
		}
		b.typeError(n, a, "a string")
	case protoreflect.BoolKind:
		if n.kind == kindBool {
			return protoreflect.ValueOfBool(n.b), true
		}
		b.typeError(n, a, "a boolean")
	case protoreflect.Int64Kind:
		if n.kind != kindNumber {
			b.typeError(n, a, "an integer")
			break
		}
		i, err := parseInteger(n.str)
		if err != "" {
			b.report(RuleDocType, a.path(), n.pos, "%s", err)
			break
		}
		return protoreflect.ValueOfInt64(i), true
	case protoreflect.Int32Kind:
		if n.kind != kindNumber {
			b.typeError(n, a, "an integer")
			break
		}
		i, err := parseInteger(n.str)
		if err == "" && (i < math.MinInt32 || i > math.MaxInt32) {
			err = fmt.Sprintf("integer %s is out of range (at most %d)", n.str, math.MaxInt32)
		}
		if err != "" {
			b.report(RuleDocType, a.path(), n.pos, "%s", err)
			break
		}
		return protoreflect.ValueOfInt32(int32(i)), true
	case protoreflect.DoubleKind:
		if n.kind != kindNumber {
			b.typeError(n, a, "a number")
			break
		}
		f, err := strconv.ParseFloat(n.str, 64)
		if err != nil {
			b.report(RuleDocType, a.path(), n.pos, "number %s is out of range", n.str)
			break
		}
		return protoreflect.ValueOfFloat64(f), true
	default:
		// The spec model has no other scalar kinds; a new one must be added here.
		b.report(RuleDocType, a.path(), n.pos, "field of kind %s cannot be decoded", fd.Kind())
	}
	return protoreflect.Value{}, false
}

// parseInteger accepts integral JSON numbers, including 1e3 and 5.0.
func parseInteger(s string) (int64, string) {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, ""
	}
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil || math.Abs(f) >= 1<<63:
		return 0, fmt.Sprintf("integer %s is out of range", s)
	case f != math.Trunc(f):
		return 0, fmt.Sprintf("must be an integer, got %s", s)
	}
	return int64(f), ""
}

func (b *binder) structInto(n *node, s *structpb.Struct, p *Path) {
	s.Fields = make(map[string]*structpb.Value, len(n.members))
	for i := range n.members {
		mb := &n.members[i]
		a := memberAt(p, mb.key)
		if mb.dup {
			b.report(RuleDocDuplicate, a.path(), mb.keyPos, "key %q appears more than once in this object; the first one is used", mb.key)
			continue
		}
		if v, ok := b.value(mb.val, a); ok {
			s.Fields[mb.key] = v
		}
	}
}

func (b *binder) value(n *node, a at) (*structpb.Value, bool) {
	switch n.kind {
	case kindNull:
		return structpb.NewNullValue(), true
	case kindBool:
		return structpb.NewBoolValue(n.b), true
	case kindString:
		return structpb.NewStringValue(n.str), true
	case kindNumber:
		f, err := strconv.ParseFloat(n.str, 64)
		if err != nil {
			b.report(RuleDocType, a.path(), n.pos, "number %s is out of range", n.str)
			return nil, false
		}
		return structpb.NewNumberValue(f), true
	case kindArray:
		p := a.path()
		l := &structpb.ListValue{Values: make([]*structpb.Value, 0, len(n.items))}
		for i, item := range n.items {
			v, ok := b.value(item, elemAt(p, i))
			if !ok {
				v = structpb.NewNullValue() // keeps the indices of later elements
			}
			l.Values = append(l.Values, v)
		}
		return structpb.NewListValue(l), true
	case kindObject:
		s := &structpb.Struct{}
		b.structInto(n, s, a.path())
		return structpb.NewStructValue(s), true
	}
	return nil, false
}
