package a2atool

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/agentplane/agentplane/cmd/runtime/internal/agent"
)

// v10Client speaks A2A v1.0's JSON-RPC binding (methods SendMessage and GetTask,
// ProtoJSON shapes, the A2A-Version: 1.0 header). Its requests go through the
// peer's HeaderClient, so what it reads is bounded by the ReadLimit of each call's
// context; it reads at most maxBody of any one answer besides.
type v10Client struct {
	hc       *http.Client
	endpoint string
	maxBody  int64
	seq      atomic.Int64
}

// v1.0 wire shapes, the parts the runtime reads.
type (
	v10Part struct {
		Text      *string         `json:"text,omitempty"`
		Data      json.RawMessage `json:"data,omitempty"`
		URL       string          `json:"url,omitempty"`
		Raw       json.RawMessage `json:"raw,omitempty"`
		Filename  string          `json:"filename,omitempty"`
		MediaType string          `json:"mediaType,omitempty"`
	}
	v10Message struct {
		MessageID string         `json:"messageId"`
		Role      string         `json:"role"`
		Parts     []v10Part      `json:"parts"`
		Metadata  map[string]any `json:"metadata,omitempty"`
	}
	v10Task struct {
		ID     string `json:"id"`
		Status struct {
			State   string      `json:"state"`
			Message *v10Message `json:"message"`
		} `json:"status"`
		Artifacts []v10Artifact `json:"artifacts"`
	}
	v10Artifact struct {
		Parts []v10Part `json:"parts"`
	}
)

// rpcError is a JSON-RPC error a peer answered.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string {
	return fmt.Sprintf("JSON-RPC error %d: %q", e.Code, agent.TruncateAs(e.Message, 1024, "message"))
}

func (c *v10Client) send(ctx context.Context, skill, text string) (peerResult, error) {
	var id [16]byte
	_, _ = rand.Read(id[:])
	zero := 0
	params := map[string]any{
		"message": v10Message{MessageID: hex.EncodeToString(id[:]), Role: "ROLE_USER",
			Parts: []v10Part{{Text: &text}}, Metadata: map[string]any{"skill": skill}},
		"configuration": map[string]any{"historyLength": zero},
		"metadata":      map[string]any{"skill": skill},
	}
	var out struct {
		Task    *v10Task    `json:"task"`
		Message *v10Message `json:"message"`
	}
	if err := c.rpc(ctx, "SendMessage", params, &out); err != nil {
		return peerResult{}, err
	}
	switch {
	case out.Task != nil && out.Message == nil:
		return out.Task.result(), nil
	case out.Message != nil && out.Task == nil:
		return peerResult{text: partsText10(out.Message.Parts)}, nil
	}
	return peerResult{}, errors.New("the peer's SendMessage answer is neither a task nor a message")
}

func (c *v10Client) get(ctx context.Context, id string) (peerResult, error) {
	var t v10Task
	if err := c.rpc(ctx, "GetTask", map[string]any{"id": id, "historyLength": 0}, &t); err != nil {
		return peerResult{}, err
	}
	if t.ID != id {
		return peerResult{}, errors.New("the peer's GetTask answered another task")
	}
	return t.result(), nil
}

func (c *v10Client) Destroy() error {
	c.hc.CloseIdleConnections()
	return nil
}

// rpc calls method with params and decodes its result into out. An answer that is
// not a JSON-RPC 2.0 response to this request is an error.
func (c *v10Client) rpc(ctx context.Context, method string, params, out any) error {
	id := c.seq.Add(1)
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("A2A-Version", version10)
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := agent.ReadAtMost(resp.Body, c.maxBody)
	if err != nil {
		return err
	}
	var env struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   *rpcError       `json:"error"`
	}
	if err := json.Unmarshal(b, &env); err != nil || env.JSONRPC != "2.0" {
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: HTTP %d", method, resp.StatusCode)
		}
		return fmt.Errorf("%s: the peer's answer is not a JSON-RPC 2.0 response", method)
	}
	if env.Error != nil {
		return fmt.Errorf("%s: %w", method, env.Error)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", method, resp.StatusCode)
	}
	if string(env.ID) != strconv.FormatInt(id, 10) {
		return fmt.Errorf("%s: the peer answered another request", method)
	}
	if len(env.Result) == 0 || string(env.Result) == "null" {
		return fmt.Errorf("%s: the peer's answer has no result", method)
	}
	if err := json.Unmarshal(env.Result, out); err != nil {
		return fmt.Errorf("%s: the peer's result: %w", method, err)
	}
	return nil
}

func (t *v10Task) result() peerResult {
	var status []v10Part
	if m := t.Status.Message; m != nil {
		status = m.Parts
	}
	return taskResult(t.ID, state10(t.Status.State), t.Artifacts, func(a v10Artifact) []v10Part { return a.Parts }, status, partsText10)
}

// state10 spells a v1.0 task state (TASK_STATE_INPUT_REQUIRED) as 0.3 does
// (input-required); anything else is "unknown".
func state10(s string) string {
	rest, ok := strings.CutPrefix(s, "TASK_STATE_")
	if !ok || rest == "" || rest == "UNSPECIFIED" || strings.ContainsFunc(rest, func(r rune) bool { return (r < 'A' || r > 'Z') && r != '_' }) {
		return "unknown"
	}
	return strings.ToLower(strings.ReplaceAll(rest, "_", "-"))
}

// partsText10 joins the text of v1.0 parts; data parts as JSON, files by name.
func partsText10(parts []v10Part) string {
	var out []string
	for _, p := range parts {
		switch {
		case p.Text != nil:
			out = append(out, *p.Text)
		case len(p.Data) > 0:
			var buf bytes.Buffer
			if json.Compact(&buf, p.Data) == nil {
				out = append(out, buf.String())
			}
		case p.URL != "" || len(p.Raw) > 0:
			out = append(out, fmt.Sprintf("[file %q]", agent.TruncateAs(p.Filename, maxNameBytes, "name")))
		}
	}
	return strings.Join(out, "\n")
}
