package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHTTPToolAnswerOverLimit: an HTTP tool's answer past the read limit (400 MiB,
// sent as it is generated) fails the call with a tool error; one between
// max_result_bytes and the limit is cut and marked.
func TestHTTPToolAnswerOverLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := 100 << 10
		if r.URL.Path == "/flood" {
			n = 400 << 20
		}
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for n > 0 {
			if _, err := w.Write(chunk[:min(n, len(chunk))]); err != nil {
				return
			}
			n -= len(chunk)
		}
	}))
	defer srv.Close()
	res, isErr := (&HTTPTool{Name: "flood", URL: srv.URL + "/flood"}).Run(context.Background(), `{}`)
	if want := "its answer is larger than 196608 bytes"; !isErr || !strings.Contains(res, want) {
		t.Errorf("flood answered %.200q (error %v), want a tool error saying %q", res, isErr, want)
	}
	res, isErr = (&HTTPTool{Name: "long", URL: srv.URL + "/long"}).Run(context.Background(), `{}`)
	if isErr || !strings.HasSuffix(res, "[result truncated at 65536 bytes]") {
		t.Errorf("long answered %d bytes (error %v), want cut at 64 KiB and marked", len(res), isErr)
	}
}

// TestLimitedBodyEvents: in an event stream each event counts on its own (whatever
// the line ends), an event that never ends is cut at the message limit, and endless
// small events at the total; a plain body is one message.
func TestLimitedBodyEvents(t *testing.T) {
	read := func(body string, events bool, l ReadLimit) error {
		lb := &limitedBody{rc: io.NopCloser(strings.NewReader(body)), b: &readBudget{ReadLimit: l}, events: events, lineStart: true}
		_, err := io.ReadAll(lb)
		return err
	}
	ev := "data: " + strings.Repeat("x", 90) + "\n\n"
	for _, c := range []struct {
		name   string
		body   string
		events bool
		limit  ReadLimit
		over   int64 // the limit said to be exceeded, 0 for none
	}{
		{"events within", strings.Repeat(ev, 50), true, ReadLimit{Message: 100, Total: 1 << 20}, 0},
		{"crlf events within", strings.Repeat(strings.ReplaceAll(ev, "\n", "\r\n"), 50), true, ReadLimit{Message: 100, Total: 1 << 20}, 0},
		{"cr events within", strings.Repeat(strings.ReplaceAll(ev, "\n", "\r"), 50), true, ReadLimit{Message: 100, Total: 1 << 20}, 0},
		{"event never ends", "data: " + strings.Repeat("x", 1000), true, ReadLimit{Message: 100, Total: 1 << 20}, 100},
		{"lines without a blank one", strings.Repeat("data: x\n", 100), true, ReadLimit{Message: 100, Total: 1 << 20}, 100},
		{"endless small events", strings.Repeat(ev, 500), true, ReadLimit{Message: 100, Total: 10_000}, 10_000},
		{"plain body is one message", strings.Repeat(ev, 50), false, ReadLimit{Message: 100, Total: 1 << 20}, 100},
	} {
		err := read(c.body, c.events, c.limit)
		var tl *TooLargeError
		switch {
		case c.over == 0 && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.over != 0 && (!errors.As(err, &tl) || tl.Limit != c.over):
			t.Errorf("%s: err %v, want over %d", c.name, err, c.over)
		}
	}
}

// TestCheckToolName: MCP's tool names pass; anything a person or a policy could
// misread does not.
func TestCheckToolName(t *testing.T) {
	for _, ok := range []string{"refund", "stats.v2", "a__b", "get-order_2", strings.Repeat("n", MaxToolNameBytes)} {
		if err := CheckToolName(ok); err != nil {
			t.Errorf("CheckToolName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a b", "bell\a", "esc\x1b[0m", "rеfund" /* Cyrillic е */, "tab\t", "new\nline", strings.Repeat("n", MaxToolNameBytes+1), "a/b"} {
		if CheckToolName(bad) == nil {
			t.Errorf("CheckToolName(%q) passed", bad)
		}
	}
}

// TestHTTPToolLargeLimit: a max_result_bytes above the transport's default read limit
// is honoured: a 1.5 MiB answer is cut at 1 MiB, not refused.
func TestHTTPToolLargeLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte("x"), 3<<19))
	}))
	defer srv.Close()
	res, isErr := (&HTTPTool{Name: "long", URL: srv.URL, MaxResultBytes: 1 << 20}).Run(context.Background(), `{}`)
	if isErr || !strings.HasSuffix(res, "[result truncated at 1048576 bytes]") {
		t.Errorf("long answered %d bytes (error %v): %.100q", len(res), isErr, res[max(0, len(res)-100):])
	}
}
