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
//   - revoked: hitl.links.revoked_before revokes every link issued before a time, a
//     new key revokes them all, and removing an approver from hitl.approvers (or the
//     approver role from their principal) revokes theirs, since both are checked
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

// Issue returns the token of c, filling V, Nonce and (when zero) Issued.
func Issue(key []byte, c Claims, now time.Time) string {
	c.V = 1
	if c.Issued == 0 {
		c.Issued = now.Unix()
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
// comes first, and when they stop working.
func (is *Issuer) Pair(tenant, interrupt, digest, approver, channel string, deadline *time.Time, now time.Time) (approve, reject string, expires time.Time) {
	exp := now.Add(is.TTL)
	if deadline != nil && deadline.Before(exp) {
		exp = *deadline
	}
	expires = time.Unix(exp.Unix(), 0).UTC()
	c := Claims{Tenant: tenant, Interrupt: interrupt, Digest: digest, Approver: approver, Channel: channel,
		Issued: now.Unix(), Expires: exp.Unix()}
	base := strings.TrimRight(is.Base, "/") + Path
	c.Action = Approve
	approve = base + Issue(is.Key, c, now)
	c.Action = Reject
	reject = base + Issue(is.Key, c, now)
	return approve, reject, expires
}
