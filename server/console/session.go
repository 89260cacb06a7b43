package console

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// cookieName is the session cookie. The __Host- prefix (which requires Secure) is
// used under TLS, so that a sibling subdomain cannot plant one.
const (
	cookieName       = "agentplane_console"
	secureCookieName = "__Host-agentplane_console"
	// sealAAD binds sealed cookies to their purpose and format version.
	sealAAD = "agentplane-console-session-v1"
	// maxCookieBytes bounds what is decrypted (a token, a name, a tenant, roles).
	maxCookieBytes = 4096
)

// session is what a sealed cookie holds. An anonymous session (no Token, not
// SingleUser-owned) still carries a CSRF token so that the sign-in form is protected.
type session struct {
	ID      string    `json:"sid"`
	CSRF    string    `json:"csrf"`
	Token   string    `json:"tok,omitempty"`
	Subject string    `json:"sub,omitempty"`
	Tenant  string    `json:"ten,omitempty"`
	Roles   []string  `json:"roles,omitempty"`
	Expires time.Time `json:"exp"`
}

func (s *session) hasRole(role string) bool {
	for _, r := range s.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// sessions seals and opens session cookies and remembers the sessions signed out
// before their expiry (in memory: a restart forgets them, see docs/console.md).
type sessions struct {
	aead   cipher.AEAD
	ttl    time.Duration
	secure bool
	now    func() time.Time

	mu      sync.Mutex
	revoked map[string]time.Time
	// ended, when set, closes the live streams of a session that signed out.
	ended func(id string)
}

// maxRevoked bounds the sign-out list; past it, the entries closest to expiry go first.
const maxRevoked = 100000

func newSessions(key []byte, ttl time.Duration, secure bool) (*sessions, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("console: session key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sessions{aead: aead, ttl: ttl, secure: secure, now: time.Now, revoked: map[string]time.Time{}}, nil
}

// LoadKey reads the 32-byte session key from path (64 hex digits), creating it with
// a fresh random key (mode 0600) when it does not exist.
func LoadKey(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key := make([]byte, 32)
		rand.Read(key) // crypto/rand.Read never returns an error (since Go 1.24)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("console: session key: %w", err)
		}
		// The key is written in full to a file of its own, then linked into place: a
		// replica starting at the same moment sees no file or the whole key, never an
		// empty one, and the link fails if another replica's key got there first.
		// CreateTemp makes the file with mode 0600.
		f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".new-*")
		if err != nil {
			return nil, fmt.Errorf("console: session key: %w", err)
		}
		defer os.Remove(f.Name())
		_, werr := f.WriteString(hex.EncodeToString(key) + "\n")
		if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
			return nil, fmt.Errorf("console: session key %s: %w", path, err)
		}
		err = os.Link(f.Name(), path)
		if errors.Is(err, os.ErrExist) {
			return LoadKey(path) // another replica made it first
		}
		if err != nil {
			return nil, fmt.Errorf("console: session key: %w", err)
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("console: session key: %w", err)
	}
	key, err := hex.DecodeString(string(trimSpace(data)))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("console: session key %s: want 64 hex digits (32 bytes)", path)
	}
	return key, nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

func randomID(n int) string {
	b := make([]byte, n)
	rand.Read(b) // crypto/rand.Read never returns an error (since Go 1.24)
	return base64.RawURLEncoding.EncodeToString(b)
}

// fresh returns a new session with its own id and CSRF token.
func (m *sessions) fresh() *session {
	return &session{ID: randomID(18), CSRF: randomID(24), Expires: m.now().Add(m.ttl).UTC()}
}

func (m *sessions) name() string {
	if m.secure {
		return secureCookieName
	}
	return cookieName
}

// read returns the request's session, or nil when it has none, or one that does not
// open, has expired or was signed out.
func (m *sessions) read(r *http.Request) *session {
	c, err := r.Cookie(m.name())
	if err != nil || len(c.Value) > maxCookieBytes {
		return nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(c.Value)
	ns := m.aead.NonceSize()
	if err != nil || len(raw) < ns {
		return nil
	}
	plain, err := m.aead.Open(nil, raw[:ns], raw[ns:], []byte(sealAAD))
	if err != nil {
		return nil
	}
	var s session
	if json.Unmarshal(plain, &s) != nil || s.ID == "" || s.CSRF == "" || !m.now().Before(s.Expires) {
		return nil
	}
	m.mu.Lock()
	_, gone := m.revoked[s.ID]
	m.mu.Unlock()
	if gone {
		return nil
	}
	return &s
}

// write sets the sealed cookie for s.
func (m *sessions) write(w http.ResponseWriter, s *session) {
	plain, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	nonce := make([]byte, m.aead.NonceSize())
	rand.Read(nonce) // never returns an error (since Go 1.24)
	sealed := m.aead.Seal(nonce, nonce, plain, []byte(sealAAD))
	http.SetCookie(w, &http.Cookie{
		Name: m.name(), Value: base64.RawURLEncoding.EncodeToString(sealed), Path: "/",
		Expires: s.Expires, HttpOnly: true, Secure: m.secure, SameSite: http.SameSiteStrictMode,
	})
}

// revoke ends s before its expiry (sign-out) and clears the cookie.
func (m *sessions) revoke(w http.ResponseWriter, s *session) {
	m.mu.Lock()
	now := m.now()
	for id, exp := range m.revoked {
		if !now.Before(exp) {
			delete(m.revoked, id)
		}
	}
	if len(m.revoked) >= maxRevoked {
		var oldest string
		for id, exp := range m.revoked {
			if oldest == "" || exp.Before(m.revoked[oldest]) {
				oldest = id
			}
		}
		delete(m.revoked, oldest)
	}
	m.revoked[s.ID] = s.Expires
	m.mu.Unlock()
	if m.ended != nil {
		m.ended(s.ID)
	}
	http.SetCookie(w, &http.Cookie{Name: m.name(), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: m.secure, SameSite: http.SameSiteStrictMode})
}

// checkCSRF reports whether r carries s's CSRF token (form field csrf, or the
// X-CSRF-Token header for the page's script), compared in constant time.
func checkCSRF(r *http.Request, s *session) bool {
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	return s != nil && got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.CSRF)) == 1
}
