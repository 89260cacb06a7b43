package agent

import (
	"strings"
	"testing"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

func TestFunctionName(t *testing.T) {
	long := "crm__" + strings.Repeat("a", 80)
	for in, want := range map[string]string{
		"crm__lookup":           "crm__lookup",
		"crm__stats.v2":         "crm__stats_v2",
		"a2a__shipping__eta/v2": "a2a__shipping__eta_v2",
		"":                      "_",
	} {
		if got := FunctionName(in); got != want {
			t.Errorf("FunctionName(%q) = %q, want %q", in, got, want)
		}
	}
	a, b := FunctionName(long+"x"), FunctionName(long+"y")
	if len(a) != 64 || len(b) != 64 || a == b {
		t.Errorf("long names: %q, %q: want 64 bytes each and distinct", a, b)
	}
}

func TestTruncate(t *testing.T) {
	if got := Truncate("short", 10); got != "short" {
		t.Errorf("Truncate(short) = %q", got)
	}
	got := Truncate("ééééé", 5) // 10 bytes; byte 5 is inside a rune
	if !strings.HasPrefix(got, "éé\n[result truncated at 5 bytes]") {
		t.Errorf("Truncate on a rune boundary = %q", got)
	}
}

// TestCallsKeepGateName: the gate name of a remote tool call survives the round trip
// through the assistant message's data part, for a later lease to gate it the same.
func TestCallsKeepGateName(t *testing.T) {
	part, err := modelPart([]call{{ModelID: "c1", ID: "m.0", Name: "crm__refund", Arguments: `{}`, Tool: "crm.refund"}, {ModelID: "c2", ID: "m.1", Name: "local", Arguments: `{}`}}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := callsOf(&agentplanev1.Message{Parts: []*agentplanev1.Part{part}})
	if len(got) != 2 || got[0].Tool != "crm.refund" || got[1].Tool != "" || got[0].Name != "crm__refund" || got[0].ModelID != "c1" || got[0].ID != "m.0" {
		t.Errorf("calls read back: %+v", got)
	}
}
