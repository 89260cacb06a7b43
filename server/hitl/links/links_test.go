package links

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

var key = []byte("0123456789abcdef0123456789abcdef")

func claims() Claims {
	return Claims{Tenant: "acme", Interrupt: "in-1", Digest: "d1", Approver: "alice", Action: Approve, Channel: "email",
		Expires: time.Unix(2000, 0).Unix()}
}

// TestParseRoundTripAndTampering: a token parses back to its claims under its key
// only, until its expiry, and any change to it is ErrInvalid.
func TestParseRoundTripAndTampering(t *testing.T) {
	now := time.Unix(1000, 0)
	tok := Issue(key, claims(), now)
	c, err := Parse(key, tok, now)
	if err != nil || c.Tenant != "acme" || c.Interrupt != "in-1" || c.Digest != "d1" || c.Approver != "alice" ||
		c.Action != Approve || c.Channel != "email" || c.Issued != 1000 || c.Nonce == "" {
		t.Fatalf("Parse = %+v, %v", c, err)
	}
	if _, err := Parse(key, tok, time.Unix(2000, 0)); err != ErrExpired {
		t.Fatalf("at expiry: %v, want ErrExpired", err)
	}
	if _, err := Parse([]byte("another key, 32 bytes long......"), tok, now); err != ErrInvalid {
		t.Fatalf("another key: %v", err)
	}
	payload, sig, _ := strings.Cut(tok, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	for name, bad := range map[string]string{
		"tenant":    base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), `"t":"acme"`, `"t":"beta"`, 1))) + "." + sig,
		"action":    base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), `"a":"approve"`, `"a":"reject"`, 1))) + "." + sig,
		"signature": payload + "." + sig[:len(sig)-2] + "AA",
		"no dot":    payload + sig,
		"empty":     "",
		"too long":  tok + strings.Repeat("A", MaxToken),
	} {
		if _, err := Parse(key, bad, now); err != ErrInvalid {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	// Signed, but not a link: an unknown action or no approver.
	for _, c := range []Claims{{Tenant: "a", Interrupt: "i", Approver: "p", Action: "edit", Expires: 2000}, {Tenant: "a", Interrupt: "i", Action: Approve, Expires: 2000}} {
		if _, err := Parse(key, Issue(key, c, now), now); err != ErrInvalid {
			t.Errorf("%+v: %v, want ErrInvalid", c, err)
		}
	}
}

// TestRequestID: every use of one link has one request id; two links, even for the
// same decision, have two.
func TestRequestID(t *testing.T) {
	now := time.Unix(1000, 0)
	a, _ := Parse(key, Issue(key, claims(), now), now)
	again, _ := Parse(key, Issue(key, a, now), now)
	b, _ := Parse(key, Issue(key, claims(), now), now)
	if a.RequestID() != again.RequestID() || a.RequestID() == b.RequestID() || len(a.RequestID()) > 128 {
		t.Fatalf("request ids %q %q %q", a.RequestID(), again.RequestID(), b.RequestID())
	}
}

// TestPairExpiry: links expire at the TTL or the interrupt's deadline, whichever is
// first, and point at the base.
func TestPairExpiry(t *testing.T) {
	is := &Issuer{Key: key, TTL: time.Hour, Base: "https://x.example/"}
	now := time.Unix(1000, 0)
	ap, rj, exp, _ := is.Pair("acme", "in-1", "d", "alice", "link", nil, now)
	if exp.Unix() != 1000+3600 || !strings.HasPrefix(ap, "https://x.example/hitl/links/") || ap == rj {
		t.Fatalf("%s %s %v", ap, rj, exp)
	}
	dl := now.Add(time.Minute)
	_, rj, exp, _ = is.Pair("acme", "in-1", "d", "alice", "link", &dl, now)
	c, err := Parse(key, strings.TrimPrefix(rj, "https://x.example/hitl/links/"), now)
	if exp.Unix() != 1060 || err != nil || c.Expires != 1060 || c.Action != Reject {
		t.Fatalf("deadline first: %v %+v %v", exp, c, err)
	}
}

// TestLinkID: both links of a pair carry one id, which CheckID accepts for its
// tenant only, with the links' expiry; an altered id, or one under another key, is
// refused.
func TestLinkID(t *testing.T) {
	is := &Issuer{Key: key, TTL: time.Hour, Base: "https://x.example"}
	now := time.Unix(1000, 0)
	ap, rj, exp, id := is.Pair("acme", "in-1", "d", "alice", "link", nil, now)
	a, errA := Parse(key, strings.TrimPrefix(ap, "https://x.example"+Path), now)
	r, errR := Parse(key, strings.TrimPrefix(rj, "https://x.example"+Path), now)
	if errA != nil || errR != nil || a.ID != id || r.ID != id || id == "" || len(id) > MaxID {
		t.Fatalf("ids %q %q %q (%v %v)", a.ID, r.ID, id, errA, errR)
	}
	if got, ok := CheckID(key, "acme", id); !ok || !got.Equal(exp) {
		t.Fatalf("CheckID(acme) = %v %v, want %v", got, ok, exp)
	}
	_, _, _, other := is.Pair("acme", "in-1", "d", "alice", "link", nil, now)
	if other == id {
		t.Fatal("two pairs share an id")
	}
	altered := []byte(id)
	altered[0] ^= 1
	for _, tc := range []struct{ tenant, id string }{
		{"beta", id}, {"acme", string(altered)}, {"acme", id + "0"}, {"acme", ""}, {"acme", "x"}, {"acme", NewID([]byte("other key"), "acme", 2000)},
	} {
		if _, ok := CheckID(key, tc.tenant, tc.id); ok {
			t.Errorf("CheckID(%q, %q) accepted", tc.tenant, tc.id)
		}
	}
}

// FuzzParse: no input makes Parse panic, and the claims of a token it accepts are
// whole: signed again, they parse again.
func FuzzParse(f *testing.F) {
	now := time.Unix(1000, 0)
	f.Add(Issue(key, claims(), now))
	f.Add("eyJ2IjoxfQ.AAAA")
	f.Add(".")
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := Parse(key, tok, now)
		if err != nil {
			return
		}
		if _, err := Parse(key, Issue(key, c, now), now); err != nil {
			t.Fatalf("accepted %q, whose claims do not parse once signed again: %v", tok, err)
		}
	})
}
