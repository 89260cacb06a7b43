package a2a

import (
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
)

// structValue decodes any JSON value as a google.protobuf.Value.
type structValue struct{ v *structpb.Value }

func (s *structValue) UnmarshalJSON(b []byte) error {
	s.v = &structpb.Value{}
	return protojson.Unmarshal(b, s.v)
}

// policyFrom reads the interrupt policy a caller may pass in the message metadata
// ("agentplane.interruptPolicy", the API's InterruptPolicy as JSON), as StartTask
// takes one.
func policyFrom(raw any) (*agentplanev1.InterruptPolicy, *rpcError) {
	pol, err := config.DecodeInterruptPolicy(raw)
	if err != nil {
		return nil, invalidParams("metadata.agentplane.interruptPolicy: " + err.Error())
	}
	return pol, nil
}
