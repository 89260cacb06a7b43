package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/runtime/internal/fakemodel"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

// otlpSpan is a span an OTLP receiver got, with the service that sent it.
type otlpSpan struct {
	service string
	*tracepb.Span
}

func (s otlpSpan) traceID() string  { return hex.EncodeToString(s.TraceId) }
func (s otlpSpan) spanID() string   { return hex.EncodeToString(s.SpanId) }
func (s otlpSpan) parentID() string { return hex.EncodeToString(s.ParentSpanId) }

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes the protobuf export
// requests the exporters POST to /v1/traces.
type otlpReceiver struct {
	URL   string
	drop  bool // decode, keep nothing (a bench)
	mu    sync.Mutex
	spans []otlpSpan
}

func startOTLPReceiver(t testing.TB) *otlpReceiver {
	rcv := &otlpReceiver{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want a protobuf POST to /v1/traces", http.StatusNotFound)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rcv.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			if rcv.drop {
				break
			}
			service := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					rcv.spans = append(rcv.spans, otlpSpan{service: service, Span: s})
				}
			}
		}
		rcv.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(hs.Close)
	rcv.URL = hs.URL
	return rcv
}

// find returns the spans of service named name.
func (r *otlpReceiver) find(service, name string) []otlpSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []otlpSpan
	for _, s := range r.spans {
		if s.service == service && s.GetName() == name {
			out = append(out, s)
		}
	}
	return out
}

func (r *otlpReceiver) dump() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, s := range r.spans {
		fmt.Fprintf(&b, "%s %s trace=%s span=%s parent=%s\n", s.service, s.GetName(), s.traceID(), s.spanID(), s.parentID())
	}
	return b.String()
}

func spanAttr(s otlpSpan, key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			if v, ok := kv.GetValue().GetValue().(*commonpb.AnyValue_IntValue); ok {
				return fmt.Sprint(v.IntValue)
			}
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// TestOneTraceAcrossClientControlPlaneAndRuntime runs the runtime's main (run) with
// OTEL_EXPORTER_OTLP_ENDPOINT pointing at an OTLP/HTTP receiver, against a control
// plane whose config points its tracing at the same receiver. A client starts a task
// under its own traceparent. The receiver gets one trace: the control plane's
// StartTask span and the runtime's invoke_agent span are children of the client's
// span; the chat and execute_tool spans are the runtime's children; the control
// plane's CheckToolCall span is a child of the runtime's gate span (the runtime sends
// its trace context on its calls); the HTTP tool is called with the execute_tool
// span's traceparent; an HTTP/JSON call's traceparent header parents its control-plane
// span too. The runtime's /metrics serves the task's figures.
func TestOneTraceAcrossClientControlPlaneAndRuntime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rcv := startOTLPReceiver(t)
	in := servertest.Start(t, func(c *config.Config) { c.Tracing.OTLPEndpoint = rcv.URL })
	model := fakemodel.Start(t,
		fakemodel.Turn{Text: "Refunding.", Calls: []fakemodel.Call{{ID: "call_1", Name: "issue_refund", Arguments: `{"order_id":42}`}}, PromptTokens: 11, CompletionTokens: 3},
		fakemodel.Turn{Text: "Refunded.", PromptTokens: 20, CompletionTokens: 4},
	)
	toolTraceparent := make(chan string, 1)
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case toolTraceparent <- r.Header.Get("traceparent"):
		default:
		}
		io.WriteString(w, `{"ok":true}`)
	}))
	defer tool.Close()
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "runtime.yaml")
	cfg := fmt.Sprintf(`control_plane: {address: %q}
concurrency: 1
metrics_addr: 127.0.0.1:0
models:
  - {match: "fake-*", base_url: %q, max_retries: 0}
tools:
  - {name: issue_refund, url: %q}
`, in.GRPCAddr, model.URL, tool.URL)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	var logs testutil.SyncBuffer
	rctx, stopRuntime := context.WithCancel(ctx)
	defer stopRuntime()
	ran := make(chan error, 1)
	go func() { ran <- run(rctx, []string{"-config", cfgFile, "-runtime-id", "traced"}, &logs, lookup) }()

	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	resp, err := in.Client.Tasks.StartTask(metadata.AppendToOutgoingContext(ctx, "traceparent", "00-"+traceID+"-"+parentID+"-01"), &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Document{Document: []byte("apiVersion: qar/v1\nkind: AgentSpec\nname: support\ninstructions: Help.\nmodel: fake-1\n")},
		Format: agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML, Input: client.UserText("refund order 42"),
	})
	if err != nil {
		t.Fatal(err)
	}
	taskID := resp.GetTask().GetTaskId()
	stream, err := in.Client.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := stream.Recv(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("watch: %v; runtime log:\n%s", err, logs.String())
		}
	}

	// The runtime's metrics, scraped as Prometheus would.
	addr := regexp.MustCompile(`msg="serving metrics" addr=(\S+)`).FindStringSubmatch(logs.String())
	if addr == nil {
		t.Fatalf("no metrics address in the runtime's log:\n%s", logs.String())
	}
	mresp, err := http.Get("http://" + addr[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for _, want := range []string{
		`agentplane_runtime_model_tokens_total{model="fake-1",type="input"} 31`,
		`agentplane_runtime_model_tokens_total{model="fake-1",type="output"} 7`,
		`agentplane_runtime_tool_call_duration_seconds_count{kind="http",outcome="ok"} 1`,
		`agentplane_runtime_gate_wait_seconds_count{outcome="allowed"} 1`,
		`agentplane_runtime_leases_total 1`,
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// An HTTP/JSON call carries its traceparent header into the control plane's span too.
	const httpParent = "c0ffee0123456789"
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+in.HTTPAddr+"/v1/tasks/"+taskID, nil)
	hreq.Header.Set("traceparent", "00-"+traceID+"-"+httpParent+"-01")
	hresp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	hresp.Body.Close()
	if hresp.StatusCode != http.StatusOK {
		t.Fatalf("GET task over HTTP: %s", hresp.Status)
	}

	// Stopping flushes the spans: the runtime's on return, the control plane's on Stop.
	stopRuntime()
	if err := testutil.Within(t, ran, "the runtime to stop"); err != nil {
		t.Fatalf("run: %v", err)
	}
	in.Stop(t)

	one := func(service, name string) otlpSpan {
		t.Helper()
		var inTrace []otlpSpan
		for _, s := range rcv.find(service, name) {
			if s.traceID() == traceID {
				inTrace = append(inTrace, s)
			}
		}
		if len(inTrace) != 1 {
			t.Fatalf("%d %s spans %q in trace %s; received:\n%s", len(inTrace), service, name, traceID, rcv.dump())
		}
		return inTrace[0]
	}
	start := one("agentplane-controlplane", "agentplane.v1.TaskService/StartTask")
	if start.parentID() != parentID || start.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("StartTask span parent %s kind %v, want the client's %s, server", start.parentID(), start.GetKind(), parentID)
	}
	turn := one("agentplane-runtime", "invoke_agent support")
	if turn.parentID() != parentID {
		t.Errorf("invoke_agent parent %s, want the client's span %s", turn.parentID(), parentID)
	}
	if got := spanAttr(turn, "agentplane.task.id"); got != taskID {
		t.Errorf("invoke_agent agentplane.task.id %q, want %s", got, taskID)
	}
	var chats []otlpSpan
	for _, s := range rcv.find("agentplane-runtime", "chat fake-1") {
		if s.parentID() == turn.spanID() {
			chats = append(chats, s)
		}
	}
	if len(chats) != 2 {
		t.Fatalf("%d chat spans under invoke_agent, want 2; received:\n%s", len(chats), rcv.dump())
	}
	if got := spanAttr(chats[0], "gen_ai.usage.input_tokens"); got != "11" {
		t.Errorf("first chat gen_ai.usage.input_tokens %q, want 11", got)
	}
	toolSpan := one("agentplane-runtime", "execute_tool issue_refund")
	if toolSpan.parentID() != turn.spanID() {
		t.Errorf("execute_tool parent %s, want invoke_agent %s", toolSpan.parentID(), turn.spanID())
	}
	// The HTTP tool was called under the execute_tool span.
	if got, want := testutil.Within(t, toolTraceparent, "the tool's request"), "00-"+traceID+"-"+toolSpan.spanID()+"-01"; got != want {
		t.Errorf("the HTTP tool got traceparent %q, want %q (execute_tool)", got, want)
	}
	gate := one("agentplane-runtime", "agentplane.gate")
	check := one("agentplane-controlplane", "agentplane.v1.RuntimeService/CheckToolCall")
	if gate.parentID() != toolSpan.spanID() || check.parentID() != gate.spanID() {
		t.Errorf("gate parent %s (want execute_tool %s), CheckToolCall parent %s (want gate %s)", gate.parentID(), toolSpan.spanID(), check.parentID(), gate.spanID())
	}
	if get := one("agentplane-controlplane", "agentplane.v1.TaskService/GetTask"); get.parentID() != httpParent || spanAttr(get, "rpc.grpc.status_code") != "0" {
		t.Errorf("GetTask over HTTP: parent %s status %s, want %s, 0", get.parentID(), spanAttr(get, "rpc.grpc.status_code"), httpParent)
	}
}
