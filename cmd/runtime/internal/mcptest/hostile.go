package mcptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Hostile is an MCP server over streamable HTTP, written by hand so that it can lie
// in the ways a broken or hostile server does. What it lists depends on the path:
//   - /tools: the tools below, odd names, one with a 1 MiB description
//     (HugeDescription) and one with an input schema over 64 KiB;
//   - /many: ManyTools tools, 100 per page;
//   - /onepage: ManyTools tools on one page of several MiB;
//   - /silent: never answers anything (not even initialize).
//
// Its tools, on every path:
//   - ok, dots.in.name, x__y: answer "ran <name>";
//   - flood: a JSON answer of FloodBytes of text, generated as it is sent;
//   - flood_sse: an event stream whose one event never ends;
//   - flood_events: an event stream of small notifications that never ends, and never
//     answers;
//   - silent: never answers.
type Hostile struct {
	URL string

	hs     *httptest.Server
	closed chan struct{} // closed when the test ends: silent handlers return
	mu     sync.Mutex
	calls  []string
}

// Sizes of Hostile's answers.
const (
	FloodBytes      = 400 << 20
	HugeDescription = 1 << 20
	ManyTools       = 10_000
)

// OddNames are names /tools lists besides its working tools, each refused by the
// runtime: control characters, a space, non-ASCII, too long, empty, and two pairs
// that clash once made model function names ("a.b" and "a_b", "dup" twice).
var OddNames = []string{"bell\a", "esc\x1b[31mred", "space name", "日本語", strings.Repeat("n", 129), "", "a.b", "a_b", "dup", "dup"}

// StartHostile serves a Hostile server until the test ends.
func StartHostile(t testing.TB) *Hostile {
	t.Helper()
	h := &Hostile{closed: make(chan struct{})}
	h.hs = httptest.NewServer(h)
	t.Cleanup(func() {
		close(h.closed)
		h.hs.CloseClientConnections()
		h.hs.Close()
	})
	h.URL = h.hs.URL
	return h
}

// Calls are the names of the tools called so far.
func (h *Hostile) Calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

type rpcRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name   string `json:"name"`
		Cursor string `json:"cursor"`
	} `json:"params"`
}

func (h *Hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/silent") {
		h.silence(r)
		return
	}
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusOK) // DELETE of a session; no standing GET stream
		return
	}
	var req rpcRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if len(req.ID) == 0 {
		w.WriteHeader(http.StatusAccepted) // a notification
		return
	}
	switch req.Method {
	case "initialize":
		reply(w, req.ID, map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]any{"name": "hostile", "version": "1"}})
	case "tools/list":
		h.list(w, r.URL.Path, req)
	case "tools/call":
		h.call(w, r, req)
	case "ping":
		reply(w, req.ID, map[string]any{})
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, req.ID)
	}
}

func reply(w http.ResponseWriter, id json.RawMessage, result any) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func tool(name, desc string, schema any) map[string]any {
	if schema == nil {
		schema = map[string]any{"type": "object"}
	}
	return map[string]any{"name": name, "description": desc, "inputSchema": schema}
}

func (h *Hostile) list(w http.ResponseWriter, path string, req rpcRequest) {
	var tools []any
	next := ""
	switch path {
	case "/many", "/onepage":
		from, _ := strconv.Atoi(req.Params.Cursor)
		to := ManyTools
		if path == "/many" {
			to = min(from+100, ManyTools)
			if to < ManyTools {
				next = strconv.Itoa(to)
			}
		}
		for i := from; i < to; i++ {
			tools = append(tools, tool(fmt.Sprintf("t%05d", i), strings.Repeat("d", 300), nil))
		}
	default:
		for _, n := range []string{"ok", "dots.in.name", "x__y", "flood", "flood_sse", "flood_events", "silent"} {
			tools = append(tools, tool(n, "a tool", nil))
		}
		for _, n := range OddNames {
			tools = append(tools, tool(n, "an odd name", nil))
		}
		tools = append(tools, tool("huge_desc", strings.Repeat("D", HugeDescription), nil))
		props := map[string]any{}
		for i := range 100 {
			props[fmt.Sprintf("p%d", i)] = map[string]any{"type": "string", "description": strings.Repeat("s", 1000)}
		}
		tools = append(tools, tool("huge_schema", "a large schema", map[string]any{"type": "object", "properties": props}))
	}
	result := map[string]any{"tools": tools}
	if next != "" {
		result["nextCursor"] = next
	}
	reply(w, req.ID, result)
}

func (h *Hostile) call(w http.ResponseWriter, r *http.Request, req rpcRequest) {
	name := req.Params.Name
	h.mu.Lock()
	h.calls = append(h.calls, name)
	h.mu.Unlock()
	fl := w.(http.Flusher)
	switch name {
	case "flood":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, req.ID)
		writeRepeated(w, 'x', FloodBytes)
		_, _ = io.WriteString(w, `"}]}}`)
	case "flood_sse":
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, `data: {"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, req.ID)
		fl.Flush()
		writeRepeated(w, 'x', -1)
	case "flood_events":
		w.Header().Set("Content-Type", "text/event-stream")
		ev := []byte(`data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + strings.Repeat("w", 4<<10) + `"}}` + "\n\n")
		for r.Context().Err() == nil {
			if _, err := w.Write(ev); err != nil {
				return
			}
		}
	case "silent":
		h.silence(r)
	default:
		reply(w, req.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": "ran " + name}}})
	}
}

// silence answers nothing until the client goes away or the test ends.
func (h *Hostile) silence(r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20)) // so that a client gone away ends r's context
	select {
	case <-r.Context().Done():
	case <-h.closed:
	}
}

// writeRepeated writes n bytes of c (n < 0: until the client goes away), without
// holding more than a chunk of them.
func writeRepeated(w io.Writer, c byte, n int) {
	chunk := bytes.Repeat([]byte{c}, 64<<10)
	for n != 0 {
		b := chunk
		if n > 0 && n < len(b) {
			b = b[:n]
		}
		if _, err := w.Write(b); err != nil {
			return
		}
		if n > 0 {
			n -= len(b)
		}
	}
}
