package hitl

import (
	"crypto/sha256"
	"encoding/hex"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// ArgsDigest returns the SHA-256 (lower-case hex) of a call's arguments exactly as
// given: the model's JSON text, byte for byte. Decisions bind the arguments a
// reviewer ruled on by this digest, so the text is never reformatted or reparsed
// first: 12345678901234567 stays 12345678901234567, and text that is not valid JSON
// (a model's malformed arguments) has a digest too.
func ArgsDigest(argumentsJSON string) string {
	sum := sha256.Sum256([]byte(argumentsJSON))
	return hex.EncodeToString(sum[:])
}

// ParseArgs parses a call's arguments_json for the policy and for schema checks. It
// reports false when the text is not valid JSON (and then returns nil).
func ParseArgs(argumentsJSON string) (*structpb.Value, bool) {
	v := &structpb.Value{}
	if err := protojson.Unmarshal([]byte(argumentsJSON), v); err != nil {
		return nil, false
	}
	return v, true
}
