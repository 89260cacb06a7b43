package spec

import (
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/api/specwire"
)

// Encode writes a message of the spec model as a wire document: compact JSON in the
// qar/v1 vocabulary with every object's keys sorted (see specwire.Encode).
func Encode(m proto.Message) ([]byte, error) { return specwire.Encode(m) }
