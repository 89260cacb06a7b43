package spec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// TestDocumentSchema checks the published schema against the corpus: every document
// the validator accepts conforms to it, and documents with shape errors do not.
func TestDocumentSchema(t *testing.T) {
	sch := compileDocumentSchema(t)
	v := NewValidator(corpusDeployment())
	wants, err := filepath.Glob(filepath.Join(corpusDir, "*.want"))
	if err != nil {
		t.Fatal(err)
	}
	shapeErrors := []string{"custom_code", "wrong_types", "unknown_keys", "sdk_only_keys", "tools_invalid", "graph_on_error", "graph_termination", "graph_roles_hitl"}
	for _, want := range wants {
		base := strings.TrimSuffix(want, ".want")
		var doc string
		for _, ext := range []string{".yaml", ".json"} {
			if _, err := os.Stat(base + ext); err == nil {
				doc = base + ext
			}
		}
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		res, err := v.Validate(Input{Document: data})
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(base)
		switch {
		case res.Valid():
			if err := sch.Validate(yamlToJSONValue(t, data)); err != nil {
				t.Errorf("%s is valid but does not conform to DocumentSchema: %v", name, err)
			}
		case slices.Contains(shapeErrors, name):
			if err := sch.Validate(rawValue(t, data)); err == nil {
				t.Errorf("%s has shape errors but conforms to DocumentSchema", name)
			}
		}
	}
}

// rawValue is the document's JSON data as written (unknown keys included), for
// checking it against the schema without the decoder's filtering.
func rawValue(t testing.TB, data []byte) any {
	t.Helper()
	doc := Decode(data, agentplanev1.DocumentFormat_DOCUMENT_FORMAT_UNSPECIFIED, Limits{})
	if doc.root == nil {
		t.Fatalf("does not parse: %v", doc.Violations())
	}
	var conv func(n *node) any
	conv = func(n *node) any {
		switch n.kind {
		case kindBool:
			return n.b
		case kindNumber:
			return json.Number(n.str)
		case kindString:
			return n.str
		case kindArray:
			out := make([]any, len(n.items))
			for i, item := range n.items {
				out[i] = conv(item)
			}
			return out
		case kindObject:
			out := map[string]any{}
			for _, m := range n.members {
				if !m.dup {
					out[m.key] = conv(m.val)
				}
			}
			return out
		}
		return nil
	}
	return conv(doc.root)
}
