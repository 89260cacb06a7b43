package tasks

import (
	"bytes"
	"crypto/sha256"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/api/specwire"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// TestRequestDigestIgnoresOnlyIDAndView: the digest is that of the whole request with
// request_id and view cleared (what earlier releases stored with each task, and compare
// a retry against), every other field and unknown fields included, and the caller's
// request is left as it was.
func TestRequestDigestIgnoresOnlyIDAndView(t *testing.T) {
	egress := true
	req := &agentplanev1.StartTaskRequest{
		RequestId: "req-1",
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(&agentplanev1.AgentSpec{ApiVersion: "qar/v1", Kind: "AgentSpec", Model: "m",
			Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "hi"}}})},
		Input:            userText("input"),
		Labels:           map[string]string{"a": "1", "b": "2", "c": "3"},
		McpServers:       &agentplanev1.McpServerList{},
		ToolAxes:         []*agentplanev1.ToolAxisOverride{{Tool: "s.t", Egress: &egress}, {Tool: "s.u"}},
		InterruptTimeout: durationpb.New(90),
		SessionId:        "session",
		View:             agentplanev1.TaskView_TASK_VIEW_FULL,
	}
	// Unknown: field 99 varint 1, field 1 varint 5 and field 15 bytes "x" (the numbers of
	// request_id and view, under other wire types, are fields of their own).
	req.ProtoReflect().SetUnknown([]byte{0x98, 0x06, 0x01, 0x08, 0x05, 0x7a, 0x01, 'x'})
	before := proto.Clone(req)

	cleared := proto.Clone(req).(*agentplanev1.StartTaskRequest)
	cleared.RequestId = ""
	cleared.View = agentplanev1.TaskView_TASK_VIEW_UNSPECIFIED
	if got, want := RequestDigest(req), clearedDigest(cleared); !bytes.Equal(got, want) {
		t.Fatalf("digest %x, want that of the request without its id, %x", got, want)
	}
	if !proto.Equal(req, before) {
		t.Fatal("RequestDigest changed the request")
	}
	other := proto.Clone(req).(*agentplanev1.StartTaskRequest)
	other.RequestId, other.View = "req-2", agentplanev1.TaskView_TASK_VIEW_BASIC
	if !bytes.Equal(RequestDigest(req), RequestDigest(other)) {
		t.Fatal("the digest depends on request_id or view")
	}
	for name, change := range map[string]func(*agentplanev1.StartTaskRequest){
		"a label":       func(r *agentplanev1.StartTaskRequest) { r.Labels["a"] = "x" },
		"a tool axis":   func(r *agentplanev1.StartTaskRequest) { r.ToolAxes[1].Egress = &egress },
		"the spec":      func(r *agentplanev1.StartTaskRequest) { r.GetSpec().Fields["model"] = structpb.NewStringValue("n") },
		"unknown field": func(r *agentplanev1.StartTaskRequest) { r.ProtoReflect().SetUnknown([]byte{0x98, 0x06, 0x02}) },
		"unknown field 1": func(r *agentplanev1.StartTaskRequest) {
			r.ProtoReflect().SetUnknown([]byte{0x98, 0x06, 0x01, 0x7a, 0x01, 'x'})
		},
		"unknown field 15": func(r *agentplanev1.StartTaskRequest) {
			r.ProtoReflect().SetUnknown([]byte{0x98, 0x06, 0x01, 0x08, 0x05})
		},
	} {
		changed := proto.Clone(req).(*agentplanev1.StartTaskRequest)
		change(changed)
		if bytes.Equal(RequestDigest(req), RequestDigest(changed)) {
			t.Fatalf("changing %s left the digest as it was", name)
		}
	}
}

// clearedDigest is what RequestDigest was first written as: the SHA-256 of the
// deterministic encoding of a copy of the request with request_id and view cleared.
func clearedDigest(m proto.Message) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic(err)
	}
	sum := sha256.Sum256(b)
	return sum[:]
}

func BenchmarkRequestDigest(b *testing.B) {
	req := &agentplanev1.StartTaskRequest{
		RequestId: "req-1",
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(&agentplanev1.AgentSpec{ApiVersion: "qar/v1", Kind: "AgentSpec", Model: "m",
			Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "Answer briefly."}}})},
		Input: userText("bench"),
	}
	for b.Loop() {
		RequestDigest(req)
	}
}
