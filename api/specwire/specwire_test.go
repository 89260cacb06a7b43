package specwire_test

import (
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/api/specwire"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/spec"
	"github.com/agentplane/agentplane/server/spec/spectest"
)

// TestStructIsTheWireShape: Struct gives the spec in the wire shape (instructions as a
// bare string, a node's spec as the agent itself), and the server's decoder reads it
// back as the typed spec it came from.
func TestStructIsTheWireShape(t *testing.T) {
	agent := &agentplanev1.AgentSpec{ApiVersion: "qar/v1", Kind: "AgentSpec", Name: proto.String("a"), Model: "m",
		Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "Be brief."}}}
	s, err := specwire.Struct(agent)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.GetFields()["instructions"].GetStringValue(); got != "Be brief." {
		t.Errorf("instructions = %v, want the bare string", s.GetFields()["instructions"])
	}
	for _, m := range []proto.Message{agent, spectest.Graph("", 3, 1)} {
		s := specwire.MustStruct(m)
		b, err := protojson.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		doc := spec.Decode(b, agentplanev1.DocumentFormat_DOCUMENT_FORMAT_JSON, spec.Limits{})
		if v := doc.Violations(); len(v) > 0 {
			t.Fatalf("%T: the decoder reports %v", m, v)
		}
		var back proto.Message = doc.Agent
		if _, ok := m.(*agentplanev1.GraphSpec); ok {
			back = doc.Graph
		}
		if d := cmpDiff(m, back); d != "" {
			t.Errorf("%T does not read back as itself: %s", m, d)
		}
	}
}

func cmpDiff(a, b proto.Message) string {
	if proto.Equal(a, b) {
		return ""
	}
	return protojson.Format(a) + " != " + protojson.Format(b)
}
