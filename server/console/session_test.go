package console

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The session key is AES-256's: a key file of any other length is refused, not used
// as AES-128 or AES-192. Trailing line ends and spaces are not part of the key.
//
// Mutants: LoadKey's check as err != nil && len(key) != 32 (which took a 32- or
// 48-digit key), the trailing characters trimSpace drops.
func TestLoadKeyRefusesAKeyOfTheWrongLength(t *testing.T) {
	key := bytes.Repeat([]byte{0xa5}, 32)
	digits := hex.EncodeToString(key)
	for name, content := range map[string]string{
		"AES-128 (32 digits)": digits[:32] + "\n",
		"AES-192 (48 digits)": digits[:48] + "\n",
		"31 bytes":            digits[:62] + "\n",
		"33 bytes":            digits + "a5\n",
		"63 digits":           digits[:63] + "\n",
		"not hex":             strings.Repeat("g", 64) + "\n",
		"empty":               "",
		"blank":               " \r\n\n",
		"a tab after the key": digits + "\t\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "key")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := LoadKey(path)
			if err == nil || !strings.Contains(err.Error(), "64 hex digits") {
				t.Fatalf("LoadKey(%q) = %x, %v; want refused", content, got, err)
			}
		})
	}
	for name, content := range map[string]string{
		"no line end": digits, "LF": digits + "\n", "CRLF": digits + "\r\n", "spaces": digits + "  \n ",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "key")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if got, err := LoadKey(path); err != nil || !bytes.Equal(got, key) {
				t.Fatalf("LoadKey(%q) = %x, %v; want %x", content, got, err, key)
			}
		})
	}
}

// A new key is readable by its owner only, in a directory only its owner opens, and
// it is what the next start reads. A key file that cannot be read is an error that
// says why, not a new key.
//
// Mutants: the modes 0700 and 0600 off by one; LoadKey ignoring a read error.
func TestLoadKeyCreatesAPrivateKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	path := filepath.Join(dir, "key")
	key, err := LoadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]fs.FileMode{dir: 0o700 | fs.ModeDir, path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil || string(data) != hex.EncodeToString(key)+"\n" {
		t.Fatalf("key file %q, %v", data, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left behind in the key's directory: %v", entries)
	}
	_, err = LoadKey(dir) // a directory: read fails with EISDIR
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		t.Fatalf("LoadKey of a directory = %v; want its read error", err)
	}
}

// Replicas behind one address share the key file (docs/console.md), and they may
// start at the same moment: every one of them gets the one key that is kept.
//
// Mutant: LoadKey returning the error of its exclusive create instead of reading
// the key another replica made first.
func TestLoadKeyConcurrentStartsAgree(t *testing.T) {
	for round := range 20 {
		path := filepath.Join(t.TempDir(), "key")
		const n = 8
		keys := make([][]byte, n)
		errs := make([]error, n)
		var start, done sync.WaitGroup
		start.Add(1)
		for i := range n {
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				keys[i], errs[i] = LoadKey(path)
			}()
		}
		start.Done()
		done.Wait()
		kept, err := LoadKey(path)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if errs[i] != nil || !bytes.Equal(keys[i], kept) {
				t.Fatalf("round %d, start %d: key %s, %v; want the kept key %s", round, i, hex.EncodeToString(keys[i]), errs[i], hex.EncodeToString(kept))
			}
		}
	}
}

// newSessions takes only a key AES takes; a cookie from New's sessions opens and
// carries what was sealed.
func TestNewSessionsRefusesANonAESKey(t *testing.T) {
	if _, err := newSessions(make([]byte, 7), time.Hour, false); err == nil {
		t.Fatal("a 7-byte key was taken")
	}
}

// The cookie's attributes are the ones docs/console.md promises: HttpOnly,
// SameSite=Strict, Path=/, and under TLS Secure with the __Host- prefix. Sign-out
// clears the same cookie.
//
// Mutant: name() with its TLS condition negated (a round trip still works).
func TestSessionCookieAttributes(t *testing.T) {
	for _, secure := range []bool{false, true} {
		m, err := newSessions(bytes.Repeat([]byte{1}, 32), time.Hour, secure)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		m.now = func() time.Time { return now }
		s := m.fresh()
		if !s.Expires.Equal(now.Add(time.Hour)) {
			t.Errorf("fresh session expires %v, want %v", s.Expires, now.Add(time.Hour))
		}
		name := cookieName
		if secure {
			name = secureCookieName
		}
		rec := httptest.NewRecorder()
		m.write(rec, s)
		cs := rec.Result().Cookies()
		if len(cs) != 1 {
			t.Fatalf("secure=%v: %d cookies", secure, len(cs))
		}
		c := cs[0]
		if c.Name != name || c.Path != "/" || !c.HttpOnly || c.Secure != secure || c.SameSite != http.SameSiteStrictMode || !c.Expires.Equal(s.Expires.Truncate(time.Second)) {
			t.Errorf("secure=%v: cookie %+v", secure, c)
		}
		rec = httptest.NewRecorder()
		m.revoke(rec, s)
		cs = rec.Result().Cookies()
		if len(cs) != 1 || cs[0].Name != name || cs[0].Value != "" || cs[0].MaxAge >= 0 || cs[0].Path != "/" || !cs[0].HttpOnly || cs[0].Secure != secure {
			t.Errorf("secure=%v: sign-out cookie %+v", secure, cs)
		}
	}
}

// seal returns a request carrying plain sealed with m's key, as write would seal it.
func seal(m *sessions, plain []byte) *http.Request {
	nonce := make([]byte, m.aead.NonceSize())
	req := httptest.NewRequest(http.MethodGet, "/ui/inbox", nil)
	req.AddCookie(&http.Cookie{Name: m.name(), Value: base64.RawURLEncoding.EncodeToString(m.aead.Seal(nonce, nonce, plain, []byte(sealAAD)))})
	return req
}

// A session opens only whole: with an id, a CSRF token, before its expiry (at it, it
// has expired), from a cookie of at most maxCookieBytes.
//
// Mutants: read's checks of the id, the CSRF token and the cookie's size, each
// dropped or moved across its boundary.
func TestSessionReadRefusesIncompleteSessions(t *testing.T) {
	m := testSessions(t, 1)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	m.now = func() time.Time { return now }
	sealed := func(s session) *http.Request {
		plain, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return seal(m, plain)
	}
	whole := session{ID: "sid", CSRF: "tok", Expires: now.Add(time.Second)}
	if m.read(sealed(whole)) == nil {
		t.Fatal("a whole session does not open")
	}
	for name, req := range map[string]*http.Request{
		"no cookie":     httptest.NewRequest(http.MethodGet, "/ui/inbox", nil),
		"no id":         sealed(session{CSRF: "tok", Expires: whole.Expires}),
		"no CSRF token": sealed(session{ID: "sid", Expires: whole.Expires}),
		"at its expiry": sealed(session{ID: "sid", CSRF: "tok", Expires: now}),
		"not JSON":      seal(m, []byte("sid tok")),
		"a JSON list":   seal(m, []byte(`["sid","tok"]`)),
		"empty":         seal(m, nil),
	} {
		if s := m.read(req); s != nil {
			t.Errorf("%s: opened %+v", name, s)
		}
	}

	// A cookie of exactly maxCookieBytes opens, one byte more does not: base64 of
	// 3*maxCookieBytes/4 bytes is maxCookieBytes characters (maxCookieBytes is a
	// multiple of 4), and a sealed cookie is its nonce, the plain text and the tag.
	sized := func(chars int) *http.Request {
		s := whole
		overhead := m.aead.NonceSize() + m.aead.Overhead()
		plain, _ := json.Marshal(s)
		raw := chars * 3 / 4
		s.Subject = strings.Repeat("x", raw-overhead-len(plain)-len(`,"sub":""`))
		req := sealed(s)
		if c, _ := req.Cookie(m.name()); len(c.Value) != chars {
			t.Fatalf("made a cookie of %d characters, want %d", len(c.Value), chars)
		}
		return req
	}
	if m.read(sized(maxCookieBytes)) == nil {
		t.Error("a cookie of maxCookieBytes does not open")
	}
	if m.read(sized(maxCookieBytes+4)) != nil {
		t.Error("a cookie of more than maxCookieBytes opens")
	}
}

// Sign-out holds for each session signed out until it expires, however many others
// sign out after it; an entry is dropped once its session has expired anyway, and
// past maxRevoked the one closest to expiry goes first.
//
// Mutants: revoke's pruning condition negated or its delete dropped, the bound's
// comparison moved, the choice of the oldest entry broken.
func TestRevokeKeepsEachSignOut(t *testing.T) {
	m := testSessions(t, 1)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	m.now = func() time.Time { return now }
	a, b := m.fresh(), m.fresh()
	short := m.fresh()
	short.Expires = now.Add(time.Minute)
	reqA, reqShort := carry(m, a), carry(m, short)
	m.revoke(httptest.NewRecorder(), a)
	m.revoke(httptest.NewRecorder(), short)
	m.revoke(httptest.NewRecorder(), b)
	if m.read(reqA) != nil || m.read(reqShort) != nil || m.read(carry(m, b)) != nil {
		t.Fatal("a signed-out session opens after later sign-outs")
	}
	now = now.Add(time.Minute) // short has expired
	m.revoke(httptest.NewRecorder(), m.fresh())
	if _, kept := m.revoked[short.ID]; kept || len(m.revoked) != 3 {
		t.Errorf("after short expired: %d sign-outs remembered (short kept: %v), want 3", len(m.revoked), kept)
	}

	const documented = 100000 // docs/console.md
	if maxRevoked != documented {
		t.Fatalf("the sign-out list holds %d sessions, docs/console.md says %d", maxRevoked, documented)
	}
	m.revoked = map[string]time.Time{}
	for i := range maxRevoked - 1 {
		m.revoked[randomID(9)] = now.Add(time.Hour + time.Duration(i)*time.Second)
	}
	oldest := randomID(9)
	m.revoked[oldest] = now.Add(time.Minute)
	m.revoke(httptest.NewRecorder(), a)
	if _, kept := m.revoked[oldest]; kept || len(m.revoked) != maxRevoked {
		t.Errorf("at the bound: %d sign-outs remembered (the oldest kept: %v), want %d", len(m.revoked), kept, maxRevoked)
	}
	if m.read(reqA) != nil {
		t.Error("the newest sign-out was dropped")
	}
}

// A session's id and CSRF token are as long as docs/console.md says: 144 and 192
// random bits.
//
// Mutants: randomID's lengths changed.
func TestSessionIDAndCSRFTokenLengths(t *testing.T) {
	s := testSessions(t, 1).fresh()
	for what, c := range map[string]struct {
		v    string
		bits int
	}{"id": {s.ID, 144}, "CSRF token": {s.CSRF, 192}} {
		b, err := base64.RawURLEncoding.DecodeString(c.v)
		if err != nil || len(b)*8 != c.bits {
			t.Errorf("session %s %q: %d bits, %v; want %d", what, c.v, len(b)*8, err, c.bits)
		}
	}
}

// A request without a token passes no CSRF check, whatever the session.
//
// Mutants: checkCSRF's checks of the session and of an empty token as ||.
func TestCheckCSRFWithoutAToken(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, "/ui/x", nil)
	if checkCSRF(req, nil) || checkCSRF(req, &session{}) {
		t.Error("a request without a token passed")
	}
	req.Header.Set("X-CSRF-Token", "tok")
	if checkCSRF(req, nil) {
		t.Error("a token passed without a session")
	}
}

// What must be unpredictable is random: two new key files hold different keys, two
// sessions have different ids and CSRF tokens, and two cookies sealed for the same
// session differ (a fresh nonce each: GCM with a repeated nonce gives the key away).
//
// Mutants: the calls of crypto/rand.Read dropped (a zero key, zero ids, zero nonces).
func TestSecretsAreRandom(t *testing.T) {
	k1, err1 := LoadKey(filepath.Join(t.TempDir(), "key"))
	k2, err2 := LoadKey(filepath.Join(t.TempDir(), "key"))
	if err1 != nil || err2 != nil || bytes.Equal(k1, k2) || bytes.Equal(k1, make([]byte, 32)) {
		t.Fatalf("two new keys: %x, %x (%v, %v)", k1, k2, err1, err2)
	}
	m := testSessions(t, 1)
	a, b := m.fresh(), m.fresh()
	if a.ID == b.ID || a.CSRF == b.CSRF {
		t.Fatalf("two sessions share an id or a CSRF token: %+v %+v", a, b)
	}
	c1, _ := carry(m, a).Cookie(m.name())
	c2, _ := carry(m, a).Cookie(m.name())
	if c1.Value == c2.Value {
		t.Fatal("a session sealed twice gave the same cookie: the nonce repeats")
	}
}
