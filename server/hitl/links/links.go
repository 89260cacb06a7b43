// Package links makes and checks signed approve and reject links: a token that names
// one decision (approve or reject) on one interrupt of one tenant, for one approver,
// on the arguments with one digest, until an expiry.
//
// A token is stateless: the claims, base64url, a dot, and the base64url HMAC-SHA256
// of them under the deployment's link key. Nothing is stored when a link is sent, so
// a notification retried by the outbox costs nothing and replicas need only share
// the key. What makes a link die is durable elsewhere, in the one decision path:
//
//   - used: the decision goes through approvals ResolveInterrupt under a request id
//     derived from the token (RequestID), so a link used twice makes one decision,
//     and a resolved interrupt refuses every further one;
//   - resolved or expired interrupt: refused by ResolveInterrupt, and by the page
//     before it offers to decide;
//   - changed arguments (an edit): the token's digest no longer matches the
//     interrupt's, and ResolveInterrupt refuses a stale args_digest
//     (INTERRUPT_ARGS_MISMATCH);
//   - revoked: one link (both of an approve/reject pair) by its ID, through
//     HitlService.RevokeApprovalLink, which stores a small record until the link's
//     expiry; hitl.links.revoked_before revokes every link issued before a time, a
//     new key revokes them all, and removing an approver from hitl.approvers (or the
//     approver role from their principal) revokes theirs, since all are checked
//     when a link is used.
package links

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Action is the decision a link makes.
type Action string

// The actions a link can carry.
const (
	Approve Action = "approve"
	Reject  Action = "reject"
)

// Claims are what a token binds.
type Claims struct {
	// V is the format version (1).
	V int `json:"v"`
	// Tenant, Interrupt and Digest name the interrupt and the arguments (args_digest)
	// the link rules on.
	Tenant    string `json:"t"`
	Interrupt string `json:"i"`
	Digest    string `json:"d"`
	// Approver is the principal the decision is made as.
	Approver string `json:"p"`
	Action   Action `json:"a"`
	// Channel is where the link was sent: link (a webhook or Slack message) or email.
	Channel string `json:"c"`
	// Issued and Expires are Unix seconds.
	Issued  int64 `json:"iat"`
	Expires int64 `json:"exp"`
	// Nonce tells two links for the same decision apart (hex).
	Nonce string `json:"n"`
	// ID names the link for revocation (NewID): shared by the approve and reject links
	// of one pair. Links issued before IDs existed have none and can be revoked only
	// all at once (revoked_before, a new key).
	ID string `json:"id,omitempty"`
}

// MaxToken bounds the length of a token accepted from the wire.
const MaxToken = 2048

// Errors of Parse.
var (
	ErrInvalid = errors.New("links: the link is not valid")
	ErrExpired = errors.New("links: the link has expired")
)

// domain separates link signatures from every other use of the key.
const domain = "agentplane-link-v1."

// MaxID bounds the length of a link id accepted from the wire.
const MaxID = 128

// idDomain separates link id tags from link signatures.
const idDomain = "agentplane-link-id-v1."

// NewID returns a new link id of tenant for a link expiring at expires (Unix
// seconds): the expiry in base 36, a random part and a tag, the HMAC of the tenant
// and the rest under the link key, so that the server can tell, without storing
// anything when links are sent, whether an id is one of the tenant's links and when
// that link expires (CheckID).
func NewID(key []byte, tenant string, expires int64) string {
	var n [8]byte
	_, _ = rand.Read(n[:])
	body := strconv.FormatInt(expires, 36) + "." + hex.EncodeToString(n[:])
	return body + "." + idTag(key, tenant, body)
}

func idTag(key []byte, tenant, body string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(idDomain))
	m.Write([]byte(tenant))
	m.Write([]byte{0})
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil)[:12])
}

// CheckID reports whether id is a link id NewID made for tenant under key (compared
// in constant time), and when that link expires. Another tenant's id, an altered one
// or one made under another key is not.
func CheckID(key []byte, tenant, id string) (expires time.Time, ok bool) {
	if len(id) > MaxID {
		return time.Time{}, false
	}
	i := strings.LastIndexByte(id, '.')
	if i < 0 {
		return time.Time{}, false
	}
	body, tag := id[:i], id[i+1:]
	exp36, _, found := strings.Cut(body, ".")
	if !found || !hmac.Equal([]byte(tag), []byte(idTag(key, tenant, body))) {
		return time.Time{}, false
	}
	exp, err := strconv.ParseInt(exp36, 36, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(exp, 0).UTC(), true
}

// Issue returns the token of c, filling V, Nonce, ID and (when zero) Issued.
func Issue(key []byte, c Claims, now time.Time) string {
	c.V = 1
	if c.Issued == 0 {
		c.Issued = now.Unix()
	}
	if c.ID == "" {
		c.ID = NewID(key, c.Tenant, c.Expires)
	}
	if c.Nonce == "" {
		var n [12]byte
		_, _ = rand.Read(n[:])
		c.Nonce = hex.EncodeToString(n[:])
	}
	b, _ := json.Marshal(c) // plain strings and numbers always encode
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(sign(key, payload))
}

func sign(key []byte, payload string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(domain))
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// Parse checks token's signature (in constant time) and expiry against now and
// returns its claims. A token that is not ours, or altered in any byte, is
// ErrInvalid; one past its expiry is ErrExpired (with the claims, for the page).
func Parse(key []byte, token string, now time.Time) (Claims, error) {
	if len(token) > MaxToken {
		return Claims{}, ErrInvalid
	}
	payload, sig, ok := strings.Cut(token, ".")
	if !ok {
		return Claims{}, ErrInvalid
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, sign(key, payload)) {
		return Claims{}, ErrInvalid
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return Claims{}, ErrInvalid
	}
	var c Claims
	if err := json.Unmarshal(b, &c); err != nil || c.V != 1 || c.Tenant == "" || c.Interrupt == "" ||
		c.Digest == "" || c.Approver == "" || (c.Action != Approve && c.Action != Reject) {
		return Claims{}, ErrInvalid
	}
	if now.Unix() >= c.Expires {
		return c, ErrExpired
	}
	return c, nil
}

// RequestID is the ResolveInterrupt request id of a decision made with the link:
// the same for every use of one link, different for every other link.
func (c Claims) RequestID() string {
	h := sha256.Sum256([]byte(c.Tenant + "\x00" + c.Interrupt + "\x00" + c.Nonce))
	return "link-" + hex.EncodeToString(h[:16])
}

// Issuer makes the links of notifications.
type Issuer struct {
	// Key signs the tokens.
	Key []byte
	// TTL is how long a link works after it is issued.
	TTL time.Duration
	// Base is the public base URL (notifications.console_url).
	Base string
}

// Path is where the link pages are served.
const Path = "/hitl/links/"

// Pair returns approver's approve and reject links for the interrupt, sent through
// channel, working until the interrupt's deadline (nil: none) or the TTL, whichever
// comes first, when they stop working, and their id (both links share it: revoking
// it revokes the pair).
func (is *Issuer) Pair(tenant, interrupt, digest, approver, channel string, deadline *time.Time, now time.Time) (approve, reject string, expires time.Time, id string) {
	exp := now.Add(is.TTL)
	if deadline != nil && deadline.Before(exp) {
		exp = *deadline
	}
	expires = time.Unix(exp.Unix(), 0).UTC()
	c := Claims{Tenant: tenant, Interrupt: interrupt, Digest: digest, Approver: approver, Channel: channel,
		Issued: now.Unix(), Expires: exp.Unix(), ID: NewID(is.Key, tenant, exp.Unix())}
	base := strings.TrimRight(is.Base, "/") + Path
	c.Action = Approve
	approve = base + Issue(is.Key, c, now)
	c.Action = Reject
	reject = base + Issue(is.Key, c, now)
	return approve, reject, expires, c.ID
}
