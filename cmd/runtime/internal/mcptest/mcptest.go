// Package mcptest serves an MCP server written with the official Go SDK over
// streamable HTTP (httptest) for the runtime's tests: a few tools of a support desk,
// calls counted on the server side.
package mcptest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server is a running test MCP server. Its tools:
//   - lookup {order_id}: read-only (readOnlyHint), answers "order <id>: shipped";
//   - refund {order_id}: no annotations, answers "refunded order <id>"; when Hold is
//     set, it signals Started and waits for Hold to close (or the call to end);
//   - wipe: destructiveHint true;
//   - fails: answers a result with isError;
//   - big: answers BigBytes bytes of text;
//   - stats.v2: a dotted tool name.
type Server struct {
	URL string

	// Header, when set, must be on every request with HeaderValue (else 401).
	Header, HeaderValue string
	// Hold makes refund wait until it is closed; Started receives once per refund call
	// that started holding.
	Hold    chan struct{}
	Started chan struct{}

	hs    *httptest.Server
	mu    sync.Mutex
	calls map[string]int
	args  map[string][]string
}

// BigBytes is the size of big's answer.
const BigBytes = 200 << 10

type orderArgs struct {
	OrderID int `json:"order_id" jsonschema:"the order's number"`
}

// Start serves the server until the test ends. configure, when not nil, runs before
// the server starts (to set Header, Hold).
func Start(t testing.TB, configure func(*Server)) *Server {
	t.Helper()
	s := &Server{calls: map[string]int{}, args: map[string][]string{}}
	if configure != nil {
		configure(s)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "support-desk", Version: "1.0.0"}, nil)
	yes := true
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup", Description: "Look an order up", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in orderArgs) (*mcp.CallToolResult, any, error) {
			s.count("lookup", req)
			return text(fmt.Sprintf("order %d: shipped", in.OrderID)), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "refund", Description: "Refund an order"},
		func(ctx context.Context, req *mcp.CallToolRequest, in orderArgs) (*mcp.CallToolResult, any, error) {
			s.count("refund", req)
			if s.Hold != nil {
				s.Started <- struct{}{}
				select {
				case <-s.Hold:
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
			}
			return text(fmt.Sprintf("refunded order %d", in.OrderID)), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "wipe", Description: "Delete every order", Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			s.count("wipe", req)
			return text("wiped"), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fails", Description: "Always fails"},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			s.count("fails", req)
			r := text("no such order")
			r.IsError = true
			return r, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "big", Description: "A long answer"},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			s.count("big", req)
			return text(strings.Repeat("x", BigBytes)), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "stats.v2", Description: "Desk statistics"},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			s.count("stats.v2", req)
			return text("42 open tickets"), nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.Header != "" && r.Header.Get(s.Header) != s.HeaderValue {
			http.Error(w, "missing credentials", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	s.hs, s.URL = hs, hs.URL
	return s
}

// Close stops the server (connections included).
func (s *Server) Close() {
	s.hs.CloseClientConnections()
	s.hs.Close()
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func (s *Server) count(tool string, req *mcp.CallToolRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[tool]++
	s.args[tool] = append(s.args[tool], string(req.Params.Arguments))
}

// Calls is how many times tool ran.
func (s *Server) Calls(tool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[tool]
}

// Args are the arguments of tool's calls, as received.
func (s *Server) Args(tool string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.args[tool]...)
}
