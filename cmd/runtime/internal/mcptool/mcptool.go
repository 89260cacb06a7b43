// Package mcptool mounts the tools of a task's effective MCP servers (Lease.mcp_servers)
// for the agent runner, through the official Go SDK over streamable HTTP: one session
// per server and lease, tools mounted as "<server>__<tool>" for the model and gated and
// reported as "<server>.<tool>".
package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/client/worker"
	"github.com/agentplane/agentplane/cmd/runtime/internal/agent"
	"github.com/agentplane/agentplane/cmd/runtime/internal/telemetry"
	"github.com/agentplane/agentplane/gates"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Defaults of Provider's limits.
const (
	DefaultConnectTimeout      = 10 * time.Second
	DefaultCallTimeout         = 60 * time.Second
	DefaultMaxResultBytes      = 64 << 10
	DefaultMaxTools            = 128
	DefaultMaxListBytes        = 2 << 20
	DefaultMaxDescriptionBytes = 4 << 10
	DefaultMaxSchemaBytes      = 64 << 10
	// maxTitleBytes caps a tool's title annotation (shown to people approving calls).
	maxTitleBytes = 256
)

// Provider is an agent.ToolProvider for MCP servers.
type Provider struct {
	// ConnectTimeout bounds connecting to a server and listing its tools, together.
	ConnectTimeout time.Duration
	// CallTimeout bounds one tool call.
	CallTimeout time.Duration
	// MaxResultBytes caps the result text handed to the model and reported; an
	// answer over agent.ResponseLimit of it fails the call.
	MaxResultBytes int
	// MaxTools caps the tools mounted from one server.
	MaxTools int
	// MaxListBytes caps what is read of a server's initialize answer, and of its tool
	// listing (every page together); past it the server is skipped.
	MaxListBytes int
	// MaxDescriptionBytes caps a tool's description (cut and marked beyond);
	// MaxSchemaBytes its input schema (a tool with a larger one is not offered).
	MaxDescriptionBytes int
	MaxSchemaBytes      int
	// Version is the client version sent at initialization.
	Version string
}

var _ agent.ToolProvider = (*Provider)(nil)

// Mount connects to every MCP server of the lease, lists its tools and mounts them. A
// server that cannot be reached or listed is skipped: logged, and noted in the task's
// log so that a user sees why its tools are missing.
func (p *Provider) Mount(ctx context.Context, t *worker.Task, log *slog.Logger) ([]*agent.RemoteTool, func(), error) {
	return p.MountServers(ctx, t.Lease().GetMcpServers(), log, t.Note)
}

// MountServers is Mount for a list of servers; note (may be nil) writes a note to the
// task's log.
func (p *Provider) MountServers(ctx context.Context, servers []*agentplanev1.McpServer, log *slog.Logger, note agent.Note) ([]*agent.RemoteTool, func(), error) {
	names := make([]string, len(servers))
	for i, s := range servers {
		names[i] = s.GetName()
	}
	return agent.MountEach(ctx, log, note, "MCP server", "mcp_server", names, func(ctx context.Context, i int) ([]*agent.RemoteTool, func(), error) {
		c := &conn{p: p, srv: servers[i], log: log}
		ts, refused, err := c.list(ctx)
		if err != nil {
			c.close()
			return nil, nil, err
		}
		agent.ReportRefused(ctx, log, note, "MCP server", "mcp_server", servers[i].GetName(), "mcp", refused)
		return ts, c.close, nil
	})
}

// conn is one server's session for one lease. Calls of a lease are sequential, but the
// mutex keeps a reconnect after a transport error safe anyway.
type conn struct {
	p   *Provider
	srv *agentplanev1.McpServer
	log *slog.Logger

	mu      sync.Mutex
	session *mcp.ClientSession
}

// listLimit bounds what is read of the server's initialize answer and of its tool
// listing.
func (c *conn) listLimit() agent.ReadLimit {
	n := int64(agent.OrDefault(c.p.MaxListBytes, DefaultMaxListBytes))
	return agent.ReadLimit{Message: n, Total: n}
}

// connectError says why connecting or listing under ctx (from connectContext) failed.
func (c *conn) connectError(ctx context.Context, what string, err error) error {
	if tl := agent.TooLarge(ctx); tl != nil {
		c.countLimit(ctx, "list_bytes")
		return fmt.Errorf("%s: the server sent more than %d bytes (mcp.max_list_bytes)", what, tl.Limit)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		c.countLimit(ctx, "list_timeout")
		return fmt.Errorf("%s: no answer within %s (mcp.connect_timeout)", what, agent.OrDefault(c.p.ConnectTimeout, DefaultConnectTimeout))
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (c *conn) countLimit(ctx context.Context, limit string) {
	telemetry.FromContext(ctx).ToolLimit("mcp", limit)
}

// connectContext bounds connecting (and, in list, listing) in time and in bytes read.
func (c *conn) connectContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, agent.OrDefault(c.p.ConnectTimeout, DefaultConnectTimeout))
	ctx, stop := agent.WithReadLimit(ctx, c.listLimit())
	return ctx, func() { stop(); cancel() }
}

func (c *conn) connect(ctx context.Context) (*mcp.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != nil {
		return c.session, nil
	}
	ctx, cancel := c.connectContext(ctx)
	defer cancel()
	version := c.p.Version
	if version == "" {
		version = "dev"
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "agentplane-runtime", Version: version}, nil)
	tr := &mcp.StreamableClientTransport{
		Endpoint:   c.srv.GetUrl(),
		HTTPClient: agent.HeaderClient(c.srv.GetHeaders()),
		// Requests and their responses only: this runtime does not act on the
		// server's own notifications, so no standing GET stream per session.
		DisableStandaloneSSE: true,
		// The client's transport bounds every message by the request's read limit,
		// tighter than this; the SDK's own cap stays only as a backstop.
		MaxEventSize: int(max(c.listLimit().Message, c.callLimit().Message)) + 1<<10,
	}
	s, err := cl.Connect(ctx, tr, nil)
	if err != nil {
		return nil, c.connectError(ctx, "connect", err)
	}
	c.session = s
	return s, nil
}

// drop closes a session a transport error broke, so the next call reconnects.
func (c *conn) drop(s *mcp.ClientSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == s {
		_ = s.Close()
		c.session = nil
	}
}

func (c *conn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != nil {
		_ = c.session.Close()
		c.session = nil
	}
}

// list connects and mounts the server's tools (all pages, at most MaxTools), within
// ConnectTimeout and MaxListBytes together. It returns the listed tools it refused.
func (c *conn) list(ctx context.Context) ([]*agent.RemoteTool, []agent.Refusal, error) {
	ctx, cancel := c.connectContext(ctx)
	defer cancel()
	s, err := c.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	limit := agent.OrDefault(c.p.MaxTools, DefaultMaxTools)
	var (
		out     []*agent.RemoteTool
		refused []agent.Refusal
		cursor  string
	)
	// A page brings at least one tool, or the listing has ended: at most limit+1 pages.
	for page := 0; page <= limit; page++ {
		res, err := s.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, nil, c.connectError(ctx, "list tools", err)
		}
		for _, tool := range res.Tools {
			if len(out) == limit {
				refused = append(refused, agent.Refusal{Limit: "max_tools",
					Reason: fmt.Sprintf("the server lists more than %d tools (mcp.max_tools); the rest are not offered", limit)})
				kept, clashes := agent.UniqueModelNames(out)
				return kept, append(refused, clashes...), nil
			}
			rt, why := c.mountTool(ctx, tool)
			if why != nil {
				refused = append(refused, *why)
				continue
			}
			out = append(out, rt)
		}
		if cursor = res.NextCursor; cursor == "" || len(res.Tools) == 0 {
			break
		}
	}
	kept, clashes := agent.UniqueModelNames(out)
	return kept, append(refused, clashes...), nil
}

// mountTool makes tool a remote tool, or says why it is not offered: a name outside
// MCP's rule, an input schema over MaxSchemaBytes. A description over
// MaxDescriptionBytes is cut and marked.
func (c *conn) mountTool(ctx context.Context, tool *mcp.Tool) (*agent.RemoteTool, *agent.Refusal) {
	server := c.srv.GetName()
	name := tool.Name
	gateName := gates.McpToolName(server, name)
	if err := agent.CheckToolName(name); err != nil {
		return nil, &agent.Refusal{Tool: gateName, Limit: "tool_name", Reason: err.Error()}
	}
	schema, err := schemaOf(tool.InputSchema, agent.OrDefault(c.p.MaxSchemaBytes, DefaultMaxSchemaBytes))
	if err != nil {
		return nil, &agent.Refusal{Tool: gateName, Limit: "schema_bytes", Reason: err.Error()}
	}
	desc := tool.Description
	if n := agent.OrDefault(c.p.MaxDescriptionBytes, DefaultMaxDescriptionBytes); len(desc) > n {
		c.countLimit(ctx, "description_bytes")
		desc = agent.TruncateAs(desc, n, "description")
	}
	rt := &agent.RemoteTool{
		ModelName:   agent.FunctionName(server + "__" + name),
		GateName:    gateName,
		Description: desc,
		Parameters:  schema,
		Annotations: annotations(tool.Annotations),
	}
	rt.Run = func(ctx context.Context, argumentsJSON string) (string, bool) {
		return c.call(ctx, name, argumentsJSON)
	}
	return rt, nil
}

// schemaOf returns the tool's input schema as a JSON object (an empty object schema
// when it has none or it does not decode as one), or an error when its JSON is over
// limit bytes.
func schemaOf(s any, limit int) (map[string]any, error) {
	var m map[string]any
	if b, err := json.Marshal(s); err == nil {
		if len(b) > limit {
			return nil, fmt.Errorf("the input schema is %d bytes, at most %d (mcp.max_schema_bytes)", len(b), limit)
		}
		_ = json.Unmarshal(b, &m)
	}
	if m == nil {
		m = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	return m, nil
}

// annotations carries the server's hints as it declared them, unset stays unset:
// the runtime does not fill the MCP defaults in, and the gate only tightens on them.
func annotations(a *mcp.ToolAnnotations) *agentplanev1.McpToolAnnotations {
	if a == nil {
		return nil
	}
	out := &agentplanev1.McpToolAnnotations{
		DestructiveHint: a.DestructiveHint,
		OpenWorldHint:   a.OpenWorldHint,
	}
	if a.Title != "" {
		title := agent.TruncateAs(a.Title, maxTitleBytes, "title")
		out.Title = &title
	}
	if a.ReadOnlyHint {
		out.ReadOnlyHint = &a.ReadOnlyHint
	}
	if a.IdempotentHint {
		out.IdempotentHint = &a.IdempotentHint
	}
	return out
}

// call runs one tool call. Every failure is a tool error for the model: arguments that
// are not a JSON object, a transport error or timeout, an error answer, a result the
// server marks isError.
func (c *conn) call(ctx context.Context, tool, argumentsJSON string) (string, bool) {
	server := c.srv.GetName()
	var args map[string]any
	if strings.TrimSpace(argumentsJSON) != "" {
		if err := json.Unmarshal([]byte(argumentsJSON), &args); err != nil {
			return fmt.Sprintf("MCP tool %s.%s: the arguments are not a JSON object: %v", server, tool, err), true
		}
	}
	s, err := c.connect(ctx)
	if err != nil {
		return fmt.Sprintf("MCP server %s unavailable: %v", server, err), true
	}
	callCtx, cancel := context.WithTimeout(ctx, agent.OrDefault(c.p.CallTimeout, DefaultCallTimeout))
	defer cancel()
	callCtx, stop := agent.WithReadLimit(callCtx, c.callLimit())
	defer stop()
	res, err := s.CallTool(callCtx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if tl := agent.TooLarge(callCtx); tl != nil {
		// The answer was cut off mid-message: the session cannot be trusted further.
		c.drop(s)
		c.countLimit(ctx, "response_bytes")
		c.log.Warn("MCP tool answer over the read limit; the call failed", "mcp_server", server, "tool", tool, "limit_bytes", tl.Limit)
		return fmt.Sprintf("MCP tool %s.%s failed: its answer is larger than %d bytes, the most this runtime reads for a result of at most %d bytes (mcp.max_result_bytes)",
			server, tool, tl.Limit, agent.OrDefault(c.p.MaxResultBytes, DefaultMaxResultBytes)), true
	}
	if err != nil {
		if callCtx.Err() == nil && !isProtocolError(err) {
			c.drop(s) // a broken session: the next call reconnects (a timeout leaves it be)
		}
		if errors.Is(callCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			c.countLimit(ctx, "call_timeout")
			c.log.Warn("MCP tool call timed out", "mcp_server", server, "tool", tool, "timeout", agent.OrDefault(c.p.CallTimeout, DefaultCallTimeout))
			return fmt.Sprintf("MCP tool %s.%s timed out after %s", server, tool, agent.OrDefault(c.p.CallTimeout, DefaultCallTimeout)), true
		}
		return fmt.Sprintf("MCP tool %s.%s failed: %v", server, tool, err), true
	}
	return agent.Truncate(ResultText(res), agent.OrDefault(c.p.MaxResultBytes, DefaultMaxResultBytes)), res.IsError
}

// callLimit bounds what is read of the server's answer to one call: one message at
// most agent.ResponseLimit of MaxResultBytes, the call's stream (notifications
// before the answer) four times that.
func (c *conn) callLimit() agent.ReadLimit {
	n := agent.ResponseLimit(agent.OrDefault(c.p.MaxResultBytes, DefaultMaxResultBytes))
	return agent.ReadLimit{Message: n, Total: 4 * n}
}

// isProtocolError reports whether err is the server's JSON-RPC error answer (the
// session is fine) rather than a transport failure.
func isProtocolError(err error) bool {
	var we *jsonrpc.Error
	return errors.As(err, &we)
}

// ResultText is a tool result as the model reads it: text contents as they are, other
// contents described on a line of their own, the structured content as JSON when there
// is no content.
func ResultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link %s %s]", c.URI, c.Name))
		case *mcp.EmbeddedResource:
			if r := c.Resource; r != nil && r.Text != "" {
				parts = append(parts, r.Text)
			} else if r != nil {
				parts = append(parts, fmt.Sprintf("[resource %s %s, %d bytes]", r.URI, r.MIMEType, len(r.Blob)))
			}
		default:
			if b, err := json.Marshal(c); err == nil {
				parts = append(parts, string(b))
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	return strings.Join(parts, "\n")
}
