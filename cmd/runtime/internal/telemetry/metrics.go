// Package telemetry is the reference runtime's observability: Prometheus metrics,
// OpenTelemetry spans following the GenAI semantic conventions, and the attributes
// every log line about a task carries. A nil *T records nothing, so the agent code
// calls it unconditionally.
package telemetry

import (
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// maxModelLabels bounds the distinct model label values: a task names its model, so
// a client could otherwise grow the series without bound. Past it, "other".
const maxModelLabels = 64

// Metrics are the runtime's Prometheus collectors, on a registry of their own.
type Metrics struct {
	Registry *prometheus.Registry

	modelDuration *prometheus.HistogramVec
	tokens        *prometheus.CounterVec
	retries       *prometheus.CounterVec
	refused       *prometheus.CounterVec
	toolDuration  *prometheus.HistogramVec
	gateWait      *prometheus.HistogramVec
	errors        *prometheus.CounterVec
	toolLimits    *prometheus.CounterVec
	running       prometheus.Gauge
	leases        prometheus.Counter

	mu     sync.Mutex
	models map[string]bool
}

// NewMetrics registers the runtime's collectors (and Go's and the process's).
func NewMetrics() *Metrics {
	latency := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		modelDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "agentplane_runtime", Name: "model_call_duration_seconds",
			Help:    "Model calls (one streamed Chat Completion, retries included), by model and outcome (ok, error).",
			Buckets: latency,
		}, []string{"model", "outcome"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "agentplane_runtime", Name: "model_tokens_total",
			Help: "Tokens the model reported, by model and type (input for the prompt, output for the completion).",
		}, []string{"model", "type"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "agentplane_runtime", Name: "model_retries_total",
			Help: "Model requests repeated after a retryable failure, by model and the failed attempt's status (429, 5xx, transport).",
		}, []string{"model", "status"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "agentplane_runtime", Name: "tool_calls_refused_total",
			Help: "Tool calls of the model never handed to the gate, by reason (truncated, invalid_json, not_object, schema_mismatch).",
		}, []string{"reason"}),
		toolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "agentplane_runtime", Name: "tool_call_duration_seconds",
			Help:    "Tool runs, from the gate's answer to the result, by tool kind (http, function, ...) and outcome (ok, error).",
			Buckets: latency,
		}, []string{"kind", "outcome"}),
		gateWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "agentplane_runtime", Name: "gate_wait_seconds",
			Help:    "Time from asking the control plane's gate about a tool call to its answer, a reviewer's wait included, by outcome (allowed, rejected, replayed, suspended, error).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1, 10, 60, 600, 3600},
		}, []string{"outcome"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "agentplane_runtime", Name: "errors_total",
			Help: "Errors, by kind: model (a model call failed), tool (a tool returned an error), gate (the gate call failed), task (a lease's run ended with an error).",
		}, []string{"kind"}),
		toolLimits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "agentplane_runtime", Name: "tool_limits_total",
			Help: "Tool server answers and listings refused or cut for crossing one of the runtime's limits, by kind (mcp, a2a, http) and limit (response_bytes, call_timeout, list_bytes, list_timeout, card_bytes, tool_name, name_clash, schema_bytes, description_bytes, max_tools).",
		}, []string{"kind", "limit"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "agentplane_runtime", Name: "tasks_running",
			Help: "Leased tasks this runtime is running now.",
		}),
		leases: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "agentplane_runtime", Name: "leases_total",
			Help: "Leases this runtime started running.",
		}),
		models: map[string]bool{},
	}
	m.Registry.MustRegister(m.modelDuration, m.tokens, m.retries, m.refused, m.toolDuration, m.gateWait, m.errors, m.toolLimits, m.running, m.leases,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// model is the label value for a model name, bounded by maxModelLabels.
func (m *Metrics) model(name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.models[name] {
		return name
	}
	if len(m.models) >= maxModelLabels {
		return "other"
	}
	m.models[name] = true
	return name
}
