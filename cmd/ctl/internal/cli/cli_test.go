package cli

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/server/servertest"
)

// runCtl runs ctl in-process against addr and returns its exit code, stdout and stderr.
func runCtl(t *testing.T, addr string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(append([]string{"--addr", addr}, args...), strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestHealthAndCapabilities(t *testing.T) {
	in := servertest.Start(t, nil)

	code, out, errOut := runCtl(t, in.GRPCAddr, "health")
	if code != 0 || !strings.Contains(out, "SERVING") {
		t.Fatalf("health: code %d out %q err %q", code, out, errOut)
	}

	code, out, errOut = runCtl(t, in.GRPCAddr, "capabilities")
	if code != 0 || !strings.Contains(out, "server version") || !strings.Contains(out, "feature: http/json") {
		t.Fatalf("capabilities table: code %d out %q err %q", code, out, errOut)
	}
	// The faces as this deployment serves them: /mcp and /a2a/ on, push on, no static
	// agent so no default card.
	folded := regexp.MustCompile(` +`).ReplaceAllString(out, " ")
	for _, want := range []string{"\nmcp face /mcp (versions 2025-11-25, ", "\na2a face /a2a/AGENT_ID (versions 1.0, 0.3)\n",
		"\na2a push notifications yes\n", "\na2a default card -\n"} {
		if !strings.Contains(folded, want) {
			t.Errorf("capabilities table: want %q in %q", want, out)
		}
	}

	code, out, _ = runCtl(t, in.GRPCAddr, "capabilities", "-o", "json")
	var doc map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || doc["capabilities"] == nil {
		t.Fatalf("capabilities -o json: code %d out %q", code, out)
	}

	code, out, _ = runCtl(t, in.GRPCAddr, "capabilities", "-o", "yaml")
	if code != 0 || !strings.Contains(out, "capabilities:") {
		t.Fatalf("capabilities -o yaml: code %d out %q", code, out)
	}
}

func TestUnreachableServerFails(t *testing.T) {
	code, _, errOut := runCtl(t, "127.0.0.1:1", "health", "--timeout", "2s")
	if code != exitFailed || !strings.Contains(errOut, "Unavailable") {
		t.Fatalf("want exit 1 with Unavailable, got %d %q", code, errOut)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"-o", "xml", "health"}, {"health", "--no-such-flag"}, {"nosuchcommand"}} {
		code, _, errOut := runCtl(t, "127.0.0.1:1", args...)
		if code != exitUsage {
			t.Errorf("%v: want exit 2, got %d (%q)", args, code, errOut)
		}
	}
}

func TestVersionWithoutServer(t *testing.T) {
	code, out, _ := runCtl(t, "127.0.0.1:1", "version", "--timeout", "1s")
	if code != 0 || !strings.Contains(out, "ctl") || !strings.Contains(out, "unreachable") {
		t.Fatalf("version: %d %q", code, out)
	}
}
