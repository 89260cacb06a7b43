package pagetoken

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"slices"

	"github.com/agentplane/agentplane/server/apierr"
)

const (
	version = 1
	macLen  = 16
	// maxToken bounds what Open decodes; cursors are store keys, far shorter.
	maxToken = 2048
)

// Codec seals and opens page tokens with one key.
type Codec struct {
	key []byte
}

// New returns a Codec using key (at least 16 random bytes).
func New(key []byte) *Codec { return &Codec{key: slices.Clone(key)} }

// Scope builds the scope a token is bound to from its parts (listing name, tenant,
// filter values). Parts are length-prefixed, so ("ab","c") and ("a","bc") differ.
func Scope(parts ...string) []byte {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return h.Sum(nil)
}

// Seal returns the token for cursor within scope. An empty cursor gives "".
func (c *Codec) Seal(scope, cursor []byte) string {
	if len(cursor) == 0 {
		return ""
	}
	b := make([]byte, 0, 1+len(cursor)+macLen)
	b = append(b, version)
	b = append(b, cursor...)
	b = append(b, c.mac(scope, cursor)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Open returns the cursor sealed in token for scope. The empty token opens to a nil
// cursor (the first page). Anything not sealed by this codec for this scope is
// InvalidArgument with reason PAGE_TOKEN_INVALID.
func (c *Codec) Open(scope []byte, token string) ([]byte, error) {
	if token == "" {
		return nil, nil
	}
	invalid := apierr.InvalidArgument(apierr.ReasonPageTokenInvalid,
		"page_token is not valid for this request: pass the next_page_token of the previous page unchanged, with the same filters")
	if len(token) > maxToken {
		return nil, invalid
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) < 1+1+macLen || b[0] != version {
		return nil, invalid
	}
	cursor, mac := b[1:len(b)-macLen], b[len(b)-macLen:]
	if !hmac.Equal(mac, c.mac(scope, cursor)) {
		return nil, invalid
	}
	return bytes.Clone(cursor), nil
}

func (c *Codec) mac(scope, cursor []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte{version})
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(scope)))
	m.Write(n[:])
	m.Write(scope)
	m.Write(cursor)
	return m.Sum(nil)[:macLen]
}
