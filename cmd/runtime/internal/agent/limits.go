package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/agentplane/agentplane/cmd/runtime/internal/telemetry"
)

// What the runtime reads from a tool server (an MCP server, an A2A peer, an HTTP tool)
// is bounded while it is read, not after: a server that answers 400 MiB costs the
// runtime the limit, not 400 MiB.

// responseMargin is what ResponseLimit allows beyond twice the result cap: the
// JSON-RPC envelope, content metadata.
const responseMargin = 64 << 10

// ResponseLimit is the most the runtime reads of a tool server's answer to one call
// whose result text is capped at maxResult bytes: twice the cap (JSON escaping, and
// MCP servers that send a structured result beside the same text) plus 64 KiB. An
// answer between maxResult and this limit is cut and marked; a larger one fails the
// call.
func ResponseLimit(maxResult int) int64 { return 2*int64(maxResult) + responseMargin }

// TooLargeError is a tool server's answer that went over a read limit.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the answer is larger than %d bytes", e.Limit)
}

// ReadAtMost reads r to its end, failing with a *TooLargeError past limit bytes
// (having read at most limit+1).
func ReadAtMost(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &TooLargeError{Limit: limit}
	}
	return b, nil
}

// ReadLimit bounds the responses read under a context (WithReadLimit) by a client
// from HeaderClient: what the MCP and A2A SDKs read is bounded where they read it.
type ReadLimit struct {
	// Message bounds one message: a response body, or one event of an event stream
	// (text/event-stream), so a long-lived stream of small events is not cut for its
	// length alone.
	Message int64
	// Total bounds every response body read under the context, together.
	Total int64
}

// defaultReadLimit applies to requests made without WithReadLimit (an SDK's own
// housekeeping requests, such as closing a session).
var defaultReadLimit = ReadLimit{Message: 1 << 20, Total: 4 << 20}

type readLimitKey struct{}

// readBudget is a ReadLimit in use: the bytes read so far under one context.
type readBudget struct {
	ReadLimit
	total  atomic.Int64
	cancel context.CancelCauseFunc // nil for defaultReadLimit
}

// WithReadLimit returns ctx carrying l. A response read under it past l fails with a
// *TooLargeError, and the returned context is canceled with that error as its cause
// (TooLarge), so that a client waiting for the answer stops at once. stop releases
// the context.
func WithReadLimit(ctx context.Context, l ReadLimit) (_ context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	b := &readBudget{ReadLimit: l, cancel: cancel}
	return context.WithValue(ctx, readLimitKey{}, b), func() { cancel(context.Canceled) }
}

// TooLarge is the *TooLargeError that ended ctx (a context from WithReadLimit), or nil.
func TooLarge(ctx context.Context) *TooLargeError {
	var e *TooLargeError
	if errors.As(context.Cause(ctx), &e) {
		return e
	}
	return nil
}

// limitTransport bounds every response body by the ReadLimit of its request's context.
type limitTransport struct{ next http.RoundTripper }

func (t limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	b, _ := r.Context().Value(readLimitKey{}).(*readBudget)
	if b == nil {
		b = &readBudget{ReadLimit: defaultReadLimit}
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	resp.Body = &limitedBody{rc: resp.Body, b: b, events: mt == "text/event-stream", lineStart: true}
	return resp, nil
}

// limitedBody counts what is read of one response body against its budget: the
// whole body as one message, or, for an event stream, each event (up to the blank
// line that ends it) as one message.
type limitedBody struct {
	rc     io.ReadCloser
	b      *readBudget
	events bool
	err    error
	// msg is the bytes of the current message; lineStart and prevCR track the event
	// stream's line ends ("\n", "\r" or "\r\n"; an empty line ends an event).
	msg       int64
	lineStart bool
	prevCR    bool
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.rc.Read(p)
	if over := l.count(p[:n]); over != nil {
		l.err = over
		if l.b.cancel != nil {
			l.b.cancel(over)
		}
		return 0, over
	}
	return n, err
}

// count adds p to the message and the budget, returning the error past either.
func (l *limitedBody) count(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	if total := l.b.total.Add(int64(len(p))); total > l.b.Total {
		return &TooLargeError{Limit: l.b.Total}
	}
	if !l.events {
		l.msg += int64(len(p))
	} else {
		for _, c := range p {
			switch {
			case c == '\n' && l.prevCR: // the second half of "\r\n"
				l.prevCR = false
				continue
			case c == '\n' || c == '\r':
				if l.lineStart {
					l.msg = 0 // an empty line: the event ended
				}
				l.lineStart, l.prevCR = true, c == '\r'
			default:
				l.lineStart, l.prevCR = false, false
				l.msg++
			}
		}
	}
	if l.msg > l.b.Message {
		return &TooLargeError{Limit: l.b.Message}
	}
	return nil
}

func (l *limitedBody) Close() error { return l.rc.Close() }

// MaxToolNameBytes bounds a remote tool's own name (an MCP tool's, an A2A skill's id).
const MaxToolNameBytes = 128

// CheckToolName says why the runtime refuses name, a remote tool's own name as its
// server listed it, or nil: it must be MCP's tool name (1 to 128 bytes of ASCII
// letters, digits, '_', '-' and '.', spec 2025-11-25). Anything else (control
// characters, spaces, non-ASCII look-alikes of other names) would reach the gate, the
// policies, the log and the people approving calls spelled as the server chose.
func CheckToolName(name string) error {
	if name == "" || len(name) > MaxToolNameBytes {
		return fmt.Errorf("the name is %d bytes, want 1 to %d", len(name), MaxToolNameBytes)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("the name has %q at byte %d; a tool name is ASCII letters, digits, '_', '-' and '.'", name[i:i+1], i)
		}
	}
	return nil
}

// Refusal is a listed tool the runtime does not offer, and why.
type Refusal struct {
	// Tool names it (its gate name; empty for a refusal of the rest of a listing).
	Tool string
	// Limit is the metric's label: tool_name, name_clash, schema_bytes, max_tools.
	Limit  string
	Reason string
}

// UniqueModelNames keeps the tools whose model name no other of tools has. Every tool
// of a clash is refused, not just the later ones: which of them a call meant could not
// be told, and the gate must see the name of the tool that runs.
func UniqueModelNames(tools []*RemoteTool) (kept []*RemoteTool, refused []Refusal) {
	n := map[string]int{}
	for _, rt := range tools {
		n[rt.ModelName]++
	}
	for _, rt := range tools {
		if n[rt.ModelName] == 1 {
			kept = append(kept, rt)
			continue
		}
		refused = append(refused, Refusal{Tool: rt.GateName, Limit: "name_clash",
			Reason: fmt.Sprintf("%d of the listed tools would be offered to the model as %s", n[rt.ModelName], rt.ModelName)})
	}
	return kept, refused
}

// maxNotedRefusals bounds the refusals a note names; the log has every one.
const maxNotedRefusals = 8

// ReportRefused logs each refusal of endpoint's listing (label and attr as for
// MountEach), counts it under kind (mcp, a2a), and writes one note to the task naming
// them, so that a user sees why a tool is missing. Names are quoted: a refused name
// may hold anything.
func ReportRefused(ctx context.Context, log *slog.Logger, note Note, label, attr, endpoint, kind string, refused []Refusal) {
	if len(refused) == 0 {
		return
	}
	var parts []string
	for i, r := range refused {
		log.Warn(label+" tool not offered", attr, endpoint, "tool", r.Tool, "limit", r.Limit, "reason", r.Reason)
		telemetry.FromContext(ctx).ToolLimit(kind, r.Limit)
		if i < maxNotedRefusals {
			if r.Tool == "" {
				parts = append(parts, r.Reason)
			} else {
				parts = append(parts, fmt.Sprintf("%q: %s", r.Tool, r.Reason))
			}
		}
	}
	if len(refused) > maxNotedRefusals {
		parts = append(parts, fmt.Sprintf("and %d more", len(refused)-maxNotedRefusals))
	}
	if note != nil {
		_ = note(ctx, fmt.Sprintf("%s %s: %d listed tools not offered: %s", label, endpoint, len(refused), strings.Join(parts, "; ")), map[string]string{attr: endpoint})
	}
}
