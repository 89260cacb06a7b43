package spec

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
)

const examplesDir = "../../examples"

// exampleValidator is the validator of a control plane booted on the examples'
// configuration (examples/with-static-agents/controlplane.yaml, which defines the
// static agents some examples reference), built the way the server builds its own.
func exampleValidator(t testing.TB) *Validator {
	t.Helper()
	cfg, err := config.Load(filepath.Join(examplesDir, "with-static-agents", "controlplane.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := DeploymentFrom(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.StaticAgents) == 0 {
		t.Fatal("the examples' configuration defines no static agents")
	}
	return NewValidator(d)
}

// exampleFiles are the example specs: those for any deployment (agents/, graphs/)
// and those that need the static agent table (with-static-agents/*/).
func exampleFiles(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, pattern := range []string{"agents/*.yaml", "graphs/*.yaml", "with-static-agents/*/*.yaml"} {
		m, err := filepath.Glob(filepath.Join(examplesDir, pattern))
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
