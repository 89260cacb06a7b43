package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

const corpusDir = "../../testdata/specs"

// corpusDeployment is the deployment the golden corpus is validated against.
func corpusDeployment() Deployment {
	d := ExampleDeployment()
	d.StaticAgents["triager"] = &agentplanev1.AgentSpec{
		ApiVersion:   APIVersion,
		Kind:         KindAgent,
		Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "Sort incoming issues."}},
		Model:        "gpt-4.1-mini",
	}
	d.MaxDocumentBytes = 64 << 10
	return d
}

// golden renders a result as the lines of a .want file: severity, rule id, path and
// position, one finding per line, in the order reported.
func golden(res *Result) string {
	var b strings.Builder
	write := func(sev string, vs []*agentplanev1.SpecViolation) {
		for _, v := range vs {
			path := v.GetPath()
			if path == "" {
				path = `""`
			}
			fmt.Fprintf(&b, "%s %s %s %d:%d\n", sev, v.GetRuleId(), path, v.GetPosition().GetLine(), v.GetPosition().GetColumn())
		}
	}
	write("error", res.Errors)
	write("warning", res.Warnings)
	return b.String()
}

// TestCorpus validates every document under testdata/specs and compares the
// findings (rule id, path, position) with its .want file; an empty .want file means
// valid without warnings. Regenerate with
//
//	go test ./server/spec -run TestCorpus -update
//
// and review the diff: the .want files are the specification of the corpus.
func TestCorpus(t *testing.T) {
	entries, err := os.ReadDir(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	v := NewValidator(corpusDeployment())
	docs := 0
	for _, e := range entries {
		name := e.Name()
		ext := filepath.Ext(name)
		if ext != ".yaml" && ext != ".json" {
			continue
		}
		docs++
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(corpusDir, name))
			if err != nil {
				t.Fatal(err)
			}
			format := agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML
			if ext == ".json" {
				format = agentplanev1.DocumentFormat_DOCUMENT_FORMAT_JSON
			}
			res, err := v.Validate(Input{Document: data, Format: format, DocumentName: name})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range append(append([]*agentplanev1.SpecViolation(nil), res.Errors...), res.Warnings...) {
				if _, ok := LookupRule(f.GetRuleId()); !ok {
					t.Errorf("finding with a rule id outside the catalogue: %v", f)
				}
				if f.GetMessage() == "" || f.GetPosition() == nil {
					t.Errorf("finding without message or position: %v", f)
				}
			}
			got := golden(res)
			wantFile := filepath.Join(corpusDir, strings.TrimSuffix(name, ext)+".want")
			if *update {
				if err := os.WriteFile(wantFile, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(wantFile)
			if err != nil {
				t.Fatalf("%v (create it with -update and review it)", err)
			}
			if got != string(want) {
				t.Errorf("findings differ from %s\n--- got\n%s--- want\n%s", wantFile, got, want)
				for _, f := range append(res.Errors, res.Warnings...) {
					t.Log(FormatViolation(name, f))
				}
			}
		})
	}
	if docs < 60 {
		t.Errorf("the corpus has %d documents; keep at least 60", docs)
	}
}
