// Package fakemodel is an OpenAI-compatible Chat Completions server for tests: it
// plays scripted turns as SSE streams and keeps every request it was sent. It plays
// the less common ways real servers behave too: tool arguments streamed in many
// chunks, parallel calls interleaved, ids numbered per response, 429 with
// Retry-After, 5xx, a cut-off answer (finish_reason "length") and no usage.
package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
)

// Call is a tool call a scripted turn makes. ID is sent as is: servers that number
// calls per response send "call_1" on every turn.
type Call struct {
	ID, Name, Arguments string
}

// Turn is one scripted answer.
type Turn struct {
	// Text is streamed in Chunks pieces (default 3).
	Text   string
	Chunks int
	// Calls are streamed after the text. Their arguments arrive in ArgChunks pieces
	// each (default 2); several calls are interleaved, piece by piece, as parallel
	// calls are.
	Calls     []Call
	ArgChunks int
	// Finish overrides the finish_reason ("stop", or "tool_calls" with calls), for
	// example "length" for an answer cut off at max_tokens.
	Finish string
	// NoUsage sends no usage chunk, as servers that ignore stream_options do.
	NoUsage bool
	// Status, when set, answers with this HTTP status (and RetryAfter seconds, if set)
	// instead of a stream; the turn is then consumed and the next one plays on retry.
	Status     int
	RetryAfter int
	// Hang streams the text, then waits until the client goes away (a cancel test).
	Hang bool
	// Usage reported in the last chunk.
	PromptTokens, CompletionTokens int
}

// Request is what the server was sent.
type Request struct {
	Model    string            `json:"model"`
	Stream   bool              `json:"stream"`
	Messages []json.RawMessage `json:"messages"`
	Tools    []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Parameters  map[string]any `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	// ResponseFormat is the response_format sent (output_schema), verbatim.
	ResponseFormat json.RawMessage `json:"response_format"`
	Auth           string          `json:"-"`
}

// Server is a running fake model.
type Server struct {
	URL string

	mu       sync.Mutex
	turns    []Turn
	requests []Request
	gone     chan struct{} // closed when a Hang turn's client went away
}

// Start serves turns in order and stops with the test.
func Start(t testing.TB, turns ...Turn) *Server {
	s := &Server{turns: turns, gone: make(chan struct{})}
	hs := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(hs.Close)
	s.URL = hs.URL + "/v1"
	return s
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Gone is closed when the client of a Hang turn went away.
func (s *Server) Gone() <-chan struct{} { return s.gone }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	var req Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	req.Auth = r.Header.Get("Authorization")
	s.mu.Lock()
	s.requests = append(s.requests, req)
	if len(s.turns) == 0 {
		s.mu.Unlock()
		http.Error(w, `{"error":{"message":"no scripted turn left"}}`, http.StatusBadRequest)
		return
	}
	turn := s.turns[0]
	s.turns = s.turns[1:]
	s.mu.Unlock()

	if turn.Status != 0 {
		if turn.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(turn.RetryAfter))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(turn.Status)
		fmt.Fprintf(w, `{"error":{"message":"scripted status %d","type":"scripted"}}`, turn.Status)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	send(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	n := turn.Chunks
	if n <= 0 {
		n = 3
	}
	for i, text := 0, turn.Text; len(text) > 0; i++ {
		size := (len(turn.Text) + n - 1) / n
		if size > len(text) {
			size = len(text)
		}
		send(chunk(map[string]any{"content": text[:size]}, nil))
		text = text[size:]
	}
	if turn.Hang {
		<-r.Context().Done()
		close(s.gone)
		return
	}
	pieces := turn.ArgChunks
	if pieces <= 0 {
		pieces = 2
	}
	for p := 0; p < pieces; p++ {
		for i, c := range turn.Calls {
			size := (len(c.Arguments) + pieces - 1) / pieces
			lo, hi := min(p*size, len(c.Arguments)), min((p+1)*size, len(c.Arguments))
			tc := map[string]any{"index": i, "function": map[string]any{"arguments": c.Arguments[lo:hi]}}
			if p == 0 { // the first piece names the call
				tc["id"], tc["type"] = c.ID, "function"
				tc["function"].(map[string]any)["name"] = c.Name
			} else if lo == hi {
				continue
			}
			send(chunk(map[string]any{"tool_calls": []any{tc}}, nil))
		}
	}
	finish := "stop"
	if len(turn.Calls) > 0 {
		finish = "tool_calls"
	}
	if turn.Finish != "" {
		finish = turn.Finish
	}
	send(chunk(map[string]any{}, finish))
	if !turn.NoUsage {
		send(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": req.Model, "choices": []any{},
			"usage": map[string]any{"prompt_tokens": turn.PromptTokens, "completion_tokens": turn.CompletionTokens, "total_tokens": turn.PromptTokens + turn.CompletionTokens}})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

// ToolNames are the names of the tools offered in the request, in order.
func (r Request) ToolNames() []string {
	out := make([]string, len(r.Tools))
	for i, t := range r.Tools {
		out[i] = t.Function.Name
	}
	return out
}

// System is the request's first message when it is the system prompt, else "".
func (r Request) System() string {
	if len(r.Messages) == 0 {
		return ""
	}
	var m struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	if json.Unmarshal(r.Messages[0], &m) != nil || m.Role != "system" {
		return ""
	}
	return m.Content
}
