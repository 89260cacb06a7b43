package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
)

// fuzzLimits keep each fuzz input's work small and bounded.
var fuzzLimits = Limits{MaxDocumentBytes: 64 << 10, MaxNesting: 32, MaxValues: 1 << 15}

func addSeeds(f *testing.F, add func(data []byte)) {
	files, _ := filepath.Glob(filepath.Join(corpusDir, "*"))
	for _, file := range files {
		if ext := filepath.Ext(file); ext != ".yaml" && ext != ".json" {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		add(data)
	}
	for _, r := range catalogue {
		add([]byte(r.example))
	}
}

// FuzzDecode: decoding never panics, is deterministic, reports only catalogue rules
// with positions, and whatever decodes cleanly encodes and decodes back to itself.
func FuzzDecode(f *testing.F) {
	addSeeds(f, func(d []byte) { f.Add(d, false); f.Add(d, true) })
	f.Fuzz(func(t *testing.T, data []byte, asYAML bool) {
		format := formatJSON
		if asYAML {
			format = formatYAML
		}
		d1 := Decode(data, format, fuzzLimits)
		d2 := Decode(data, format, fuzzLimits)
		v1, v2 := d1.Violations(), d2.Violations()
		if fmt.Sprint(v1) != fmt.Sprint(v2) || !proto.Equal(d1.Agent, d2.Agent) || !proto.Equal(d1.Graph, d2.Graph) {
			t.Fatal("Decode is not deterministic")
		}
		for _, v := range v1 {
			if _, ok := ruleIndex[v.GetRuleId()]; !ok || v.GetPosition() == nil {
				t.Fatalf("bad finding %v", v)
			}
			if _, ok := splitPointer(v.GetPath()); !ok {
				t.Fatalf("path %q is not a JSON pointer", v.GetPath())
			}
		}
		if len(v1) > 0 || (d1.Agent == nil && d1.Graph == nil) {
			return
		}
		var m proto.Message = d1.Agent
		if d1.Graph != nil {
			m = d1.Graph
		}
		enc, err := Encode(m)
		if err != nil {
			t.Fatalf("a decoded spec does not encode: %v", err)
		}
		back := Decode(enc, formatJSON, Limits{MaxDocumentBytes: int64(len(enc)) + 1, MaxNesting: fuzzLimits.MaxNesting + 2, MaxValues: fuzzLimits.MaxValues})
		var got proto.Message = back.Agent
		if back.Graph != nil {
			got = back.Graph
		}
		if len(back.Violations()) > 0 || !proto.Equal(got, m) {
			t.Fatalf("Decode(Encode(x)) != x\n%s\n%v", enc, back.Violations())
		}
	})
}

// FuzzValidate: validating any document never panics, is deterministic and reports
// catalogue rules with pointer paths and positions.
func FuzzValidate(f *testing.F) {
	addSeeds(f, func(d []byte) { f.Add(d) })
	d := corpusDeployment()
	d.MaxDocumentBytes, d.MaxNesting = fuzzLimits.MaxDocumentBytes, fuzzLimits.MaxNesting
	v := NewValidator(d)
	f.Fuzz(func(t *testing.T, data []byte) {
		r1, err := v.Validate(Input{Document: data})
		if len(data) == 0 {
			if err == nil {
				t.Fatal("empty input accepted")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		r2, _ := v.Validate(Input{Document: data})
		if fmt.Sprint(r1.Errors, r1.Warnings) != fmt.Sprint(r2.Errors, r2.Warnings) {
			t.Fatal("Validate is not deterministic")
		}
		for _, f := range append(r1.Errors, r1.Warnings...) {
			if _, ok := ruleIndex[f.GetRuleId()]; !ok || f.GetMessage() == "" || f.GetPosition() == nil {
				t.Fatalf("bad finding %v", f)
			}
			if _, ok := splitPointer(f.GetPath()); !ok {
				t.Fatalf("path %q is not a JSON pointer", f.GetPath())
			}
		}
		if r1.Valid() {
			if _, err := v.Resolve(r1); err != nil {
				t.Fatalf("a valid spec does not resolve: %v", err)
			}
		}
	})
}

// FuzzJSONParser compares the scanner with encoding/json: on valid UTF-8 within the
// nesting limit it accepts exactly what encoding/json accepts, and (without repeated
// keys) produces the same value.
func FuzzJSONParser(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"a":[1,-0.5e3,true,null,"x\u00e9\n"]}`, `{"a":1,}`, `[01]`, `"\ud800"`, `1e999`, `{"a":1,"a":2}`, " \t\n{\"k\" : [ ] }\r\n"} {
		f.Add([]byte(s))
	}
	addSeeds(f, func(d []byte) { f.Add(d) })
	f.Fuzz(func(t *testing.T, data []byte) {
		if !utf8.Valid(data) || len(data) > 1<<16 || (len(data) >= 3 && string(data[:3]) == "\xef\xbb\xbf") {
			return
		}
		root, perr := parseJSON(data, 10000, 1<<30)
		want := json.Valid(data)
		if (perr == nil) != want {
			t.Fatalf("parseJSON ok=%v, json.Valid=%v: %v", perr == nil, want, perr)
		}
		if perr != nil {
			return
		}
		var ref any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&ref); err != nil {
			t.Fatal(err)
		}
		got, dup := treeValue(root)
		if !dup && !reflect.DeepEqual(got, ref) {
			t.Fatalf("value differs:\n got %#v\nwant %#v", got, ref)
		}
	})
}

func treeValue(n *node) (any, bool) {
	switch n.kind {
	case kindBool:
		return n.b, false
	case kindNumber:
		return json.Number(n.str), false
	case kindString:
		return n.str, false
	case kindArray:
		out, dup := make([]any, len(n.items)), false
		for i, item := range n.items {
			v, d := treeValue(item)
			out[i], dup = v, dup || d
		}
		return out, dup
	case kindObject:
		out, dup := map[string]any{}, false
		for _, m := range n.members {
			v, d := treeValue(m.val)
			dup = dup || d || m.dup
			out[m.key] = v
		}
		return out, dup
	}
	return nil, false
}
