package mcptool

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/cmd/runtime/internal/agenttest"
	"github.com/agentplane/agentplane/cmd/runtime/internal/mcptest"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// TestHostileServerListing: of a hostile server's listing the runtime offers the
// tools with MCP names (dots escaped for the model, the gate keeping the server's
// name), refuses control characters, spaces, non-ASCII, over-long and empty names,
// every tool of a clash after escaping, and an input schema over the cap, cuts a
// 1 MiB description, and says so in one note.
func TestHostileServerListing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := mcptest.StartHostile(t)
	var rec agenttest.Notes
	tools, release, err := (&Provider{}).MountServers(ctx, []*agentplanev1.McpServer{{Name: "evil", Url: h.URL + "/tools"}}, quiet, rec.Note)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	m := byGate(tools)
	want := map[string]string{
		"evil.ok": "evil__ok", "evil.dots.in.name": "evil__dots_in_name", "evil.x__y": "evil__x__y", "evil.flood": "evil__flood",
		"evil.flood_sse": "evil__flood_sse", "evil.flood_events": "evil__flood_events", "evil.silent": "evil__silent", "evil.huge_desc": "evil__huge_desc",
	}
	if len(m) != len(want) {
		names := make([]string, 0, len(m))
		for n := range m {
			names = append(names, n)
		}
		t.Errorf("mounted %q, want the %d tools with valid, unique names", names, len(want))
	}
	for gate, model := range want {
		if m[gate] == nil || m[gate].ModelName != model {
			t.Errorf("tool %s mounted as %+v, want model name %s", gate, m[gate], model)
		}
	}
	if d := m["evil.huge_desc"].Description; len(d) > DefaultMaxDescriptionBytes+64 || !strings.Contains(d, "[description truncated at 4096 bytes]") {
		t.Errorf("huge_desc's description is %d bytes (%.40q...), want cut at %d and marked", len(d), d, DefaultMaxDescriptionBytes)
	}
	if len(rec.Texts) != 1 {
		t.Fatalf("notes %q, want one naming the refused tools", rec.Texts)
	}
	for _, s := range []string{"11 listed tools not offered", `"evil.bell\a"`, `"evil.esc\x1b[31mred"`, `"\xe6" at byte 0`,
		"2 of the listed tools would be offered to the model as evil__a_b", "mcp.max_schema_bytes", "and 3 more"} {
		if !strings.Contains(rec.Texts[0], s) {
			t.Errorf("the note %q does not say %q", rec.Texts[0], s)
		}
	}
	// The gate's name is the name that runs.
	if res, isErr := m["evil.dots.in.name"].Run(ctx, `{}`); isErr || res != "ran dots.in.name" {
		t.Errorf("dots.in.name answered %q (error %v)", res, isErr)
	}
	if calls := h.Calls(); len(calls) != 1 || calls[0] != "dots.in.name" {
		t.Errorf("the server ran %q", calls)
	}
}

// TestHostileServerCalls: an answer of 400 MiB (JSON), an event that never ends, an
// endless stream of notifications, and no answer at all each fail their call with a
// tool error the model reads, quickly for the sizes, at call_timeout for silence; the
// next call on the server works.
func TestHostileServerCalls(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := mcptest.StartHostile(t)
	p := &Provider{CallTimeout: 2 * time.Second}
	tools, release, err := p.MountServers(ctx, []*agentplanev1.McpServer{{Name: "evil", Url: h.URL + "/tools"}}, quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	m := byGate(tools)
	for _, c := range []struct{ tool, want string }{
		{"evil.flood", "its answer is larger than 196608 bytes"},
		{"evil.flood_sse", "its answer is larger than 196608 bytes"},
		{"evil.flood_events", "its answer is larger than 786432 bytes"},
		{"evil.silent", "timed out after 2s"},
	} {
		res, isErr := m[c.tool].Run(ctx, `{}`)
		if !isErr || !strings.Contains(res, c.want) {
			t.Errorf("%s answered %.200q (error %v), want a tool error saying %q", c.tool, res, isErr, c.want)
		}
		if res, isErr := m["evil.ok"].Run(ctx, `{}`); isErr || res != "ran ok" {
			t.Errorf("after %s, ok answered %.200q (error %v)", c.tool, res, isErr)
		}
	}
}

// TestHostileServerUnlisted: 10,000 tools over pages give max_tools tools and a note;
// 10,000 tools on one page of several MiB, and a server that never answers, are
// skipped with a note, within connect_timeout.
func TestHostileServerUnlisted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := mcptest.StartHostile(t)
	var rec agenttest.Notes
	// The listings under a generous timeout (building the one page is slow under the
	// race detector), the silent server under a short one.
	tools, release, err := (&Provider{ConnectTimeout: 20 * time.Second}).MountServers(ctx, []*agentplanev1.McpServer{
		{Name: "many", Url: h.URL + "/many"}, {Name: "onepage", Url: h.URL + "/onepage"},
	}, quiet, rec.Note)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	silent, release2, err := (&Provider{ConnectTimeout: 2 * time.Second}).MountServers(ctx, []*agentplanev1.McpServer{{Name: "silent", Url: h.URL + "/silent"}}, quiet, rec.Note)
	if err != nil || len(silent) != 0 {
		t.Fatalf("the silent server mounted %d tools (%v)", len(silent), err)
	}
	defer release2()
	if len(tools) != DefaultMaxTools || tools[0].GateName != "many.t00000" {
		t.Errorf("mounted %d tools, want the first %d of many", len(tools), DefaultMaxTools)
	}
	want := []string{"MCP server many: 1 listed tools not offered: the server lists more than 128 tools (mcp.max_tools)",
		"MCP server onepage unavailable, its tools are not offered: list tools: the server sent more than 2097152 bytes (mcp.max_list_bytes)",
		"MCP server silent unavailable, its tools are not offered: connect: no answer within 2s (mcp.connect_timeout)"}
	if len(rec.Texts) != len(want) {
		t.Fatalf("notes %q, want %d", rec.Texts, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(rec.Texts[i], w) {
			t.Errorf("note %q, want it to start %q", rec.Texts[i], w)
		}
	}
}
