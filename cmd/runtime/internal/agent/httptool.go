package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentplane/agentplane/cmd/runtime/internal/telemetry"
)

// HTTPTool is a tool the runtime runs itself: the call's arguments (a JSON object)
// are POSTed to URL, and the response body is the result; a status other than 2xx, a
// transport error or a timeout is a tool error handed to the model.
type HTTPTool struct {
	Name        string
	Description string
	Parameters  map[string]any
	URL         string
	Timeout     time.Duration // default 30s
	// MaxResultBytes caps the result handed to the model (default 64 KiB); an answer
	// over ResponseLimit of it fails the call.
	MaxResultBytes int
	Client         *http.Client
}

// tracedClient is the HTTP tools' default client: it sends the call's trace context.
var tracedClient = HeaderClient(nil)

// Run calls the tool and returns its result text and whether it is an error.
func (h *HTTPTool) Run(ctx context.Context, argumentsJSON string) (string, bool) {
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	limit := OrDefault(h.MaxResultBytes, 64<<10)
	// ReadAtMost bounds the body whatever the client; the read limit tells
	// HeaderClient's transport the same bound (it has a tighter default).
	n := ResponseLimit(limit)
	ctx, stop := WithReadLimit(ctx, ReadLimit{Message: n, Total: n})
	defer stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewBufferString(argumentsJSON))
	if err != nil {
		return fmt.Sprintf("tool %s: %v", h.Name, err), true
	}
	req.Header.Set("Content-Type", "application/json")
	hc := h.Client
	if hc == nil {
		hc = tracedClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			telemetry.FromContext(ctx).ToolLimit("http", "call_timeout")
			return fmt.Sprintf("tool %s timed out after %s", h.Name, timeout), true
		}
		return fmt.Sprintf("tool %s failed: %v", h.Name, err), true
	}
	defer resp.Body.Close()
	body, err := ReadAtMost(resp.Body, n)
	var tl *TooLargeError
	switch {
	case errors.As(err, &tl):
		telemetry.FromContext(ctx).ToolLimit("http", "response_bytes")
		return fmt.Sprintf("tool %s failed: its answer is larger than %d bytes, the most this runtime reads for a result of at most %d bytes (max_result_bytes)", h.Name, tl.Limit, limit), true
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		telemetry.FromContext(ctx).ToolLimit("http", "call_timeout")
		return fmt.Sprintf("tool %s timed out after %s", h.Name, timeout), true
	case err != nil:
		return fmt.Sprintf("tool %s failed reading its result: %v", h.Name, err), true
	}
	out := Truncate(string(body), limit)
	if resp.StatusCode/100 != 2 {
		return fmt.Sprintf("tool %s answered HTTP %d: %s", h.Name, resp.StatusCode, out), true
	}
	return out, false
}
