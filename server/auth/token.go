package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
)

// TokenPrefix starts every token NewToken makes, so a leaked token is recognisable
// (secret scanners, logs) and a pasted one is not mistaken for something else.
const TokenPrefix = "apt_"

// tokenBytes is the token's entropy: 256 bits.
const tokenBytes = 32

// NewToken returns a fresh bearer token and the hex SHA-256 to put in the config
// (auth.tokens[].sha256). Only the hash is stored; the token is shown once.
func NewToken() (token, sha256hex string, err error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return token, HashToken(token), nil
}

// HashToken returns the hex SHA-256 of token, as stored in the config.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
