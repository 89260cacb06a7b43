package spec

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

var update = flag.Bool("update", false, "rewrite golden files (docs/rules.md, testdata/specs/*.want) from the current output")

func TestCatalogueOrderAndUniqueness(t *testing.T) {
	if !catalogueSorted() {
		t.Fatal("catalogue is not in CompareRuleIDs order")
	}
	seen := map[string]bool{}
	for _, r := range catalogue {
		if seen[r.id] {
			t.Errorf("rule %s listed twice", r.id)
		}
		seen[r.id] = true
		if r.summary == "" || r.description == "" || r.example == "" || r.scope == "" {
			t.Errorf("rule %s has an empty field", r.id)
		}
	}
	for _, id := range []string{"D10-R1", "D10-UNSUPPORTED", "D10-UNSUPPORTED-SPAWN", "D11-R3", "D11-R12", "D13-R2", "D13-R3", "D13-R5"} {
		if !seen[id] {
			t.Errorf("rule %s, which docs/vocabulary.md names, missing from the catalogue", id)
		}
	}
}

func TestCompareRuleIDs(t *testing.T) {
	ids := []string{"DOC-YAML", "D11-W1", "D10-R10", "D13-R1", "D10-UNSUPPORTED-SPAWN", "D10-R2", "D10-W1", "D10-UNSUPPORTED", "DOC-SYNTAX", "D11-R12"}
	slices.SortFunc(ids, CompareRuleIDs)
	want := []string{"D10-R2", "D10-R10", "D10-UNSUPPORTED", "D10-UNSUPPORTED-SPAWN", "D10-W1", "D11-R12", "D11-W1", "D13-R1", "DOC-SYNTAX", "DOC-YAML"}
	if !slices.Equal(ids, want) {
		t.Fatalf("got %v, want %v", ids, want)
	}
}

// TestRuleExamples proves every catalogue entry's failing example fails with that
// rule under ExampleDeployment.
func TestRuleExamples(t *testing.T) {
	v := NewValidator(ExampleDeployment())
	for _, r := range catalogue {
		t.Run(r.id, func(t *testing.T) {
			var got []*agentplanev1.SpecViolation
			switch r.scope {
			case ScopeVerdict:
				vr := &agentplanev1.VerdictResult{}
				if err := protojson.Unmarshal([]byte(r.example), vr); err != nil {
					t.Fatal(err)
				}
				got = CheckVerdict(vr, "")
			case ScopeAllocation:
				var ex struct {
					Allocation json.RawMessage
					Remaining  Budget
				}
				if err := json.Unmarshal([]byte(r.example), &ex); err != nil {
					t.Fatal(err)
				}
				a := &agentplanev1.SubgraphAllocation{}
				if err := protojson.Unmarshal(ex.Allocation, a); err != nil {
					t.Fatal(err)
				}
				got = CheckAllocation(a, ex.Remaining, "/allocation")
			default:
				res, err := v.Validate(Input{Document: []byte(r.example)})
				if err != nil {
					t.Fatal(err)
				}
				got = res.Errors
				if r.warning {
					if !res.Valid() {
						t.Errorf("a warning's example should be otherwise valid; errors: %v", res.Errors)
					}
					got = res.Warnings
				}
			}
			if !slices.ContainsFunc(got, func(v *agentplanev1.SpecViolation) bool { return v.GetRuleId() == r.id }) {
				t.Errorf("example does not produce %s; got %v", r.id, got)
			}
		})
	}
}

func TestLookupRule(t *testing.T) {
	r, ok := LookupRule("D11-R3")
	if !ok || r.GetRuleId() != "D11-R3" || r.GetSeverity() != agentplanev1.RuleSeverity_RULE_SEVERITY_ERROR {
		t.Fatalf("LookupRule(D11-R3) = %v, %v", r, ok)
	}
	r.Summary = "changed"
	if again, _ := LookupRule("D11-R3"); again.GetSummary() == "changed" {
		t.Fatal("LookupRule returned shared state")
	}
	if _, ok := LookupRule("D99-R1"); ok {
		t.Fatal("unknown id found")
	}
	if w, _ := LookupRule(WarnUnreachable); w.GetSeverity() != agentplanev1.RuleSeverity_RULE_SEVERITY_WARNING {
		t.Fatal("warning rule has error severity")
	}
}

// TestRulesDoc keeps docs/rules.md equal to the catalogue. Regenerate with
//
//	go test ./server/spec -run TestRulesDoc -update
func TestRulesDoc(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "rules.md")
	want := RulesMarkdown()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate it with: go test ./server/spec -run TestRulesDoc -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/rules.md is stale; regenerate it with: go test ./server/spec -run TestRulesDoc -update")
	}
}
