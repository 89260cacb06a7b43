// Package specwire writes a typed agentplane spec (agentplane.v1.AgentSpec, GraphSpec)
// in the qar/v1 wire shape (docs/vocabulary.md), the only shape a request carries: as
// document text (Encode) or as the google.protobuf.Struct of StartTaskRequest.spec and
// ValidateSpecRequest.spec (Struct). The server validates and decodes it again; a Go
// client builds specs with the typed messages and sends them through this package. It
// depends on gen only.
package specwire

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Encode writes a message of the spec model (an AgentSpec, a GraphSpec or any message
// nested in them) as a wire document: compact JSON in the qar/v1 vocabulary (docs/vocabulary.md), every
// object's keys in sorted order, the unions in their wire shape (instructions as text
// or {preset}, a node's spec as the agent, the graph or {agent_id} itself).
//
// Sorted keys make the output canonical, so typed input and its encoding reach the
// rules in the same order. Decode(Encode(x)) equals x for every x that Decode
// produces; a hand-built x round-trips when its node specs' kind fields agree with
// the arm they are in (the document routes on kind). Non-finite numbers cannot be
// written in JSON and are an error.
func Encode(m proto.Message) ([]byte, error) {
	e := &encoder{buf: make([]byte, 0, 1024)}
	if err := e.message(m.ProtoReflect(), routeRoot); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// AppendStruct appends the canonical encoding of s (compact JSON, keys sorted at every
// level) to buf, as Encode writes a Struct.
func AppendStruct(buf []byte, s *structpb.Struct) ([]byte, error) {
	e := &encoder{buf: buf}
	err := e.structValue(s)
	return e.buf, err
}

// Struct is the spec m (an AgentSpec or a GraphSpec) in the wire shape as a JSON
// object, for StartTaskRequest.spec and ValidateSpecRequest.spec.
func Struct(m proto.Message) (*structpb.Struct, error) {
	b, err := Encode(m)
	if err != nil {
		return nil, err
	}
	s := &structpb.Struct{}
	if err := protojson.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("specwire: %w", err)
	}
	return s, nil
}

// MustStruct is Struct for a spec known to encode (one without NaN or infinite
// numbers); it panics otherwise.
func MustStruct(m proto.Message) *structpb.Struct {
	s, err := Struct(m)
	if err != nil {
		panic(err)
	}
	return s
}

// GraphShapedKeys are keys only a GraphSpec has; they route a document whose kind is
// missing or unknown (the decoder's rule, which Encode follows so that a GraphSpec
// without kind still reads back as a graph).
var GraphShapedKeys = []string{"agents", "entry", "edges", "termination", "limits", "hitl_default", "parent_close_policy", "auto_pause_on_turn_end_default"}

type encoder struct {
	buf []byte
}

// route says whether a message sits where a document routes on its shape.
type route int

const (
	routeNone route = iota
	routeRoot       // the document itself: AgentSpec or GraphSpec
	routeNode       // a graph node's spec: also {agent_id} or nothing
)

type encField struct {
	name string
	fd   protoreflect.FieldDescriptor
	v    protoreflect.Value
}

func (e *encoder) message(m protoreflect.Message, r route) error {
	switch msg := m.Interface().(type) {
	case *structpb.Struct:
		return e.structValue(msg)
	case *structpb.Value:
		return e.value(msg)
	case *agentplanev1.Instructions:
		switch src := msg.GetSource().(type) {
		case *agentplanev1.Instructions_Text:
			e.str(src.Text)
			return nil
		case *agentplanev1.Instructions_Preset:
			return e.message(src.Preset.ProtoReflect(), routeNone)
		}
		e.buf = append(e.buf, "null"...)
		return nil
	case *agentplanev1.NodeSpec:
		switch s := msg.GetSpec().(type) {
		case *agentplanev1.NodeSpec_Agent:
			if s.Agent == nil {
				break // an empty arm is no spec, as the rules see it
			}
			return e.message(s.Agent.ProtoReflect(), routeNode)
		case *agentplanev1.NodeSpec_Graph:
			if s.Graph == nil {
				break
			}
			return e.message(s.Graph.ProtoReflect(), routeNode)
		case *agentplanev1.NodeSpec_StaticAgent:
			// Always written with agent_id so the document routes back to this arm.
			e.buf = append(e.buf, `{"agent_id":`...)
			e.str(s.StaticAgent.GetAgentId())
			e.buf = append(e.buf, '}')
			return nil
		}
		e.buf = append(e.buf, "{}"...)
		return nil
	}
	var fields []encField
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		fields = append(fields, encField{fd.JSONName(), fd, v})
		return true
	})
	fields = routable(m, r, fields)
	slices.SortFunc(fields, func(a, b encField) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	e.buf = append(e.buf, '{')
	for i, f := range fields {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.str(f.name)
		e.buf = append(e.buf, ':')
		if err := e.field(f.fd, f.v); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

// routable makes sure a document routes back to the message it was written from.
// Without kind, a GraphSpec is recognised by its keys and an empty node spec means
// "no spec", so a GraphSpec with none of its keys set is written with an empty
// agents map, and an empty AgentSpec in a node with an empty tools list. Both are
// the same as unset to proto.Equal and to the rules.
func routable(m protoreflect.Message, r route, fields []encField) []encField {
	if r == routeNone {
		return fields
	}
	switch msg := m.Interface().(type) {
	case *agentplanev1.GraphSpec:
		if msg.GetKind() == "GraphSpec" || slices.ContainsFunc(fields, func(f encField) bool { return slices.Contains(GraphShapedKeys, f.name) }) {
			return fields
		}
		fd := m.Descriptor().Fields().ByName("agents")
		return append(fields, encField{fd.JSONName(), fd, m.NewField(fd)})
	case *agentplanev1.AgentSpec:
		if r != routeNode || len(fields) > 0 {
			return fields
		}
		fd := m.Descriptor().Fields().ByName("tools")
		return append(fields, encField{fd.JSONName(), fd, m.NewField(fd)})
	}
	return fields
}

func (e *encoder) field(fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	switch {
	case fd.IsMap():
		mp := v.Map()
		keys := make([]string, 0, mp.Len())
		mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
			keys = append(keys, k.String())
			return true
		})
		slices.Sort(keys)
		e.buf = append(e.buf, '{')
		for i, k := range keys {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.str(k)
			e.buf = append(e.buf, ':')
			if err := e.single(fd.MapValue(), mp.Get(protoreflect.ValueOfString(k).MapKey())); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, '}')
	case fd.IsList():
		l := v.List()
		e.buf = append(e.buf, '[')
		for i := 0; i < l.Len(); i++ {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if err := e.single(fd, l.Get(i)); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, ']')
	default:
		return e.single(fd, v)
	}
	return nil
}

func (e *encoder) single(fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	switch fd.Kind() {
	case protoreflect.MessageKind:
		return e.message(v.Message(), routeNone)
	case protoreflect.StringKind:
		e.str(v.String())
	case protoreflect.BoolKind:
		e.buf = strconv.AppendBool(e.buf, v.Bool())
	case protoreflect.Int64Kind, protoreflect.Int32Kind:
		e.buf = strconv.AppendInt(e.buf, v.Int(), 10)
	case protoreflect.DoubleKind:
		return e.number(v.Float())
	default:
		return fmt.Errorf("field kind %s is not part of the spec model", fd.Kind())
	}
	return nil
}

func (e *encoder) structValue(s *structpb.Struct) error {
	var small [16]string // schemas' objects are small; avoid a heap slice for their keys
	keys := small[:0]
	for k := range s.GetFields() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.buf = append(e.buf, '{')
	for i, k := range keys {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.str(k)
		e.buf = append(e.buf, ':')
		if err := e.value(s.GetFields()[k]); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

func (e *encoder) value(v *structpb.Value) error {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue:
		e.buf = append(e.buf, "null"...)
	case *structpb.Value_BoolValue:
		e.buf = strconv.AppendBool(e.buf, k.BoolValue)
	case *structpb.Value_NumberValue:
		return e.number(k.NumberValue)
	case *structpb.Value_StringValue:
		e.str(k.StringValue)
	case *structpb.Value_ListValue:
		e.buf = append(e.buf, '[')
		for i, item := range k.ListValue.GetValues() {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if err := e.value(item); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, ']')
	case *structpb.Value_StructValue:
		return e.structValue(k.StructValue)
	default:
		// A Value with no kind set (or nil) has no JSON form; null is what protojson
		// refuses and what the wire means by "nothing".
		e.buf = append(e.buf, "null"...)
	}
	return nil
}

// number writes f the way encoding/json does: plain decimal unless very large or
// very small, exponent otherwise.
func (e *encoder) number(f float64) error {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return fmt.Errorf("%v cannot be written as a JSON number", f)
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	e.buf = strconv.AppendFloat(e.buf, f, format, -1, 64)
	return nil
}

const hexDigits = "0123456789abcdef"

// str writes s as a JSON string. Invalid UTF-8 is written as U+FFFD, as
// encoding/json does.
func (e *encoder) str(s string) {
	e.buf = append(e.buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			e.buf = append(e.buf, s[start:i]...)
			switch c {
			case '"', '\\':
				e.buf = append(e.buf, '\\', c)
			case '\n':
				e.buf = append(e.buf, '\\', 'n')
			case '\r':
				e.buf = append(e.buf, '\\', 'r')
			case '\t':
				e.buf = append(e.buf, '\\', 't')
			default:
				e.buf = append(e.buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			e.buf = append(e.buf, s[start:i]...)
			e.buf = append(e.buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	e.buf = append(e.buf, s[start:]...)
	e.buf = append(e.buf, '"')
}
