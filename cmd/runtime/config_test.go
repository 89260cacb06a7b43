package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/runtime/internal/a2atool"
	"github.com/agentplane/agentplane/cmd/runtime/internal/agenttest"
	"github.com/agentplane/agentplane/cmd/runtime/internal/fakemodel"
	"github.com/agentplane/agentplane/cmd/runtime/internal/mcptool"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
)

func TestConfigFileEnvAndRoutes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rt.yaml")
	doc := `control_plane: {address: 10.0.0.1:1}
concurrency: 2
models:
  - {match: "gpt-*", base_url: "http://127.0.0.1:1/v1", api_key_env: KEY_A, timeout: 5s, max_retries: 1}
  - {match: "*", base_url: "http://127.0.0.1:2/v1"}
tools:
  - {name: t1, url: "http://127.0.0.1:3/"}
mcp: {connect_timeout: 3s, call_timeout: 20s, max_result_bytes: 1000, max_tools: 10, max_list_bytes: 5000, max_description_bytes: 100, max_schema_bytes: 200}
a2a: {card_timeout: 4s, call_timeout: 30s, max_result_bytes: 2000}
`
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"AGENTPLANE_ADDR": "127.0.0.1:9", "KEY_A": "sk-a"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg.ApplyEnv(lookup)
	if cfg.ControlPlane.Address != "127.0.0.1:9" || cfg.Concurrency != 2 {
		t.Errorf("config %+v", cfg)
	}
	r, err := cfg.Runner(lookup)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Routes) != 2 || r.Routes[0].APIKey != "sk-a" || r.Routes[0].Timeout != 5*time.Second || r.Routes[0].MaxRetries != 1 || r.Routes[1].MaxRetries != 3 {
		t.Errorf("routes %+v", r.Routes)
	}
	if len(r.Tools) != 1 || r.Tools[0].Parameters["type"] != "object" {
		t.Errorf("tools %+v", r.Tools)
	}
	if len(r.Providers) != 2 {
		t.Fatalf("%d tool providers, want MCP and A2A", len(r.Providers))
	}
	if m, ok := r.Providers[0].(*mcptool.Provider); !ok || *m != (mcptool.Provider{ConnectTimeout: 3 * time.Second, CallTimeout: 20 * time.Second, MaxResultBytes: 1000, MaxTools: 10,
		MaxListBytes: 5000, MaxDescriptionBytes: 100, MaxSchemaBytes: 200}) {
		t.Errorf("MCP provider %+v", r.Providers[0])
	}
	if a, ok := r.Providers[1].(*a2atool.Provider); !ok || *a != (a2atool.Provider{CardTimeout: 4 * time.Second, CallTimeout: 30 * time.Second, MaxResultBytes: 2000}) {
		t.Errorf("A2A provider %+v", r.Providers[1])
	}

	delete(env, "KEY_A")
	if _, err := cfg.Runner(lookup); err == nil || !strings.Contains(err.Error(), "KEY_A") {
		t.Errorf("a missing API key variable: %v", err)
	}
	if err := os.WriteFile(file, []byte("modelz: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(file); err == nil {
		t.Error("an unknown key was accepted")
	}
}

// The example config the README points at loads and builds a runner that does what
// its comment says: every model to OPENAI_BASE_URL (default OpenAI's) with
// OPENAI_API_KEY.
func TestExampleConfigLoads(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("..", "..", "examples", "agent-runtime", "runtime.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env          map[string]string
		base, key    string
		wantErrNamed string
	}{
		{env: map[string]string{"OPENAI_API_KEY": "sk-test"}, base: "https://api.openai.com/v1", key: "sk-test"},
		{env: map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}, base: "http://127.0.0.1:11434/v1"},
		{env: map[string]string{"OPENAI_BASE_URL": "127.0.0.1:11434"}, wantErrNamed: "OPENAI_BASE_URL"},
	} {
		lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
		r, err := cfg.Runner(lookup)
		if tc.wantErrNamed != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrNamed) {
				t.Errorf("env %v: error %v, want one naming %s", tc.env, err, tc.wantErrNamed)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Routes) != 1 || r.Routes[0].Pattern != "*" || r.Routes[0].BaseURL != tc.base || r.Routes[0].APIKey != tc.key {
			t.Errorf("env %v: routes %+v", tc.env, r.Routes)
		}
	}
}

// TestNoModelsTableCallsOpenAIBaseURL: without a models table the runtime calls the
// endpoint in OPENAI_BASE_URL with the key in OPENAI_API_KEY, as OpenAI's SDKs do.
func TestNoModelsTableCallsOpenAIBaseURL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in := servertest.Start(t, nil)
	model := fakemodel.Start(t, fakemodel.Turn{Text: "hello"})
	cfg := DefaultConfig()
	env := map[string]string{"OPENAI_BASE_URL": model.URL, "OPENAI_API_KEY": "sk-env"}
	r, err := cfg.Runner(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	r.Logger = agenttest.Quiet
	taskID := agenttest.StartTask(t, ctx, in, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Document{Document: []byte(agenttest.AgentDoc)},
		Format: agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML, Input: client.UserText("hi"),
	})
	done := agenttest.RunWorker(t, ctx, in, r, 1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if task := agenttest.Task(t, ctx, in, taskID); task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("task %v %v", task.GetState(), task.GetFailure())
	}
	if reqs := model.Requests(); len(reqs) != 1 || reqs[0].Auth != "Bearer sk-env" {
		t.Fatalf("the endpoint in OPENAI_BASE_URL got %d requests (%+v)", len(reqs), reqs)
	}
}

// The metrics address and the tracing block are checked before anything starts.
func TestConfigObservability(t *testing.T) {
	for _, tc := range []struct {
		name, doc, env, wantErr string
	}{
		{name: "both set", doc: "metrics_addr: 127.0.0.1:9464\ntracing: {otlp_endpoint: http://127.0.0.1:4318, protocol: grpc}\n"},
		{name: "metrics off", doc: "metrics_addr: \"off\"\n"},
		{name: "metrics from env", env: "127.0.0.1:9465"},
		{name: "bad metrics address", doc: "metrics_addr: 9464\n", wantErr: "metrics_addr"},
		{name: "bad metrics address from env", env: "nohost", wantErr: "metrics_addr"},
		{name: "bad protocol", doc: "tracing: {otlp_endpoint: http://127.0.0.1:4318, protocol: zipkin}\n", wantErr: "tracing.protocol"},
		{name: "bad endpoint", doc: "tracing: {otlp_endpoint: \"127.0.0.1:4318\"}\n", wantErr: "tracing.otlp_endpoint"},
		{name: "unknown tracing key", doc: "tracing: {endpoint: http://x}\n", wantErr: "endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "rt.yaml")
			doc := tc.doc + "models:\n  - {match: \"*\", base_url: \"http://127.0.0.1:2/v1\"}\n"
			if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			lookup := func(k string) (string, bool) {
				return tc.env, k == "AGENTPLANE_RUNTIME_METRICS_ADDR" && tc.env != ""
			}
			cfg, err := LoadConfig(file)
			if err == nil {
				cfg.ApplyEnv(lookup)
				_, err = cfg.Runner(lookup)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
			}
			if tc.env != "" && tc.wantErr == "" && cfg.MetricsAddr != tc.env {
				t.Errorf("metrics_addr %q, want %q from the environment", cfg.MetricsAddr, tc.env)
			}
		})
	}
}
