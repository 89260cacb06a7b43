package a2atool

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/runtime/internal/agent"
	"github.com/agentplane/agentplane/cmd/runtime/internal/agenttest"
	"github.com/agentplane/agentplane/cmd/runtime/internal/fakemodel"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
)

var quiet = agenttest.Quiet

// peer is an A2A agent served by the a2a-go server library over JSON-RPC, its card at
// the well-known path; it answers with the skill it was asked for and the text.
type peer struct {
	url   string
	mu    sync.Mutex
	asked []string
}

func (p *peer) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	var text string
	for _, part := range rc.Message.Parts {
		if tp, ok := part.(a2a.TextPart); ok {
			text += tp.Text
		}
	}
	skill, _ := rc.Message.Metadata["skill"].(string)
	p.mu.Lock()
	p.asked = append(p.asked, skill+":"+text)
	p.mu.Unlock()
	return q.Write(ctx, a2a.NewMessage(a2a.MessageRoleAgent, a2a.TextPart{Text: fmt.Sprintf("[%s] order 42 ships tomorrow", skill)}))
}

func (p *peer) Cancel(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error { return nil }

func (p *peer) Asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.asked...)
}

// startPeer serves the peer; token, when set, is required as a bearer token.
// endpoint, when set, is the card's URL instead of the peer's own /rpc.
func startPeer(t *testing.T, token, endpoint string) *peer {
	p := &peer{}
	mux := http.NewServeMux()
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(p)))
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	if endpoint == "" {
		endpoint = hs.URL + "/rpc"
	}
	card := &a2a.AgentCard{
		Name: "Shipping desk", Description: "Knows where parcels are", URL: endpoint,
		PreferredTransport: a2a.TransportProtocolJSONRPC, ProtocolVersion: "0.3.0", Version: "1.0.0",
		DefaultInputModes: []string{"text"}, DefaultOutputModes: []string{"text"},
		Skills: []a2a.AgentSkill{
			{ID: "track", Name: "Track a parcel", Description: "Says where an order's parcel is", Tags: []string{"shipping"}},
			{ID: "eta.v2", Name: "Delivery estimate", Description: "Estimates delivery", Tags: []string{"shipping"}},
		},
	}
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	p.url = hs.URL
	return p
}

// TestMountAndCall: the card is read with the peer's headers, its skills mount as
// a2a__<peer>__<skill>, and a call reaches the peer through the a2a-go client with the
// skill named in the message's metadata.
func TestMountAndCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pe := startPeer(t, "s3cret", "")
	offsite := startPeer(t, "", "http://192.0.2.1:9/rpc") // the card sends elsewhere
	var rec agenttest.Notes
	tools, release, err := (&Provider{}).MountPeers(ctx, []*agentplanev1.A2APeer{
		{Name: "shipping", Url: pe.url, Headers: map[string]string{"Authorization": "Bearer s3cret"}},
		{Name: "elsewhere", Url: offsite.url},
		{Name: "nocreds", Url: pe.url},
	}, quiet, rec.Note)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if len(rec.Texts) != 2 || !strings.Contains(rec.Texts[0], "not on the peer's origin") || !strings.Contains(rec.Texts[1], "HTTP 401") {
		t.Errorf("notes %q", rec.Texts)
	}
	if len(tools) != 2 || tools[0].GateName != "a2a__shipping__track" || tools[0].ModelName != "a2a__shipping__track" ||
		tools[1].GateName != "a2a__shipping__eta.v2" || tools[1].ModelName != "a2a__shipping__eta_v2" {
		for _, rt := range tools {
			t.Logf("mounted %s as %s", rt.GateName, rt.ModelName)
		}
		t.Fatalf("mounted %d tools", len(tools))
	}
	got, isErr := tools[0].Run(ctx, `{"message":"where is order 42?"}`)
	if isErr || got != "[track] order 42 ships tomorrow" {
		t.Errorf("track = %q, %v", got, isErr)
	}
	if got, isErr := tools[1].Run(ctx, `{}`); !isErr || !strings.Contains(got, `"message"`) {
		t.Errorf("eta without a message = %q, %v; want an arguments error", got, isErr)
	}
	if asked := pe.Asked(); len(asked) != 1 || asked[0] != "track:where is order 42?" {
		t.Errorf("the peer was asked %q", asked)
	}
}

// TestAgentSkillAlwaysGated: with a real control plane, an A2A skill waits for
// approval even though the task's policy lists no tool; once approved the peer is
// asked exactly once and the model reads its answer.
func TestAgentSkillAlwaysGated(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in := servertest.Start(t, nil)
	pe := startPeer(t, "", "")
	model := fakemodel.Start(t,
		fakemodel.Turn{Calls: []fakemodel.Call{{ID: "c1", Name: "a2a__shipping__track", Arguments: `{"message":"order 42?"}`}}},
		fakemodel.Turn{Text: "It ships tomorrow."},
	)
	r := &agent.Runner{
		Routes:    []agent.Route{{Pattern: "fake-*", BaseURL: model.URL}},
		Providers: []agent.ToolProvider{&Provider{}},
		Logger:    quiet,
	}
	taskID := agenttest.StartTask(t, ctx, in, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Document{Document: []byte(agenttest.AgentDoc)},
		Format: agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML, Input: client.UserText("where is order 42?"),
		A2APeers: &agentplanev1.A2APeerList{Peers: []*agentplanev1.A2APeer{{Name: "shipping", Url: pe.url}}},
		InterruptPolicy: &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Allowlist{Allowlist: &agentplanev1.ToolListPolicy{
			Tools: []string{"something_else"}}}},
	})
	done := agenttest.RunWorker(t, ctx, in, r, 1)
	approved := 0
	agenttest.Watch(t, ctx, in, taskID, func(resp *agentplanev1.WatchTaskResponse) {
		if g := resp.GetEvent().GetToolGated(); g != nil && g.GetReason() != "a2a.always_gated" {
			t.Errorf("gated for %q, want a2a.always_gated", g.GetReason())
		}
		it := agenttest.Approval(resp)
		if it == nil {
			return
		}
		if it.GetApproval().GetToolName() != "a2a__shipping__track" || len(pe.Asked()) != 0 {
			t.Fatalf("approval for %q; peer asked %q before approval", it.GetApproval().GetToolName(), pe.Asked())
		}
		agenttest.Approve(t, ctx, in, it)
		approved++
	})
	if err := <-done; err != nil {
		t.Fatalf("worker: %v", err)
	}
	if task := agenttest.Task(t, ctx, in, taskID); task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || approved != 1 {
		t.Fatalf("task %v %v, %d approvals", task.GetState(), task.GetFailure(), approved)
	}
	if asked := pe.Asked(); len(asked) != 1 || asked[0] != "track:order 42?" {
		t.Errorf("the peer was asked %q, want once", asked)
	}
	reqs := model.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Messages[len(reqs[1].Messages)-1]), "ships tomorrow") {
		t.Errorf("the model did not read the peer's answer")
	}
}
