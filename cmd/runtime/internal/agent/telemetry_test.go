package agent

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/metadata"

	"github.com/agentplane/agentplane/client/worker"
	"github.com/agentplane/agentplane/cmd/runtime/internal/fakemodel"
	"github.com/agentplane/agentplane/cmd/runtime/internal/telemetry"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/servertest"
)

// clientTraceparent is the W3C trace context the client starts its task under.
const (
	clientTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID      = "00f067aa0ba902b7"
	clientTraceparent = "00-" + clientTraceID + "-" + clientSpanID + "-01"
)

// TestTelemetrySpansAndMetrics runs a task that calls a tool through the gate, with the
// SDK's in-memory recorder: the runtime's invoke_agent span is a child of the
// traceparent StartTask was called with (carried by the lease), the chat and
// execute_tool spans are its children with the GenAI attributes, the gate span is the
// tool's child; the metrics count the tokens the model reported, the tool run, the
// gate's answer and the lease; every log line about the task names it and its trace.
func TestTelemetrySpansAndMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in := servertest.Start(t, nil)
	model := fakemodel.Start(t,
		fakemodel.Turn{Text: "Refunding.", Calls: []fakemodel.Call{{ID: "call_1", Name: "issue_refund", Arguments: `{"order_id":42}`}}, PromptTokens: 10, CompletionTokens: 7},
		fakemodel.Turn{Text: "Refunded.", PromptTokens: 30, CompletionTokens: 5},
	)
	tool := startTool(t, `{"refunded":true}`)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	metrics := telemetry.NewMetrics()
	var logs testutil.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := &Runner{
		Routes:    []Route{{Pattern: "fake-*", BaseURL: model.URL, MaxRetries: 0}},
		Tools:     []*HTTPTool{{Name: "issue_refund", URL: tool.url}},
		Telemetry: telemetry.New(metrics, tp),
		Logger:    logger,
	}
	taskID := startTask(t, metadata.AppendToOutgoingContext(ctx, "traceparent", clientTraceparent), in, supportAgent, nil)
	w, err := worker.New(in.Client.Runtime, r.Telemetry.Handler(r), worker.Options{RuntimeID: "obs-test", MaxTasks: 1, PollWait: time.Second, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	if err := testutil.Within(t, done, "the worker to run its one task"); err != nil {
		t.Fatalf("worker: %v", err)
	}
	got, err := in.Client.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	if s := got.GetTask().GetState(); s != agentplanev1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("task %v %v", s, got.GetTask().GetFailure())
	}

	spans := rec.Ended()
	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	one := func(name string) sdktrace.ReadOnlySpan {
		t.Helper()
		if len(byName[name]) != 1 {
			t.Fatalf("%d spans named %q; spans: %v", len(byName[name]), name, names(spans))
		}
		return byName[name][0]
	}
	turn := one("invoke_agent support")
	if turn.Parent().TraceID().String() != clientTraceID || turn.Parent().SpanID().String() != clientSpanID || !turn.Parent().IsRemote() {
		t.Errorf("invoke_agent parent %v, want the client's %s", turn.Parent(), clientTraceparent)
	}
	wantAttrs(t, turn, map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support", "agentplane.task.id": taskID})
	chats := byName["chat fake-1"]
	if len(chats) != 2 {
		t.Fatalf("%d chat spans, want 2; spans: %v", len(chats), names(spans))
	}
	for _, c := range chats {
		if c.Parent().SpanID() != turn.SpanContext().SpanID() || c.SpanContext().TraceID().String() != clientTraceID {
			t.Errorf("chat span parent %v, want the invoke_agent span", c.Parent())
		}
	}
	wantAttrs(t, chats[0], map[string]any{
		"gen_ai.operation.name": "chat", "gen_ai.request.model": "fake-1", "gen_ai.response.model": "fake-1",
		"gen_ai.usage.input_tokens": int64(10), "gen_ai.usage.output_tokens": int64(7),
		"gen_ai.response.finish_reasons": []string{"tool_calls"}, "gen_ai.response.id": "chatcmpl-1",
	})
	wantAttrs(t, chats[1], map[string]any{"gen_ai.usage.input_tokens": int64(30), "gen_ai.response.finish_reasons": []string{"stop"}})
	toolSpan := one("execute_tool issue_refund")
	if toolSpan.Parent().SpanID() != turn.SpanContext().SpanID() {
		t.Errorf("execute_tool parent %v, want the invoke_agent span", toolSpan.Parent())
	}
	wantAttrs(t, toolSpan, map[string]any{"gen_ai.tool.name": "issue_refund", "gen_ai.tool.call.id": "call_1", "agentplane.tool.kind": "http"})
	gate := one("agentplane.gate")
	if gate.Parent().SpanID() != toolSpan.SpanContext().SpanID() {
		t.Errorf("gate parent %v, want the execute_tool span", gate.Parent())
	}
	wantAttrs(t, gate, map[string]any{"agentplane.gate.outcome": "allowed"})

	for _, m := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"agentplane_runtime_model_tokens_total", map[string]string{"model": "fake-1", "type": "input"}, 40},
		{"agentplane_runtime_model_tokens_total", map[string]string{"model": "fake-1", "type": "output"}, 12},
		{"agentplane_runtime_model_call_duration_seconds", map[string]string{"model": "fake-1", "outcome": "ok"}, 2},
		{"agentplane_runtime_tool_call_duration_seconds", map[string]string{"kind": "http", "outcome": "ok"}, 1},
		{"agentplane_runtime_gate_wait_seconds", map[string]string{"outcome": "allowed"}, 1},
		{"agentplane_runtime_leases_total", nil, 1},
		{"agentplane_runtime_tasks_running", nil, 0},
	} {
		if got := metricValue(t, metrics, m.name, m.labels); got != m.want {
			t.Errorf("%s%v = %v, want %v", m.name, m.labels, got, m.want)
		}
	}

	// Every line the agent logs about the task names the task, the lease and the trace.
	var agentLines int
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if !strings.Contains(line, "msg=\"model call\"") {
			continue
		}
		agentLines++
		for _, want := range []string{"task_id=" + taskID, "lease_id=", "trace_id=" + clientTraceID} {
			if !strings.Contains(line, want) {
				t.Errorf("log line without %s: %s", want, line)
			}
		}
	}
	if agentLines != 2 {
		t.Errorf("%d model call log lines, want 2:\n%s", agentLines, logs.String())
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[string]any) {
	t.Helper()
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		got[kv.Key] = kv.Value
	}
	for k, w := range want {
		v, ok := got[attribute.Key(k)]
		if !ok {
			t.Errorf("span %s: no attribute %s", s.Name(), k)
			continue
		}
		var g any
		switch ws := w.(type) {
		case string:
			g = v.AsString()
		case int64:
			g = v.AsInt64()
		case []string:
			g = strings.Join(v.AsStringSlice(), ",")
			w = strings.Join(ws, ",")
		}
		if g != w {
			t.Errorf("span %s: %s = %v, want %v", s.Name(), k, g, w)
		}
	}
}

// metricValue is a counter's or gauge's value, or a histogram's sample count.
func metricValue(t *testing.T, m *telemetry.Metrics, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, mt := range f.GetMetric() {
			have := map[string]string{}
			for _, lp := range mt.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			return value(mt)
		}
	}
	return -1
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return -1
}
