package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

// startWithExampleAgents starts a server with the examples' static agent table, so
// that every example validates.
func startWithExampleAgents(t *testing.T) *servertest.Instance {
	t.Helper()
	cfg, err := config.Load("../examples/with-static-agents/controlplane.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base := servertest.Config(t)
	cfg.DataDir, cfg.GRPCAddr, cfg.HTTPAddr, cfg.Log = base.DataDir, base.GRPCAddr, base.HTTPAddr, base.Log
	return servertest.StartConfig(t, cfg)
}

// specCorpus is every spec example plus invalid documents: name -> YAML or JSON.
func specCorpus(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, pattern := range []string{"agents/*.yaml", "graphs/*.yaml", "runtime/*.agent.yaml", "with-static-agents/*/*.yaml"} {
		files, err := filepath.Glob(filepath.Join("../examples", pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out[f] = b
		}
	}
	if len(out) < 6 {
		t.Fatalf("found %d examples", len(out))
	}
	out["invalid agent"] = []byte("apiVersion: qar/v1\nkind: AgentSpec\ninstructions: ''\nmodel: ''\ncustom_code: 1\n" +
		"tools: [{type: function, function: {name: verdict}}]\ncontent_trust: {max_untrusted_bytes: 0}\n")
	out["invalid graph"] = []byte(`{"apiVersion":"qar/v1","kind":"GraphSpec","agents":{"a":{"role":"boss","spec":{"agent_id":"nobody"}}},` +
		`"edges":[{"from":"a","to":"b","kind":"handoff"}],"entry":"b","limits":{"max_steps":0,"max_depth":99},"termination":[]}`)
	out["out of int32 range"] = []byte(`{"apiVersion":"qar/v1","kind":"GraphSpec","agents":{"a":{"role":"supervisor","spec":{"agent_id":"triager"}}},` +
		`"entry":"a","limits":{"max_steps":3000000000},"termination":[{"kind":"agent_returns","agent":"a"}]}`)
	return out
}

// asObject is a document as a JSON object (the form a TypeScript or Python client
// holds it in).
func asObject(t *testing.T, doc []byte) *structpb.Struct {
	t.Helper()
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	s := &structpb.Struct{}
	if err := protojson.Unmarshal(j, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// triples renders violations without positions (a JSON object has no text to point
// into), sorted: a document's violations come in text order, an object's in key order
// (it keeps no order of its keys).
func triples(vs []*agentplanev1.SpecViolation) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.GetRuleId() + " " + v.GetPath() + " " + v.GetMessage()
	}
	slices.Sort(out)
	return out
}

// TestSpecJSONValidatesLikeTheDocument: every example (and a few invalid specs) sent
// as the wire-shaped JSON object (the spec arm) validates exactly like the same
// document (the same violations; the object's come in key order): over gRPC through ValidateSpec, and over HTTP as StartTask's {"spec": ...},
// against StartTask with the document over gRPC.
func TestSpecJSONValidatesLikeTheDocument(t *testing.T) {
	in := startWithExampleAgents(t)
	ctx := context.Background()
	for name, doc := range specCorpus(t) {
		t.Run(filepath.Base(name), func(t *testing.T) {
			obj := asObject(t, doc)
			byDoc, err := in.Client.Spec.ValidateSpec(ctx, &agentplanev1.ValidateSpecRequest{Source: &agentplanev1.ValidateSpecRequest_Document{Document: doc}})
			if err != nil {
				t.Fatal(err)
			}
			byObj, err := in.Client.Spec.ValidateSpec(ctx, &agentplanev1.ValidateSpecRequest{Source: &agentplanev1.ValidateSpecRequest_Spec{Spec: obj}})
			if err != nil {
				t.Fatal(err)
			}
			if byDoc.GetValid() != byObj.GetValid() || byDoc.GetKind() != byObj.GetKind() ||
				!slices.Equal(triples(byDoc.GetErrors()), triples(byObj.GetErrors())) ||
				!slices.Equal(triples(byDoc.GetWarnings()), triples(byObj.GetWarnings())) {
				t.Fatalf("gRPC ValidateSpec differs:\ndocument %v\nobject   %v", byDoc, byObj)
			}
			for _, v := range append(byObj.GetErrors(), byObj.GetWarnings()...) {
				if v.GetPosition() != nil {
					t.Errorf("a violation of a JSON object has a position: %v", v)
				}
			}
			if strings.HasPrefix(name, "invalid") && byDoc.GetValid() {
				t.Fatal("the invalid spec validated")
			}

			// StartTask: the document over gRPC, the object over HTTP.
			_, docErr := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
				Source: &agentplanev1.StartTaskRequest_Document{Document: doc}, Input: client.UserText("hi")})
			code, body := postStartTask(t, in.HTTPAddr, obj)
			if docErr == nil {
				if code != http.StatusOK || body["task"] == nil {
					t.Fatalf("HTTP StartTask with the object: %d %v", code, body)
				}
				if kind := body["task"].(map[string]any)["specKind"]; kind != byDoc.GetKind() {
					t.Fatalf("HTTP task spec kind %v, want %s", kind, byDoc.GetKind())
				}
				return
			}
			if code != http.StatusBadRequest {
				t.Fatalf("HTTP StartTask with the object: %d %v; with the document: %v", code, body, docErr)
			}
			if want, got := triples(violationsOf(docErr)), httpViolations(t, body); !slices.Equal(want, got) {
				t.Fatalf("HTTP StartTask violations differ:\ndocument %q\nobject   %q", want, got)
			}
		})
	}
}

func postStartTask(t *testing.T, addr string, spec *structpb.Struct) (int, map[string]any) {
	t.Helper()
	specJSON, err := protojson.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"spec": %s, "input": {"parts": [{"text": "hi"}]}}`, specJSON)
	resp, err := http.Post("http://"+addr+"/v1/tasks", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return resp.StatusCode, out
}

func violationsOf(err error) []*agentplanev1.SpecViolation {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if sv, ok := d.(*agentplanev1.SpecViolations); ok {
			return sv.GetViolations()
		}
	}
	return nil
}

// httpViolations reads the SpecViolations detail of an HTTP error body.
func httpViolations(t *testing.T, body map[string]any) []string {
	t.Helper()
	details, _ := body["details"].([]any)
	for _, d := range details {
		m := d.(map[string]any)
		if !strings.HasSuffix(fmt.Sprint(m["@type"]), "agentplane.v1.SpecViolations") {
			continue
		}
		b, _ := json.Marshal(m)
		sv := &agentplanev1.SpecViolations{}
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, sv); err != nil {
			t.Fatal(err)
		}
		return triples(sv.GetViolations())
	}
	t.Fatalf("no SpecViolations detail in %v", body)
	return nil
}

// TestRequestsTakeOnlyTheWireShape: the typed arms are gone from requests. Over HTTP a
// body with the typed form ("agent") is refused as malformed rather than read; over
// gRPC a request from a client built before the change (its typed AgentSpec in field
// 2, now reserved and unknown) carries no spec and is refused, whatever it holds, and
// so is ValidateSpec's (field 1). The wire shape of the same agent is accepted both ways.
func TestRequestsTakeOnlyTheWireShape(t *testing.T) {
	in := servertest.Start(t, nil)
	ctx := context.Background()
	agent := &agentplanev1.AgentSpec{ApiVersion: "qar/v1", Kind: "AgentSpec", Model: "m",
		Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "Be brief."}}}
	typed, err := protojson.Marshal(agent)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+in.HTTPAddr+"/v1/tasks", "application/json",
		strings.NewReader(`{"agent": `+string(typed)+`, "input": {"parts": [{"text": "hi"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"REQUEST_MALFORMED"`) || !strings.Contains(string(b), `unknown field \"agent\"`) {
		t.Fatalf("POST /v1/tasks with the typed agent: %d %s; want 400 REQUEST_MALFORMED naming the field", resp.StatusCode, b)
	}

	wire, err := specwire.Struct(agent)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := postStartTask(t, in.HTTPAddr, wire); code != http.StatusOK {
		t.Fatalf("POST /v1/tasks with the spec object: %d %v", code, body)
	}

	oldAgent, err := proto.Marshal(agent)
	if err != nil {
		t.Fatal(err)
	}
	start := &agentplanev1.StartTaskRequest{Input: client.UserText("hi")}
	start.ProtoReflect().SetUnknown(protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), oldAgent))
	_, err = in.Client.Tasks.StartTask(ctx, start)
	if status.Code(err) != codes.InvalidArgument || reasons.Of(err) != agentplanev1.ErrorReason_ERROR_REASON_REQUEST_INVALID ||
		!strings.Contains(status.Convert(err).Message(), "spec, document or agent_id") {
		t.Fatalf("StartTask with an old client's typed agent (field 2): %v; want INVALID_ARGUMENT REQUEST_INVALID naming the arms", err)
	}
	validate := &agentplanev1.ValidateSpecRequest{}
	validate.ProtoReflect().SetUnknown(protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), oldAgent))
	if _, err := in.Client.Spec.ValidateSpec(ctx, validate); status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(status.Convert(err).Message(), "spec or document") {
		t.Fatalf("ValidateSpec with an old client's typed agent (field 1): %v; want INVALID_ARGUMENT naming the arms", err)
	}
	if _, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: wire}, Input: client.UserText("hi")}); err != nil {
		t.Fatalf("StartTask with the spec object: %v", err)
	}
}
