package console

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
)

func testSessions(t testing.TB, key byte) *sessions {
	t.Helper()
	m, err := newSessions(bytes.Repeat([]byte{key}, 32), time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// carry returns a request carrying the cookie m wrote for s.
func carry(m *sessions, s *session) *http.Request {
	rec := httptest.NewRecorder()
	m.write(rec, s)
	req := httptest.NewRequest(http.MethodGet, "/ui/inbox", nil)
	for _, c := range rec.Result().Cookies() {
		req.AddCookie(c)
	}
	return req
}

func TestSessionCookie(t *testing.T) {
	m := testSessions(t, 1)
	s := m.fresh()
	s.Token, s.Subject, s.Tenant, s.Roles = "apt_x", "ann", "acme", []string{"approver"}
	got := m.read(carry(m, s))
	if got == nil || got.Token != "apt_x" || got.CSRF != s.CSRF || !got.hasRole("approver") || got.hasRole("user") {
		t.Fatalf("round trip: %+v", got)
	}
	if testSessions(t, 2).read(carry(m, s)) != nil {
		t.Error("a cookie sealed with another key opens")
	}
	late := testSessions(t, 1)
	late.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if late.read(carry(m, s)) != nil {
		t.Error("an expired session opens")
	}
	m.revoke(httptest.NewRecorder(), s)
	if m.read(carry(m, s)) != nil {
		t.Error("a signed-out session opens")
	}
}

// FuzzSessionCookie: no input makes the cookie reader panic, and none opens without
// the key (the seeds are well-formed cookies sealed with another key).
func FuzzSessionCookie(f *testing.F) {
	other := testSessions(f, 1)
	rec := httptest.NewRecorder()
	other.write(rec, other.fresh())
	f.Add(rec.Result().Cookies()[0].Value)
	f.Add("")
	f.Add("AAAA")
	m := testSessions(f, 2)
	f.Fuzz(func(t *testing.T, v string) {
		req := httptest.NewRequest(http.MethodGet, "/ui/", nil)
		req.AddCookie(&http.Cookie{Name: cookieName, Value: v})
		if s := m.read(req); s != nil {
			t.Fatalf("a forged cookie %q opened: %+v", v, s)
		}
	})
}

func TestCheckCSRF(t *testing.T) {
	s := &session{CSRF: "tok"}
	for _, c := range []struct {
		form   string
		header string
		want   bool
	}{{"csrf=tok", "", true}, {"", "tok", true}, {"csrf=to", "", false}, {"csrf=", "", false}, {"", "", false}, {"csrf=tokk", "", false}} {
		req := httptest.NewRequest(http.MethodPost, "/ui/x", bytes.NewBufferString(c.form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if c.header != "" {
			req.Header.Set("X-CSRF-Token", c.header)
		}
		if got := checkCSRF(req, s); got != c.want {
			t.Errorf("form %q header %q: %v, want %v", c.form, c.header, got, c.want)
		}
	}
}

func TestEditForm(t *testing.T) {
	schema, err := structpb.NewStruct(map[string]any{
		"type": "object", "required": []any{"id", "amount"},
		"properties": map[string]any{
			"id":     map[string]any{"type": "integer"},
			"amount": map[string]any{"type": "number", "maximum": 100},
			"urgent": map[string]any{"type": "boolean"},
			"mode":   map[string]any{"type": "string", "enum": []any{"fast", "slow"}},
			"meta":   map[string]any{"type": "object"},
			"note":   map[string]any{"type": []any{"string", "null"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f := newEditForm(schema, `{"id":4,"amount":30,"urgent":true,"mode":"slow","meta":{"a":1},"extra":"kept"}`)
	inputs := map[string]string{}
	for _, fd := range f.Fields {
		inputs[fd.Name] = fd.Input + ":" + fd.Value
	}
	want := map[string]string{"amount": "number:30", "id": "number:4", "meta": "json:{\n  \"a\": 1\n}", "mode": `select:"slow"`, "note": "text:", "urgent": "checkbox:true"}
	for k, v := range want {
		if inputs[k] != v {
			t.Errorf("field %s: %q, want %q", k, inputs[k], v)
		}
	}
	got := f.fill(url.Values{"arg:id": {"7"}, "arg:amount": {"lots"}, "arg:mode": {"fast"}, "arg:meta": {`{"b":2}`}, "arg:note": {"hi"}})
	if got != `{"id":7,"amount":"lots","urgent":false,"mode":"fast","meta":{"b":2},"extra":"kept","note":"hi"}` {
		t.Errorf("fill: %s", got)
	}
	f.attach("/amount: got string, want number")
	f.attach("/: missing property 'id'")
	f.attach("/: additional properties 'zz' not allowed")
	f.attach("arguments_json is not valid JSON")
	byName := map[string][]string{}
	for _, fd := range f.Fields {
		byName[fd.Name] = fd.Errors
	}
	if len(byName["amount"]) != 1 || len(byName["id"]) != 1 || len(f.Errors) != 2 {
		t.Errorf("attach: fields %v, form %v", byName, f.Errors)
	}

	raw := newEditForm(nil, `{"x":1}`)
	if !raw.Raw || raw.fill(url.Values{"arguments_json": {`{"x":2}`}}) != `{"x":2}` {
		t.Error("without a schema the form is one JSON text box")
	}
}

func TestLoadKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "key")
	k1, err := LoadKey(path)
	if err != nil || len(k1) != 32 {
		t.Fatalf("new key: %v %v", k1, err)
	}
	k2, err := LoadKey(path)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatal("the key is not kept")
	}
	if err := os.WriteFile(path, []byte("not hex\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(path); err == nil || !strings.Contains(err.Error(), "64 hex digits") {
		t.Fatalf("a malformed key file: %v", err)
	}
}
