package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentplane/agentplane/client/worker"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/tracing"
)

// RemoteTool is a tool a ToolProvider mounted for one lease: an MCP server's tool or an
// A2A peer's skill. The model sees it as ModelName; the gate, the policies and the
// task's events know it as GateName.
type RemoteTool struct {
	// ModelName is the function name offered to the model (OpenAI's rules: letters,
	// digits, '_' and '-', at most 64 bytes; see FunctionName).
	ModelName string
	// GateName is the name CheckToolCall and the tool_call events carry
	// ("<server>.<tool>", "a2a__<peer>__<skill>").
	GateName    string
	Description string
	// Parameters is the JSON Schema of the arguments (an object schema).
	Parameters map[string]any
	// Annotations are the MCP tool annotations as the server declared them: the gate
	// lets them tighten only.
	Annotations *agentplanev1.McpToolAnnotations
	// Run runs the call with the gate's arguments and returns the result text for the
	// model and whether it is a tool error. It never returns a Go error: a failure is
	// a tool error the model reads.
	Run func(ctx context.Context, argumentsJSON string) (result string, isError bool)
}

// ToolProvider mounts remote tools for one lease of a task (from Lease.mcp_servers,
// Lease.a2a_peers). release is called when the lease's run ends and closes what Mount
// opened (sessions, connections); it is never nil when err is nil. A provider reports
// the servers it could not reach itself (log, note) and mounts the others: err is for
// what makes the whole lease unrunnable.
type ToolProvider interface {
	Mount(ctx context.Context, t *worker.Task, log *slog.Logger) (tools []*RemoteTool, release func(), err error)
}

// maxFunctionName is the longest function name OpenAI's Chat Completions accept.
const maxFunctionName = 64

// Note writes a note event to the task's log (worker.Task.Note).
type Note func(ctx context.Context, text string, attrs map[string]string) error

// MountEach mounts the endpoints named names (a lease's MCP servers or A2A peers) with
// mount(i). One that fails is skipped: logged, and noted in the task's log (note may be
// nil) so that a user sees why its tools are missing; label names the kind in both
// ("MCP server"), attr is the note's attribute key ("mcp_server"). When ctx ends,
// what was mounted is released and ctx's cause returned.
func MountEach(ctx context.Context, log *slog.Logger, note Note, label, attr string, names []string,
	mount func(ctx context.Context, i int) ([]*RemoteTool, func(), error)) ([]*RemoteTool, func(), error) {
	var (
		tools    []*RemoteTool
		releases []func()
	)
	release := func() {
		for _, f := range releases {
			f()
		}
	}
	for i, name := range names {
		ts, rel, err := mount(ctx, i)
		if err != nil {
			if ctx.Err() != nil {
				release()
				return nil, nil, context.Cause(ctx)
			}
			log.Warn(label+" unavailable; its tools are not mounted", "name", name, "err", err)
			if note != nil {
				_ = note(ctx, fmt.Sprintf("%s %s unavailable, its tools are not offered: %v", label, name, err), map[string]string{attr: name})
			}
			continue
		}
		releases = append(releases, rel)
		tools = append(tools, ts...)
	}
	return tools, release, nil
}

// OrDefault is v, or def when v is not positive (a limit left unset).
func OrDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// FunctionName makes name a valid model function name: every byte outside
// [A-Za-z0-9_-] becomes '_', and a name longer than 64 bytes is cut and suffixed with a
// hash of the whole name, so distinct long names stay distinct. Valid names pass
// unchanged.
func FunctionName(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	if len(b) <= maxFunctionName {
		return string(b)
	}
	sum := sha256.Sum256([]byte(name))
	return string(b[:maxFunctionName-9]) + "_" + hex.EncodeToString(sum[:4])
}

// Truncate cuts s to at most limit bytes (default 64 KiB when limit <= 0), on a rune
// boundary, and says so at the end.
func Truncate(s string, limit int) string { return TruncateAs(s, limit, "result") }

// TruncateAs is Truncate marking the cut as one of what ("result", "description").
// The cut text is a copy, so that what was cut off can be freed.
func TruncateAs(s string, limit int, what string) string {
	if limit <= 0 {
		limit = 64 << 10
	}
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[%s truncated at %d bytes]", what, limit)
}

// HeaderClient returns an HTTP client that sends headers (a lease's configured
// headers for one server or peer, credentials included) on every request, and the
// trace context of the request's context (tracedTransport), and reads no more of a
// response than the ReadLimit of the request's context (WithReadLimit) allows.
func HeaderClient(headers map[string]string) *http.Client {
	var rt http.RoundTripper = tracedTransport{next: limitTransport{next: http.DefaultTransport}}
	if len(headers) == 0 {
		return &http.Client{Transport: rt}
	}
	h := make(http.Header, len(headers))
	for k, v := range headers {
		h.Set(k, v)
	}
	return &http.Client{Transport: headerTransport{h: h, next: rt}}
}

// tracedTransport sends the W3C trace context (traceparent, tracestate) of each
// request's context, when it has a span (tracing on: the execute_tool span), so that
// a tool, MCP server or A2A peer that traces joins the task's trace.
type tracedTransport struct{ next http.RoundTripper }

func (t tracedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(r.Context()).IsValid() {
		return t.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	tracing.Propagator.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
	return t.next.RoundTrip(r)
}

type headerTransport struct {
	h    http.Header
	next http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range t.h {
		r.Header[k] = vs
	}
	return t.next.RoundTrip(r)
}

// mount asks every provider for its tools. A tool whose model name is already taken
// (by the agent's function tools, the runtime's HTTP tools or an earlier remote tool)
// is not mounted and logged.
func (tu *turn) mount(ctx context.Context) (release func(), err error) {
	var releases []func()
	release = func() {
		for _, f := range releases {
			f()
		}
	}
	tu.remote = map[string]*RemoteTool{}
	for _, p := range tu.r.Providers {
		tools, rel, err := p.Mount(ctx, tu.t, tu.log)
		if err != nil {
			release()
			return nil, err
		}
		releases = append(releases, rel)
		for _, rt := range tools {
			if tu.functionTool(rt.ModelName) != nil || tu.httpTool(rt.ModelName) != nil || tu.remote[rt.ModelName] != nil {
				tu.log.Warn("remote tool not mounted: its function name is taken", "tool", rt.GateName, "function", rt.ModelName)
				continue
			}
			tu.remote[rt.ModelName] = rt
			tu.remoteOrder = append(tu.remoteOrder, rt)
		}
	}
	return release, nil
}

// remoteTool returns the mounted remote tool the model calls name, unless an agent's
// function tool or a runtime HTTP tool has that name.
func (tu *turn) remoteTool(name string) *RemoteTool {
	if tu.functionTool(name) != nil || tu.httpTool(name) != nil {
		return nil
	}
	return tu.remote[name]
}
