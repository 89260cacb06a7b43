package mcptool

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/cmd/runtime/internal/agent"
	"github.com/agentplane/agentplane/cmd/runtime/internal/agenttest"
	"github.com/agentplane/agentplane/cmd/runtime/internal/mcptest"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

var quiet = agenttest.Quiet

func byGate(tools []*agent.RemoteTool) map[string]*agent.RemoteTool {
	m := map[string]*agent.RemoteTool{}
	for _, rt := range tools {
		m[rt.GateName] = rt
	}
	return m
}

// TestMountAndCall: the tools of a Go SDK server are listed over streamable HTTP with
// the lease's headers, named "<server>__<tool>" for the model and "<server>.<tool>"
// for the gate, annotations carried as declared; calls run on one session, errors
// and oversize results come back as the model reads them.
func TestMountAndCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := mcptest.Start(t, func(s *mcptest.Server) { s.Header, s.HeaderValue = "Authorization", "Bearer crm-token" })
	p := &Provider{MaxResultBytes: 100 << 10} // big's 200 KiB are within the read limit: cut, not refused
	var rec agenttest.Notes
	tools, release, err := p.MountServers(ctx, []*agentplanev1.McpServer{
		{Name: "crm", Url: srv.URL, Headers: map[string]string{"Authorization": "Bearer crm-token"}},
		{Name: "nocreds", Url: srv.URL}, // the server refuses it: 401
	}, quiet, rec.Note)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if len(rec.Texts) != 1 || !strings.Contains(rec.Texts[0], "MCP server nocreds unavailable") {
		t.Errorf("notes %q, want one saying nocreds is unavailable", rec.Texts)
	}
	m := byGate(tools)
	if len(tools) != 6 || len(m) != 6 {
		t.Fatalf("mounted %d tools: %v", len(tools), m)
	}
	for gate, model := range map[string]string{"crm.lookup": "crm__lookup", "crm.refund": "crm__refund", "crm.stats.v2": "crm__stats_v2"} {
		if m[gate] == nil || m[gate].ModelName != model {
			t.Errorf("tool %s mounted as %+v, want model name %s", gate, m[gate], model)
		}
	}
	if a := m["crm.wipe"].Annotations; !a.GetDestructiveHint() || a.ReadOnlyHint != nil {
		t.Errorf("wipe's annotations %v, want destructiveHint only", a)
	}
	if a := m["crm.lookup"].Annotations; !a.GetReadOnlyHint() || a.DestructiveHint != nil {
		t.Errorf("lookup's annotations %v, want readOnlyHint only (no default filled in)", a)
	}
	if m["crm.refund"].Annotations != nil {
		t.Errorf("refund has annotations %v, the server declared none", m["crm.refund"].Annotations)
	}
	if props, _ := m["crm.lookup"].Parameters["properties"].(map[string]any); props["order_id"] == nil {
		t.Errorf("lookup's schema %v lacks order_id", m["crm.lookup"].Parameters)
	}

	for _, c := range []struct {
		tool, args, want string
		isErr            bool
	}{
		{"crm.lookup", `{"order_id":42}`, "order 42: shipped", false},
		{"crm.stats.v2", `{}`, "42 open tickets", false},
		{"crm.fails", `{}`, "no such order", true},
		{"crm.lookup", `{"order_id":"x"}`, "order_id", true}, // the server rejects the arguments
		{"crm.lookup", `not json`, "not a JSON object", true},
	} {
		got, isErr := m[c.tool].Run(ctx, c.args)
		if isErr != c.isErr || !strings.Contains(got, c.want) {
			t.Errorf("%s(%s) = %q, %v; want %q, %v", c.tool, c.args, got, isErr, c.want, c.isErr)
		}
	}
	got, isErr := m["crm.big"].Run(ctx, `{}`)
	if isErr || len(got) > 100<<10+100 || !strings.HasSuffix(got, "[result truncated at 102400 bytes]") {
		t.Errorf("big: %d bytes, error %v, ends %q", len(got), isErr, got[max(0, len(got)-40):])
	}
	if srv.Calls("lookup") != 1 || srv.Calls("fails") != 1 || srv.Calls("big") != 1 {
		t.Errorf("server-side calls: lookup %d, fails %d, big %d", srv.Calls("lookup"), srv.Calls("fails"), srv.Calls("big"))
	}
}

// TestCallTimeout: a call longer than CallTimeout is a tool error saying so, and the
// session still serves the next call.
func TestCallTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hold := make(chan struct{})
	defer close(hold)
	srv := mcptest.Start(t, func(s *mcptest.Server) { s.Hold, s.Started = hold, make(chan struct{}, 1) })
	p := &Provider{CallTimeout: 300 * time.Millisecond}
	tools, release, err := p.MountServers(ctx, []*agentplanev1.McpServer{{Name: "crm", Url: srv.URL}}, quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	m := byGate(tools)
	got, isErr := m["crm.refund"].Run(ctx, `{"order_id":7}`)
	if !isErr || !strings.Contains(got, "timed out") {
		t.Errorf("refund = %q, %v; want a timeout error", got, isErr)
	}
	if got, isErr := m["crm.lookup"].Run(ctx, `{"order_id":7}`); isErr || got != "order 7: shipped" {
		t.Errorf("lookup after the timeout = %q, %v", got, isErr)
	}
}

// TestServerGone: a server that stops between calls gives a tool error, not a crash.
func TestServerGone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := mcptest.Start(t, nil)
	p := &Provider{}
	tools, release, err := p.MountServers(ctx, []*agentplanev1.McpServer{{Name: "crm", Url: srv.URL}}, quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	srv.Close()
	got, isErr := byGate(tools)["crm.lookup"].Run(ctx, `{"order_id":1}`)
	if !isErr || !strings.Contains(got, "crm") {
		t.Errorf("lookup on a stopped server = %q, %v", got, isErr)
	}
}
