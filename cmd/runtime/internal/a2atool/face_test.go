package a2atool

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client/worker"
	"github.com/agentplane/agentplane/client/worker/script"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

// faceScript is the agentplane agent behind the face: it works for longer than the
// face blocks a SendMessage (a2a.blocking_timeout), so that the caller must poll.
const faceScript = `
steps:
  - say: "Looking."
  - sleep: 1500ms
  - complete: {text: "Order 42 ships tomorrow ({{input}}).", structured: {order: 42}}
`

// startFace starts a control plane serving the static agent "shipping" on its A2A
// face, with a scripted runtime for it, and a proxy in front of the face on the same
// host: it records each JSON-RPC call's A2A-Version and method, and, when legacy is
// set, serves the card without its 1.0 fields (a 0.3 agent's card). It returns the
// peer URL (the proxy's /a2a/shipping) and the calls seen.
func startFace(t *testing.T, legacy bool) (string, func() []string) {
	t.Helper()
	dir := t.TempDir()
	spec := filepath.Join(dir, "shipping.yaml")
	if err := os.WriteFile(spec, []byte("apiVersion: qar/v1\nkind: AgentSpec\nname: shipping\ninstructions: Track parcels.\nmodel: gpt-4o\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in := servertest.Start(t, func(c *config.Config) {
		c.Spec.StaticAgents = map[string]string{"shipping": spec}
		c.A2A.Agents = map[string]config.A2AAgent{"shipping": {Description: "Knows where parcels are.", Queue: "shipping"}}
		c.A2A.BlockingTimeout = config.Duration(300 * time.Millisecond)
	})
	s, err := script.Parse("face.yaml", []byte(faceScript))
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(in.Client.Runtime, &script.Runner{Script: s}, worker.Options{RuntimeID: "face-rt", Queues: []string{"shipping"}, PollWait: time.Second, Capacity: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	target, _ := url.Parse("http://" + in.HTTPAddr)
	rp := httputil.NewSingleHostReverseProxy(target)
	var (
		mu    sync.Mutex
		calls []string
	)
	rp.ModifyResponse = func(resp *http.Response) error {
		if !legacy || !strings.HasSuffix(resp.Request.URL.Path, "/agent-card.json") {
			return nil
		}
		var card map[string]any
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if err := json.Unmarshal(b, &card); err != nil {
			return err
		}
		delete(card, "supportedInterfaces")
		b, _ = json.Marshal(card)
		resp.Body = io.NopCloser(strings.NewReader(string(b)))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		resp.Header.Del("ETag")
		return nil
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			var req struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(b, &req)
			mu.Lock()
			calls = append(calls, r.Header.Get("A2A-Version")+" "+req.Method)
			mu.Unlock()
			r.Body = io.NopCloser(strings.NewReader(string(b)))
			r.ContentLength = int64(len(b))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL + "/a2a/shipping", func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), calls...)
	}
}

// TestAgentplanePeer: agentplane calling agentplane. Against its own A2A face the
// runtime reads the card, calls the agent with v1.0's SendMessage, polls GetTask
// while the task still works after the face stopped blocking, and reads the output
// artifacts; against the same face with a 0.3 card it uses 0.3's message/send and
// tasks/get.
func TestAgentplanePeer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		legacy     bool
		send, poll string
	}{
		{"v1.0", false, "1.0 SendMessage", "1.0 GetTask"},
		{"v0.3", true, " message/send", " tasks/get"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			peerURL, calls := startFace(t, tc.legacy)
			tools, release, err := (&Provider{}).MountPeers(ctx, []*agentplanev1.A2APeer{{Name: "shipping", Url: peerURL}}, quiet, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			if len(tools) != 1 || tools[0].GateName != "a2a__shipping__shipping" {
				t.Fatalf("mounted %d tools", len(tools))
			}
			got, isErr := tools[0].Run(ctx, `{"message":"where is order 42?"}`)
			if isErr || !strings.Contains(got, "Order 42 ships tomorrow (where is order 42?).") || !strings.Contains(got, `{"order":42}`) {
				t.Fatalf("the call answered %q (error %v)", got, isErr)
			}
			c := calls()
			if len(c) < 2 || c[0] != tc.send || c[1] != tc.poll {
				t.Fatalf("calls %q, want %q then %q", c, tc.send, tc.poll)
			}
			for _, call := range c[1:] {
				if call != tc.poll {
					t.Errorf("calls %q, want %q then only %q", c, tc.send, tc.poll)
				}
			}
		})
	}
}
