package tasks

import (
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

func TestStart(t *testing.T) {
	h := newHarness(t)
	p := params("acme")
	p.Labels = map[string]string{"team": "blue"}
	p.SessionID = "s-1"
	p.GateEvents = []*agentplanev1.TaskEvent{{Payload: &agentplanev1.TaskEvent_McpInjectionIgnored{
		McpInjectionIgnored: &agentplanev1.InjectionIgnored{Names: []string{"evil"}, Reason: "multi_tenant"},
	}}}
	task := h.start(t, p)
	if task.GetState() != agentplanev1.TaskState_TASK_STATE_SUBMITTED || task.GetAgentId() != "echo" || MessageText(task.GetInput()) != "hello" || task.GetInput().GetRole() != agentplanev1.MessageRole_MESSAGE_ROLE_USER || task.GetInput().GetMessageId() == "" ||
		task.GetLabels()["team"] != "blue" || task.GetCreatedBy() != "owner" || task.GetLastSequence() != 2 || task.GetTenant() != "acme" {
		t.Fatalf("Start = %v", task)
	}
	equal(t, "Get", h.get(t, "acme", task.GetTaskId()), task)
	equal(t, "log", kinds(h.events(t, "acme", task.GetTaskId())), []string{"submitted", "mcp_injection_ignored"})

	_, err := h.m.Get(ctx, "other", task.GetTaskId(), ViewFull)
	wantErr(t, err, codes.NotFound, apierr.ReasonTaskNotFound)
	_, err = h.m.Get(ctx, "acme", "absent", ViewFull)
	wantErr(t, err, codes.NotFound, apierr.ReasonTaskNotFound)
}

func TestStartRefusesBadParams(t *testing.T) {
	h := newHarness(t)
	for name, tc := range map[string]struct {
		mod  func(*StartParams)
		code codes.Code
	}{
		"no spec":             {func(p *StartParams) { p.AgentID = "" }, codes.InvalidArgument},
		"two specs":           {func(p *StartParams) { p.Agent = &agentplanev1.AgentSpec{} }, codes.InvalidArgument},
		"no resolved spec":    {func(p *StartParams) { p.Resolved = nil }, codes.InvalidArgument},
		"no tenant":           {func(p *StartParams) { p.Tenant = "" }, codes.InvalidArgument},
		"long request id":     {func(p *StartParams) { p.RequestID = strings.Repeat("r", 129) }, codes.InvalidArgument},
		"input over limit":    {func(p *StartParams) { p.Input = userText(strings.Repeat("x", 1025)) }, codes.ResourceExhausted},
		"input without parts": {func(p *StartParams) { p.Input = &agentplanev1.Message{} }, codes.InvalidArgument},
		"assistant input":     {func(p *StartParams) { p.Input.Role = agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT }, codes.InvalidArgument},
		"empty part":          {func(p *StartParams) { p.Input.Parts = append(p.Input.Parts, &agentplanev1.Part{}) }, codes.InvalidArgument},
		"too many labels":     {func(p *StartParams) { p.Labels = map[string]string{"a": "", "b": "", "c": "", "d": "", "e": ""} }, codes.InvalidArgument},
		"empty label key":     {func(p *StartParams) { p.Labels = map[string]string{"": "v"} }, codes.InvalidArgument},
		"negative timeout":    {func(p *StartParams) { p.InterruptTimeout = -1 }, codes.InvalidArgument},
		"gate event payload":  {func(p *StartParams) { p.GateEvents = []*agentplanev1.TaskEvent{{}} }, codes.InvalidArgument},
	} {
		t.Run(name, func(t *testing.T) {
			p := params("acme")
			tc.mod(&p)
			_, _, err := h.m.Start(ctx, p)
			wantErr(t, err, tc.code, 0)
		})
	}
	if tasks, _, _ := h.m.List(ctx, "acme", ListQuery{}); len(tasks) != 0 {
		t.Fatalf("refused starts left %d tasks", len(tasks))
	}
}

func TestStartIsIdempotentPerTenant(t *testing.T) {
	h := newHarness(t)
	p := params("acme")
	p.RequestID = "req-1"
	first := h.start(t, p)

	again, created, err := h.m.Start(ctx, p)
	if err != nil || created || again.GetTaskId() != first.GetTaskId() {
		t.Fatalf("retry = %v, created=%v, %v; want the same task, not created", again.GetTaskId(), created, err)
	}

	changed := p
	changed.Input = userText("something else")
	_, _, err = h.m.Start(ctx, changed)
	wantErr(t, err, codes.AlreadyExists, apierr.ReasonRequestIDReused)

	explicit := p
	explicit.RequestDigest = RequestDigest(&agentplanev1.StartTaskRequest{RequestId: "req-2", Input: userText("x")})
	explicit.RequestID = "req-2"
	a := h.start(t, explicit)
	explicit.RequestDigest = RequestDigest(&agentplanev1.StartTaskRequest{RequestId: "req-2", Input: userText("x")})
	b, created, err := h.m.Start(ctx, explicit)
	if err != nil || created || b.GetTaskId() != a.GetTaskId() {
		t.Fatalf("retry with a caller digest = %v, %v, %v", b.GetTaskId(), created, err)
	}

	other := p
	other.Tenant = "beta"
	if h.start(t, other).GetTaskId() == first.GetTaskId() {
		t.Fatal("another tenant's request id returned acme's task")
	}
}

// TestStartDigestsOnlyWithRequestID: a start without a request_id stores no request
// digest (no retry can be compared with it, so none is computed); one with a
// request_id stores the digest its retries are compared with.
func TestStartDigestsOnlyWithRequestID(t *testing.T) {
	h := newHarness(t)
	withID := params("acme")
	withID.RequestID = "req-1"
	for _, tc := range []struct {
		p      StartParams
		digest bool
	}{{params("acme"), false}, {withID, true}} {
		p := tc.p
		p.RequestDigest = RequestDigest(&agentplanev1.StartTaskRequest{RequestId: p.RequestID, Input: p.Input})
		task := h.start(t, p)
		var rec *storagev1.TaskRecord
		if err := h.store.View(ctx, func(r store.Reader) (err error) {
			rec, err = r.GetTask("acme", task.GetTaskId())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got := len(rec.GetRequestDigest()) > 0; got != tc.digest {
			t.Fatalf("request_id %q: stored digest %x, want one: %v", p.RequestID, rec.GetRequestDigest(), tc.digest)
		}
	}
}

func TestStartConcurrentRetriesCreateOneTask(t *testing.T) {
	h := newHarness(t)
	p := params("acme")
	p.RequestID = "req-race"
	const n = 24
	ids := make([]string, n)
	created := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			task, c, err := h.m.Start(ctx, p)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i], created[i] = task.GetTaskId(), c
		})
	}
	wg.Wait()
	creations := 0
	for i := range n {
		if ids[i] != ids[0] {
			t.Fatalf("retries returned different tasks: %v", ids)
		}
		if created[i] {
			creations++
		}
	}
	if creations != 1 {
		t.Fatalf("%d retries reported created, want 1", creations)
	}
}
