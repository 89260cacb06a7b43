package pagetoken

import (
	"testing"

	"github.com/agentplane/agentplane/server/apierr"
)

func TestSealOpen(t *testing.T) {
	c := New([]byte("0123456789abcdef0123456789abcdef"))
	scope := Scope("tasks", "tenant-a", "filters")
	cursor := []byte{7, 't', 'e', 'n', 'a', 'n', 't', 0, 1, 2}
	tok := c.Seal(scope, cursor)
	if tok == "" {
		t.Fatal("empty token for a cursor")
	}
	got, err := c.Open(scope, tok)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if string(got) != string(cursor) {
		t.Fatalf("Open = %x, want %x", got, cursor)
	}
	if c.Seal(scope, nil) != "" {
		t.Fatal("nil cursor must seal to the empty token")
	}
	if got, err := c.Open(scope, ""); err != nil || got != nil {
		t.Fatalf("Open(\"\") = %v, %v; want nil, nil", got, err)
	}

	flipped := []byte(tok)
	flipped[len(flipped)/2] ^= 1
	if flipped[len(flipped)/2] == tok[len(tok)/2] {
		t.Fatal("test did not change the token")
	}
	for name, tc := range map[string]struct {
		codec *Codec
		scope []byte
		token string
	}{
		"other tenant":   {c, Scope("tasks", "tenant-b", "filters"), tok},
		"other filters":  {c, Scope("tasks", "tenant-a", "other"), tok},
		"other key":      {New([]byte("another key, another store......")), scope, tok},
		"tampered":       {c, scope, string(flipped)},
		"not base64":     {c, scope, "***"},
		"too short":      {c, scope, "AQ"},
		"scope boundary": {c, Scope("tasks", "tenant-", "afilters"), tok},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := tc.codec.Open(tc.scope, tc.token)
			if !apierr.HasReason(err, apierr.ReasonPageTokenInvalid) {
				t.Fatalf("Open = %v, want reason %s", err, apierr.ReasonPageTokenInvalid)
			}
		})
	}
}

func FuzzOpen(f *testing.F) {
	c := New([]byte("0123456789abcdef0123456789abcdef"))
	scope := Scope("x")
	f.Add(c.Seal(scope, []byte("cursor")))
	f.Add("")
	f.Add("AQAAAAAAAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, token string) {
		cursor, err := c.Open(scope, token)
		if err == nil && token != "" && c.Seal(scope, cursor) != token {
			t.Fatalf("token %q opened to %x, which seals differently", token, cursor)
		}
	})
}
