package tasks

import (
	"encoding/hex"
	"math"
	"testing"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/api/specwire"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/spec/spectest"
)

// goldenDigestRequests are varied StartTaskRequests whose digests are stored with
// tasks today: the spec as a Struct (small, nested, with lists, numbers and no-kind
// values), as a document and as an agent_id, labels, every optional field, unknown
// fields.
func goldenDigestRequests() map[string]*agentplanev1.StartTaskRequest {
	egress := true
	bench := specwire.MustStruct(&agentplanev1.AgentSpec{ApiVersion: "qar/v1", Kind: "AgentSpec", Model: "bench-model",
		Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "Answer briefly."}}})
	odd := &structpb.Struct{Fields: map[string]*structpb.Value{
		"n": structpb.NewNumberValue(math.Copysign(0, -1)), "big": structpb.NewNumberValue(1 << 60), "nan": structpb.NewNumberValue(math.NaN()),
		"none": {}, "null": structpb.NewNullValue(), "t": structpb.NewBoolValue(true), "f": structpb.NewBoolValue(false),
		"list": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStringValue(""), {}}}),
		"obj":  structpb.NewStructValue(&structpb.Struct{}), "é\n": structpb.NewStringValue("ü"),
	}}
	withUnknown := specwire.MustStruct(spectest.Agent("u", 1))
	withUnknown.ProtoReflect().SetUnknown([]byte{0x98, 0x06, 0x01})
	return map[string]*agentplanev1.StartTaskRequest{
		"bench": {RequestId: "bench-x-1", Source: &agentplanev1.StartTaskRequest_Spec{Spec: bench}, Input: userText("bench"),
			Labels: map[string]string{"bench": "x"}, Queue: "bench-x"},
		"agent":  {RequestId: "r", Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(spectest.Agent("researcher", 4))}},
		"graph":  {RequestId: "r", Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(spectest.Graph("", 6, 1))}, View: agentplanev1.TaskView_TASK_VIEW_BASIC},
		"odd":    {RequestId: "r", Source: &agentplanev1.StartTaskRequest_Spec{Spec: odd}},
		"empty":  {RequestId: "r", Source: &agentplanev1.StartTaskRequest_Spec{Spec: &structpb.Struct{}}},
		"nested": {RequestId: "r", Source: &agentplanev1.StartTaskRequest_Spec{Spec: withUnknown}},
		"document": {RequestId: "r", Source: &agentplanev1.StartTaskRequest_Document{Document: []byte("apiVersion: qar/v1\nkind: AgentSpec\n")},
			Format: agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML},
		"agent_id": {RequestId: "r", Source: &agentplanev1.StartTaskRequest_AgentId{AgentId: "triager"}},
		"everything": {RequestId: "r", Source: &agentplanev1.StartTaskRequest_Spec{Spec: bench}, Input: userText("hi"),
			Labels:          map[string]string{"a": "1", "b": "2", "c": "", "": "d"},
			InterruptPolicy: &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Allowlist{Allowlist: &agentplanev1.ToolListPolicy{Tools: []string{"x", "y"}}}},
			McpServers:      &agentplanev1.McpServerList{}, A2APeers: &agentplanev1.A2APeerList{},
			ToolAxes:         []*agentplanev1.ToolAxisOverride{{Tool: "s.t", Egress: &egress}, {Tool: "s.u"}},
			InterruptTimeout: durationpb.New(90), SessionId: "s", View: agentplanev1.TaskView_TASK_VIEW_FULL, Queue: "q", Priority: -3},
	}
}

// TestRequestDigestGolden: the digests of goldenDigestRequests are the ones the code
// stored with tasks at 861aa28 (computed by it): a change to RequestDigest that alters
// any of them would refuse a retry that straddles the upgrade.
func TestRequestDigestGolden(t *testing.T) {
	want := map[string]string{
		"agent":      "5b70610d607a6c567eef992e9d8b8292d001ef3e41cecf1b8482605cb00fc944",
		"agent_id":   "751550dd6063a539e982a28173644af168df1e5c3478ff86dacbaefdb5ee5e9c",
		"bench":      "837b8a295de44e3a6f93a34dfb3e2498f2283675493c5b88af5b2da363576725",
		"document":   "ef8687625fd0479327270af1da9ddb9f7acd9e7f9046d9c128a316ed786c9670",
		"empty":      "6d912068289b0e6bcc8956c9775c140df3fb9d20f82d944fb1a5dd93c7cc7d11",
		"everything": "fcee8311078ba180ad8bb4977c473656046bc946553e1187f5c50b5442f326cb",
		"graph":      "f0e2f8f3bfc49ab3f6c66ccfded0b4b52497df2b779a9cc8b78d47f10803d92f",
		"nested":     "e93192c7f08e7e4858d64e00a899da634ad3d955048152a4107d99412722a750",
		"odd":        "69ec18e2c3b565ae792c486377562dc469f36bc590d129e4384944eece17261c",
	}
	reqs := goldenDigestRequests()
	for name, req := range reqs {
		got := hex.EncodeToString(RequestDigest(req))
		if w, ok := want[name]; !ok {
			t.Errorf("%q: %s,", name, got)
		} else if got != w {
			t.Errorf("%s: digest %s, want %s", name, got, w)
		}
	}
	if len(want) != len(reqs) {
		t.Errorf("%d golden digests for %d requests", len(want), len(reqs))
	}
}
