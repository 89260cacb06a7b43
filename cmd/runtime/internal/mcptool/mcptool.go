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
	"github.com/agentplane/agentplane/gates"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Defaults of Provider's limits.
const (
	DefaultConnectTimeout = 10 * time.Second
	DefaultCallTimeout    = 60 * time.Second
	DefaultMaxResultBytes = 64 << 10
	DefaultMaxTools       = 128
)

// Provider is an agent.ToolProvider for MCP servers.
type Provider struct {
	// ConnectTimeout bounds connecting to a server and listing its tools.
	ConnectTimeout time.Duration
	// CallTimeout bounds one tool call.
	CallTimeout time.Duration
	// MaxResultBytes caps the result text handed to the model and reported.
	MaxResultBytes int
	// MaxTools caps the tools mounted from one server.
	MaxTools int
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
		c := &conn{p: p, srv: servers[i]}
		ts, err := c.list(ctx)
		if err != nil {
			c.close()
			return nil, nil, err
		}
		return ts, c.close, nil
	})
}

// conn is one server's session for one lease. Calls of a lease are sequential, but the
// mutex keeps a reconnect after a transport error safe anyway.
type conn struct {
	p   *Provider
	srv *agentplanev1.McpServer

	mu      sync.Mutex
	session *mcp.ClientSession
}

func (c *conn) connect(ctx context.Context) (*mcp.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != nil {
		return c.session, nil
	}
	ctx, cancel := context.WithTimeout(ctx, agent.OrDefault(c.p.ConnectTimeout, DefaultConnectTimeout))
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
	}
	s, err := cl.Connect(ctx, tr, nil)
	if err != nil {
		return nil, err
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

// list connects and mounts the server's tools (all pages, at most MaxTools).
func (c *conn) list(ctx context.Context) ([]*agent.RemoteTool, error) {
	s, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, agent.OrDefault(c.p.ConnectTimeout, DefaultConnectTimeout))
	defer cancel()
	limit := agent.OrDefault(c.p.MaxTools, DefaultMaxTools)
	var out []*agent.RemoteTool
	for tool, err := range s.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		if len(out) == limit {
			return out, nil
		}
		out = append(out, c.mountTool(tool))
	}
	return out, nil
}

func (c *conn) mountTool(tool *mcp.Tool) *agent.RemoteTool {
	server := c.srv.GetName()
	name := tool.Name
	rt := &agent.RemoteTool{
		ModelName:   agent.FunctionName(server + "__" + name),
		GateName:    gates.McpToolName(server, name),
		Description: tool.Description,
		Parameters:  schemaOf(tool.InputSchema),
		Annotations: annotations(tool.Annotations),
	}
	rt.Run = func(ctx context.Context, argumentsJSON string) (string, bool) {
		return c.call(ctx, name, argumentsJSON)
	}
	return rt
}

// schemaOf returns the tool's input schema as a JSON object (an empty object schema
// when it has none or it does not decode as one).
func schemaOf(s any) map[string]any {
	var m map[string]any
	if b, err := json.Marshal(s); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	if m == nil {
		m = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	return m
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
		out.Title = &a.Title
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
	res, err := s.CallTool(callCtx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		if callCtx.Err() == nil && !isProtocolError(err) {
			c.drop(s) // a broken session: the next call reconnects (a timeout leaves it be)
		}
		if errors.Is(callCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			return fmt.Sprintf("MCP tool %s.%s timed out after %s", server, tool, agent.OrDefault(c.p.CallTimeout, DefaultCallTimeout)), true
		}
		return fmt.Sprintf("MCP tool %s.%s failed: %v", server, tool, err), true
	}
	return agent.Truncate(ResultText(res), agent.OrDefault(c.p.MaxResultBytes, DefaultMaxResultBytes)), res.IsError
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
