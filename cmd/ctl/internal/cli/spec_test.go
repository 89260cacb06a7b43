package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/server/servertest"
)

const badAgent = `apiVersion: qar/v1
kind: AgentSpec
instructions: "Be brief."
model: gpt-4o
custom_code: {run: "rm -rf /"}
`

const goodAgent = `apiVersion: qar/v1
kind: AgentSpec
instructions: "Be brief."
model: gpt-4o
`

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSpecValidate(t *testing.T) {
	in := servertest.Start(t, nil)
	good := writeTemp(t, "good.yaml", goodAgent)
	bad := writeTemp(t, "bad.yaml", badAgent)

	code, out, _ := runCtl(t, in.GRPCAddr, "spec", "validate", good)
	if code != 0 || !strings.Contains(out, "valid AgentSpec") {
		t.Fatalf("valid document: exit %d\n%s", code, out)
	}

	code, out, errOut := runCtl(t, in.GRPCAddr, "spec", "validate", good, bad)
	if code != exitFailed {
		t.Fatalf("invalid document: want exit 1, got %d (%s)", code, errOut)
	}
	// file:line:col: RULE_ID path: message, pointing at custom_code on line 5.
	want := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(bad) + `:5:1: D10-R1 /custom_code: .+$`)
	if !want.MatchString(out) {
		t.Fatalf("no compiler-style line for D10-R1 at 5:1:\n%s", out)
	}

	code, _, errOut = runCtl(t, in.GRPCAddr, "spec", "validate", filepath.Join(t.TempDir(), "missing.yaml"))
	if code != exitUsage || !strings.Contains(errOut, "missing.yaml") {
		t.Fatalf("unreadable input: want exit 2 naming the file, got %d %q", code, errOut)
	}

	code, out, _ = runCtl(t, in.GRPCAddr, "spec", "validate", "-o", "json", bad)
	var resp struct {
		Valid  *bool `json:"valid"`
		Errors []struct {
			RuleID string `json:"rule_id"`
			Path   string `json:"path"`
		} `json:"errors"`
	}
	if code != exitFailed || json.Unmarshal([]byte(out), &resp) != nil || resp.Valid == nil || *resp.Valid {
		t.Fatalf("-o json: exit %d\n%s", code, out)
	}
	if len(resp.Errors) != 1 || resp.Errors[0].RuleID != "D10-R1" || resp.Errors[0].Path != "/custom_code" {
		t.Fatalf("-o json errors = %+v", resp.Errors)
	}
}

func TestSpecValidateStdin(t *testing.T) {
	in := servertest.Start(t, nil)
	var out strings.Builder
	code := Main([]string{"--addr", in.GRPCAddr, "spec", "validate", "-"}, strings.NewReader(badAgent), &out, &strings.Builder{})
	if code != exitFailed || !strings.Contains(out.String(), "-:5:1: D10-R1") {
		t.Fatalf("stdin: exit %d\n%s", code, out.String())
	}
}

func TestSpecRulesExplainSchema(t *testing.T) {
	in := servertest.Start(t, nil)
	code, out, _ := runCtl(t, in.GRPCAddr, "spec", "rules")
	for _, id := range []string{"D10-R1", "D10-UNSUPPORTED", "D10-UNSUPPORTED-SPAWN", "D11-R3", "D11-R12", "D13-R2", "D13-R3", "D13-R5"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(id) + `\s`).MatchString(out) {
			t.Errorf("spec rules lacks %s", id)
		}
	}
	if code != 0 {
		t.Fatalf("spec rules: exit %d", code)
	}

	code, out, _ = runCtl(t, in.GRPCAddr, "spec", "explain", "D11-R3")
	if code != 0 || !strings.Contains(out, "D11-R3") || !strings.Contains(out, "A document that breaks it") {
		t.Fatalf("spec explain: exit %d\n%s", code, out)
	}
	code, _, errOut := runCtl(t, in.GRPCAddr, "spec", "explain", "D99-R99")
	if code != exitFailed || !strings.Contains(errOut, "RULE_NOT_FOUND") {
		t.Fatalf("unknown rule: exit %d %q", code, errOut)
	}

	code, out, _ = runCtl(t, in.GRPCAddr, "spec", "schema")
	var schema map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &schema) != nil || schema["$schema"] == nil {
		t.Fatalf("spec schema: exit %d, not a JSON Schema:\n%.200s", code, out)
	}
}
