package spec

import (
	"cmp"
	"container/list"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/api/specwire"
)

// JSON Schemas inside specs (tool parameters, output_schema, deps_schema) are
// compiled with santhosh-tekuri/jsonschema against their metaschema (draft 2020-12
// unless the schema names another draft). Compilation is far more expensive than
// everything else validation does, and the same schemas arrive again and again (CI
// re-validating a spec, StartTask after ValidateSpec), so compiled schemas are kept
// in a small LRU keyed by the digest of their canonical JSON.

const (
	schemaURL = "mem:///schema.json"
	// schemaCacheSize bounds the compiled-schema cache.
	schemaCacheSize = 256
	// maxSchemaFindings caps the findings reported for one schema.
	maxSchemaFindings = 8
)

// noLoader refuses every external reference: a schema in a spec must not make the
// control plane read files ($ref: file:///etc/passwd) or fetch URLs. The library's
// default loader reads files, so this is not optional.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, errors.New("external references are not allowed in spec schemas; inline the schema under $defs")
}

type compiled struct {
	sch *jsonschema.Schema
	// findings are the reasons the schema does not compile (nil when it does).
	findings []schemaFinding
}

type schemaFinding struct {
	ptr string // pointer inside the schema
	msg string
}

type schemaCache struct {
	mu    sync.Mutex
	ll    *list.List // of *cacheEntry, most recent first
	items map[[32]byte]*list.Element
}

type cacheEntry struct {
	key [32]byte
	val *compiled
}

var schemas = &schemaCache{ll: list.New(), items: map[[32]byte]*list.Element{}}

// keyEncoders hold the buffers the cache keys are computed in.
var keyEncoders = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// compile returns the compiled form of s, from the cache when it is there.
func (c *schemaCache) compile(s *structpb.Struct) *compiled {
	buf := keyEncoders.Get().(*[]byte)
	var err error
	*buf, err = specwire.AppendStruct((*buf)[:0], s)
	key := sha256.Sum256(*buf)
	keyEncoders.Put(buf)
	if err != nil {
		return &compiled{findings: []schemaFinding{{msg: err.Error()}}}
	}
	c.mu.Lock()
	if el, ok := c.items[key]; ok {
		c.ll.MoveToFront(el)
		v := el.Value.(*cacheEntry).val
		c.mu.Unlock()
		return v
	}
	c.mu.Unlock()

	// Compile outside the lock; two goroutines compiling the same schema at once
	// both succeed and one result wins, which is harmless.
	v := compileSchema(s.AsMap())
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		return el.Value.(*cacheEntry).val
	}
	c.items[key] = c.ll.PushFront(&cacheEntry{key: key, val: v})
	for c.ll.Len() > schemaCacheSize {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*cacheEntry).key)
	}
	return v
}

var printer = message.NewPrinter(language.English)

func compileSchema(doc map[string]any) *compiled {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return &compiled{findings: []schemaFinding{{msg: cleanSchemaError(err)}}}
	}
	sch, err := c.Compile(schemaURL)
	if err == nil {
		return &compiled{sch: sch}
	}
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
		return &compiled{findings: leafFindings(ve, true)}
	}
	return &compiled{findings: []schemaFinding{{msg: cleanSchemaError(err)}}}
}

// leafFindings flattens a validation error to its leaves. With onePerLocation only
// the first leaf at each location is kept: a schema that breaks the metaschema at one
// keyword fails every branch of an anyOf there, and one message is enough.
func leafFindings(ve *jsonschema.ValidationError, onePerLocation bool) []schemaFinding {
	var out []schemaFinding
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(out) >= maxSchemaFindings {
			return
		}
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		f := schemaFinding{ptr: pointerOf(e.InstanceLocation), msg: e.ErrorKind.LocalizedString(printer)}
		if slices.ContainsFunc(out, func(g schemaFinding) bool { return g.ptr == f.ptr && (onePerLocation || g.msg == f.msg) }) {
			return
		}
		out = append(out, f)
	}
	walk(ve)
	return out
}

func pointerOf(segs []string) string {
	var p *Path
	for _, s := range segs {
		p = p.Child(s)
	}
	return p.String()
}

func cleanSchemaError(err error) string {
	return strings.ReplaceAll(err.Error(), schemaURL, "the schema")
}

// schema checks that s compiles as a JSON Schema and reports why not under p. It
// reports whether s compiled.
func (w *walker) schema(s *structpb.Struct, p *Path, rule string) bool {
	c := schemas.compile(s)
	for _, f := range c.findings {
		fp := p.String() + f.ptr
		w.errs = append(w.errs, &violation{rule: rule, path: fp, msg: "not a valid JSON Schema: " + f.msg})
	}
	return c.sch != nil
}

// isObjectType reports whether a schema's "type" says object. A nested schema may be
// nullable (["object", "null"]); the root of a strict schema may not.
func isObjectType(t *structpb.Value, root bool) bool {
	switch k := t.GetKind().(type) {
	case *structpb.Value_StringValue:
		return k.StringValue == "object"
	case *structpb.Value_ListValue:
		if root {
			return false
		}
		for _, v := range k.ListValue.GetValues() {
			if v.GetStringValue() == "object" {
				return true
			}
		}
	}
	return false
}

// strictSchema applies the strict-mode rules of structured outputs: the root is an
// object; every object schema sets additionalProperties: false and lists every
// property in required. Subschemas are followed through properties, items,
// prefixItems, anyOf, allOf, $defs and definitions. Findings are reported in path
// order, so the result does not depend on map iteration.
func (w *walker) strictSchema(s *structpb.Struct, p *Path, rule, what string) {
	if !isObjectType(s.GetFields()["type"], true) {
		w.errf(rule, p.Child("type"), `strict mode: %s must have type "object" at the root (or set strict: false)`, what)
		return
	}
	sw := strictWalker{base: p.String(), rule: rule}
	sw.object(s, w.v.lim.MaxNesting)
	slices.SortFunc(sw.found, func(a, b *violation) int {
		return cmp.Or(strings.Compare(a.path, b.path), strings.Compare(a.msg, b.msg))
	})
	w.errs = append(w.errs, sw.found...)
}

// strictWalker keeps the path inside the schema as a stack of escaped segments and
// renders it only for a finding.
type strictWalker struct {
	base  string
	rule  string
	segs  []string
	found findings
}

func (sw *strictWalker) report(last, format string, args ...any) {
	var b strings.Builder
	b.WriteString(sw.base)
	for _, s := range sw.segs {
		b.WriteByte('/')
		b.WriteString(s)
	}
	b.WriteByte('/')
	b.WriteString(last)
	sw.found = append(sw.found, &violation{rule: sw.rule, path: b.String(), msg: fmt.Sprintf(format, args...)})
}

func (sw *strictWalker) object(s *structpb.Struct, budget int) {
	if budget <= 0 {
		return
	}
	f := s.GetFields()
	props := f["properties"].GetStructValue().GetFields()
	if _, hasProps := f["properties"]; hasProps || isObjectType(f["type"], false) {
		if ap, ok := f["additionalProperties"]; !ok || !isFalse(ap) {
			sw.report("additionalProperties", "strict mode: every object schema sets additionalProperties: false (or set strict: false)")
		}
		required := f["required"].GetListValue().GetValues()
		for name := range props {
			if !slices.ContainsFunc(required, func(v *structpb.Value) bool { return v.GetStringValue() == name }) {
				sw.report("required", "strict mode: property %q must be listed in required (make it nullable to make it optional)", name)
			}
		}
	}
	sub := func(v *structpb.Value, segs ...string) {
		if st := v.GetStructValue(); st != nil {
			n := len(sw.segs)
			sw.segs = append(sw.segs, segs...)
			sw.object(st, budget-1)
			sw.segs = sw.segs[:n]
		}
	}
	for _, key := range []string{"properties", "$defs", "definitions"} {
		for name, v := range f[key].GetStructValue().GetFields() {
			sub(v, key, escapeSegment(name))
		}
	}
	sub(f["items"], "items")
	for _, key := range []string{"prefixItems", "anyOf", "allOf"} {
		for i, v := range f[key].GetListValue().GetValues() {
			sub(v, key, strconv.Itoa(i))
		}
	}
}

func isFalse(v *structpb.Value) bool {
	b, ok := v.GetKind().(*structpb.Value_BoolValue)
	return ok && !b.BoolValue
}

// ArgsSchemaCompiles reports whether schema compiles as a tool's parameter schema, so
// that what ValidateArgs reports is about the arguments, not the schema.
func ArgsSchemaCompiles(schema *structpb.Struct) bool {
	return schema != nil && schemas.compile(schema).sch != nil
}

// ValidateArgs validates args against a tool's parameter schema and returns what is
// wrong, one "pointer: message" line per problem (empty when args are valid). A
// schema that does not compile is reported the same way, prefixed "schema". It is
// what a human's edited arguments are checked with before they replace a gated
// call's arguments. Compiled schemas are cached; safe for concurrent use.
func ValidateArgs(schema *structpb.Struct, args *structpb.Value) []string {
	if schema == nil {
		return []string{"schema: the tool has no parameter schema"}
	}
	c := schemas.compile(schema)
	if c.sch == nil {
		out := make([]string, len(c.findings))
		for i, f := range c.findings {
			out[i] = fmt.Sprintf("schema%s: %s", f.ptr, f.msg)
		}
		return out
	}
	err := c.sch.Validate(args.AsInterface())
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{err.Error()}
	}
	var out []string
	for _, f := range leafFindings(ve, false) {
		ptr := f.ptr
		if ptr == "" {
			ptr = "/"
		}
		out = append(out, fmt.Sprintf("%s: %s", ptr, f.msg))
	}
	return out
}
