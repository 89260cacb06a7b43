package spec

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

const examplesDir = "../../examples"

// exampleValidator loads the examples' static agent table from files, the way the
// server does from its config.
func exampleValidator(t testing.TB) *Validator {
	t.Helper()
	files := map[string]string{}
	matches, err := filepath.Glob(filepath.Join(examplesDir, "static-agents", "*.yaml"))
	if err != nil || len(matches) == 0 {
		t.Fatalf("no static agents: %v", err)
	}
	for _, m := range matches {
		files[strings.TrimSuffix(filepath.Base(m), ".yaml")] = filepath.Base(m)
	}
	table, err := LoadStaticAgents(files, filepath.Join(examplesDir, "static-agents"))
	if err != nil {
		t.Fatal(err)
	}
	return NewValidator(Deployment{PlatformMaxDepth: 4, StaticAgents: table})
}

func exampleFiles(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{"agents", "graphs"} {
		m, err := filepath.Glob(filepath.Join(examplesDir, dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	if len(out) < 5 {
		t.Fatalf("expected at least 5 examples, found %d", len(out))
	}
	return out
}

// TestExamples: every example is valid without warnings, conforms to
// DocumentSchema, round-trips through Encode, and resolves.
func TestExamples(t *testing.T) {
	v := exampleValidator(t)
	sch := compileDocumentSchema(t)
	for _, file := range exampleFiles(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			res, err := v.Validate(Input{Document: data, DocumentName: file})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range append(res.Errors, res.Warnings...) {
				t.Error(FormatViolation(file, f))
			}
			if err := sch.Validate(yamlToJSONValue(t, data)); err != nil {
				t.Errorf("does not conform to DocumentSchema: %v", err)
			}
			resolved, err := v.Resolve(res)
			if err != nil {
				t.Fatal(err)
			}
			if resolved.GetAgent() == nil && resolved.GetGraph() == nil {
				t.Fatal("empty resolved spec")
			}
		})
	}
}

// yamlToJSONValue decodes a document into the generic form jsonschema validates.
func yamlToJSONValue(t testing.TB, data []byte) any {
	t.Helper()
	doc := Decode(data, agentplanev1.DocumentFormat_DOCUMENT_FORMAT_UNSPECIFIED, Limits{})
	if doc.root == nil {
		t.Fatalf("does not decode: %v", doc.Violations())
	}
	var enc []byte
	var err error
	if doc.Agent != nil {
		enc, err = Encode(doc.Agent)
	} else {
		enc, err = Encode(doc.Graph)
	}
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(enc))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func compileDocumentSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(DocumentSchema()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("document.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("document.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}
