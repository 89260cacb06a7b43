package spec

import (
	"bytes"
	"container/list"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/server/spec/spectest"
)

// The benchmarks validate the same JSON documents two ways, side by side:
//
//	semantic: Validator.Validate on the document (decode, every rule, positions)
//	schema:   santhosh-tekuri/jsonschema on DocumentSchema (parse JSON + validate)
//
// plus, for reference, semantic validation of the typed message (no decoding) and of
// the document with the compiled-schema cache emptied before every run (the cost of
// the first sight of a spec's tool schemas). Run:
//
//	go test ./server/spec -run '^$' -bench BenchmarkValidate -benchmem -benchtime 2s

type benchCase struct {
	name  string
	typed Input
	doc   []byte
}

func benchCases(b *testing.B) []benchCase {
	agent := spectest.Agent("researcher", 4)
	graph := spectest.Graph("", 20, 0)
	nested := spectest.Graph("", 6, 2) // 3 graph levels, 16 agents
	var out []benchCase
	for _, c := range []struct {
		name string
		m    proto.Message
		in   Input
	}{
		{"agent", agent, Input{Agent: agent}},
		{"graph20", graph, Input{Graph: graph}},
		{"nested3", nested, Input{Graph: nested}},
	} {
		doc, err := Encode(c.m)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, benchCase{c.name, c.in, doc})
	}
	return out
}

func BenchmarkValidate(b *testing.B) {
	v := NewValidator(Deployment{PlatformMaxDepth: 4})
	sch := compileDocumentSchema(b)
	for _, c := range benchCases(b) {
		// Both validators must accept the document, or the comparison means nothing.
		if res, err := v.Validate(Input{Document: c.doc, Format: formatJSON}); err != nil || !res.Valid() || len(res.Warnings) > 0 {
			b.Fatalf("%s: %v %v %v", c.name, err, res.Errors, res.Warnings)
		}
		if inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(c.doc)); err != nil || sch.Validate(inst) != nil {
			b.Fatalf("%s: schema rejects the document: %v %v", c.name, err, sch.Validate(inst))
		}
		b.Run(c.name+"/semantic", func(b *testing.B) {
			b.SetBytes(int64(len(c.doc)))
			b.ReportAllocs()
			for b.Loop() {
				if res, _ := v.Validate(Input{Document: c.doc, Format: formatJSON}); !res.Valid() {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(c.name+"/schema", func(b *testing.B) {
			b.SetBytes(int64(len(c.doc)))
			b.ReportAllocs()
			for b.Loop() {
				inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(c.doc))
				if err != nil {
					b.Fatal(err)
				}
				if err := sch.Validate(inst); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/semantic-typed", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if res, _ := v.Validate(c.typed); !res.Valid() {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(c.name+"/semantic-coldcache", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				schemas.reset()
				if res, _ := v.Validate(Input{Document: c.doc, Format: formatJSON}); !res.Valid() {
					b.Fatal("invalid")
				}
			}
		})
	}
}

func (c *schemaCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ll = list.New()
	c.items = map[[32]byte]*list.Element{}
}

// BenchmarkDecodeYAML measures the YAML path on the largest example.
func BenchmarkDecodeYAML(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(examplesDir, "graphs", "research-nested.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if d := Decode(data, formatYAML, Limits{}); len(d.found) > 0 {
			b.Fatal(d.Violations())
		}
	}
}
