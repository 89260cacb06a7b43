package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/servertest"
)

// TestHTTPValidateSeedShape: POST /v1/specs/validate takes the spec JSON itself and
// answers the wire's validation result (docs/vocabulary.md).
func TestHTTPValidateSeedShape(t *testing.T) {
	in := servertest.Start(t, nil)
	post := func(body string) map[string]any {
		t.Helper()
		resp, err := http.Post("http://"+in.HTTPAddr+"/v1/specs/validate", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		return out
	}
	ok := post(`{"apiVersion":"qar/v1","kind":"AgentSpec","instructions":"Be brief.","model":"gpt-4o"}`)
	if ok["valid"] != true || ok["errors"] != nil {
		t.Fatalf("valid spec: %v", ok)
	}
	// Duplicate keys under agents survive HTTP: the body reaches the document decoder raw.
	bad := post(`{"apiVersion":"qar/v1","kind":"GraphSpec","agents":{"a/b":{"role":"supervisor","spec":{"agent_id":"x"}},"a/b":{"role":"supervisor","spec":{"agent_id":"x"}}},"entry":"a/b","limits":{},"termination":[{"kind":"agent_returns","agent":"a/b"}]}`)
	if bad["valid"] != false {
		t.Fatalf("invalid spec: %v", bad)
	}
	found := false
	for _, e := range bad["errors"].([]any) {
		m := e.(map[string]any)
		for _, k := range []string{"rule_id", "path", "message"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("error lacks %q: %v", k, m)
			}
		}
		if m["rule_id"] == "D11-R3" && m["path"] == "/agents/a~1b" {
			found = true
		}
	}
	if !found {
		t.Fatalf("want D11-R3 at /agents/a~1b (escaped pointer), got %v", bad["errors"])
	}
}

// TestStartTaskRunsTheSameValidation: an invalid spec is INVALID_ARGUMENT with reason
// SPEC_INVALID and the same violations ValidateSpec reports, and never becomes a task.
func TestStartTaskRunsTheSameValidation(t *testing.T) {
	in := servertest.Start(t, nil)
	ctx := context.Background()
	doc := []byte("apiVersion: qar/v1\nkind: AgentSpec\ninstructions: ''\nmodel: m\nparent_close_policy: 1\n")
	v, err := in.Client.Spec.ValidateSpec(ctx, &agentplanev1.ValidateSpecRequest{Source: &agentplanev1.ValidateSpecRequest_Document{Document: doc}})
	if err != nil || v.GetValid() {
		t.Fatalf("ValidateSpec: %v %v", v, err)
	}
	_, err = in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{RequestId: "r1", Source: &agentplanev1.StartTaskRequest_Document{Document: doc}, Input: client.UserText("hi")})
	if status.Code(err) != codes.InvalidArgument || reasons.Of(err) != apierr.ReasonSpecInvalid {
		t.Fatalf("StartTask: want INVALID_ARGUMENT SPEC_INVALID, got %v", err)
	}
	var got []*agentplanev1.SpecViolation
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if sv, ok := d.(*agentplanev1.SpecViolations); ok {
			got = sv.GetViolations()
		}
	}
	if len(got) != len(v.GetErrors()) {
		t.Fatalf("StartTask violations %v, ValidateSpec %v", got, v.GetErrors())
	}
	for i := range got {
		if got[i].GetRuleId() != v.GetErrors()[i].GetRuleId() || got[i].GetPath() != v.GetErrors()[i].GetPath() {
			t.Fatalf("violation %d differs: %v vs %v", i, got[i], v.GetErrors()[i])
		}
	}
	list, err := in.Client.Tasks.ListTasks(ctx, &agentplanev1.ListTasksRequest{})
	if err != nil || len(list.GetTasks()) != 0 {
		t.Fatalf("an invalid spec became a task: %v %v", list, err)
	}
}

// TestListRulesPages: pages of the catalogue join up to the whole of it, in id order,
// and a token that was not issued is refused.
func TestListRulesPages(t *testing.T) {
	in := servertest.Start(t, nil)
	ctx := context.Background()
	all, err := in.Client.Spec.ListRules(ctx, &agentplanev1.ListRulesRequest{PageSize: 500})
	if err != nil || all.GetNextPageToken() != "" || len(all.GetRules()) < 20 {
		t.Fatalf("whole catalogue: %d rules, next %q, %v", len(all.GetRules()), all.GetNextPageToken(), err)
	}
	// page_size 0 is the default page of every List RPC, 50, not the whole catalogue.
	if def, err := in.Client.Spec.ListRules(ctx, &agentplanev1.ListRulesRequest{}); err != nil ||
		len(def.GetRules()) != min(50, len(all.GetRules())) || (len(all.GetRules()) > 50) != (def.GetNextPageToken() != "") {
		t.Fatalf("default page: %d rules, next %q, %v", len(def.GetRules()), def.GetNextPageToken(), err)
	}
	var paged []string
	token := ""
	for {
		resp, err := in.Client.Spec.ListRules(ctx, &agentplanev1.ListRulesRequest{PageSize: 7, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetRules()) > 7 {
			t.Fatalf("page of %d rules, asked for 7", len(resp.GetRules()))
		}
		for _, r := range resp.GetRules() {
			paged = append(paged, r.GetRuleId())
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(paged) != len(all.GetRules()) {
		t.Fatalf("pages hold %d rules, the catalogue %d", len(paged), len(all.GetRules()))
	}
	for i, r := range all.GetRules() {
		if paged[i] != r.GetRuleId() {
			t.Fatalf("rule %d: paged %s, whole %s", i, paged[i], r.GetRuleId())
		}
	}
	for _, bad := range []string{"x", "-1", "100000"} {
		_, err := in.Client.Spec.ListRules(ctx, &agentplanev1.ListRulesRequest{PageToken: bad})
		if reasons.Of(err) != apierr.ReasonPageTokenInvalid {
			t.Errorf("token %q: want PAGE_TOKEN_INVALID, got %v", bad, err)
		}
	}
	if _, err := in.Client.Spec.GetRule(ctx, &agentplanev1.GetRuleRequest{RuleId: "D13-R3"}); err != nil {
		t.Fatalf("GetRule D13-R3: %v", err)
	}
}

// TestDenseDocumentIsLimitExceeded: a document of the size limit that is all structure
// (a flow list of one-letter scalars) is refused before it is parsed, as
// RESOURCE_EXHAUSTED LIMIT_EXCEEDED with the finding attached, by ValidateSpec and
// StartTask alike, and over HTTP.
func TestDenseDocumentIsLimitExceeded(t *testing.T) {
	in := servertest.Start(t, nil)
	ctx := context.Background()
	var b strings.Builder
	b.WriteString("apiVersion: qar/v1\nkind: AgentSpec\ninstructions: x\nmodel: m\nmetadata: [")
	for b.Len() < 1<<20-3 {
		b.WriteString("a,")
	}
	b.WriteString("a]\n")
	doc := []byte(b.String())
	check := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.ResourceExhausted || reasons.Of(err) != apierr.ReasonResourceExhausted {
			t.Fatalf("%s: got %v (%v), want RESOURCE_EXHAUSTED LIMIT_EXCEEDED", what, err, reasons.Info(err))
		}
		var found bool
		for _, d := range status.Convert(err).Details() {
			if v, ok := d.(*agentplanev1.SpecViolations); ok && len(v.GetViolations()) == 1 && v.GetViolations()[0].GetRuleId() == "DOC-TOO-LARGE" {
				found = true
			}
		}
		if !found || !strings.Contains(status.Convert(err).Message(), "values") {
			t.Fatalf("%s: %v lacks the DOC-TOO-LARGE finding", what, err)
		}
	}
	_, err := in.Client.Spec.ValidateSpec(ctx, &agentplanev1.ValidateSpecRequest{Source: &agentplanev1.ValidateSpecRequest_Document{Document: doc}})
	check("ValidateSpec", err)
	_, err = in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{RequestId: "dense", Source: &agentplanev1.StartTaskRequest_Document{Document: doc}, Input: client.UserText("hi")})
	check("StartTask", err)

	resp, err := http.Post("http://"+in.HTTPAddr+"/v1/specs/validate", "application/yaml", strings.NewReader(string(doc)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), `"LIMIT_EXCEEDED"`) {
		t.Fatalf("HTTP: %d %s", resp.StatusCode, body)
	}
}

// TestStartTaskBadPolicyKeepsItsDetail: a CEL predicate that does not compile is
// POLICY_INVALID with its BadRequest detail, and the message says it once.
func TestStartTaskBadPolicyKeepsItsDetail(t *testing.T) {
	in := servertest.Start(t, nil)
	_, err := in.Client.Tasks.StartTask(context.Background(), &agentplanev1.StartTaskRequest{
		RequestId: "cel", Input: client.UserText("hi"),
		Source: &agentplanev1.StartTaskRequest_Document{Document: []byte("apiVersion: qar/v1\nkind: AgentSpec\ninstructions: x\nmodel: m\n")},
		InterruptPolicy: &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Predicate{
			Predicate: &agentplanev1.PredicatePolicy{Expression: "tool_name ==="}}},
	})
	if status.Code(err) != codes.InvalidArgument || reasons.Of(err) != apierr.ReasonPolicyInvalid {
		t.Fatalf("got %v, want INVALID_ARGUMENT POLICY_INVALID", err)
	}
	st := status.Convert(err)
	if msg := st.Message(); strings.Count(msg, "invalid interrupt_policy") != 1 || strings.Contains(msg, "POLICY_INVALID") {
		t.Errorf("the message repeats itself or its code: %q", msg)
	}
	var fields []string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fields = append(fields, v.GetField())
			}
		}
	}
	if len(fields) == 0 {
		t.Fatalf("no BadRequest detail in %v", st.Details())
	}
}
