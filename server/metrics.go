package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the server's Prometheus collectors, on a registry of its own so that two
// servers in one process (tests) never collide.
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	inflight *prometheus.GaugeVec
	streams  prometheus.Gauge
	// httpRefused counts HTTP requests the gateway answered before any method ran.
	httpRefused *prometheus.CounterVec
	// httpGuarded counts HTTP requests the guard refused before any handler (httpguard.go).
	httpGuarded *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "agentplane", Name: "grpc_requests_total",
			Help: "gRPC calls handled, by full method and status code.",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "agentplane", Name: "grpc_request_duration_seconds",
			Help:    "Latency of unary gRPC calls, by full method.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"method"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "agentplane", Name: "grpc_inflight_requests",
			Help: "gRPC calls in progress, by full method.",
		}, []string{"method"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "agentplane", Name: "grpc_open_streams",
			Help: "Server streams currently open (WatchTask, AwaitDecision, Backup).",
		}),
		httpRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "agentplane", Name: "http_refused_total",
			Help: "HTTP requests the gateway refused before any gRPC method ran (a malformed body or path, a body over the size limit, an unknown route), by status code and reason.",
		}, []string{"code", "reason"}),
		httpGuarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "agentplane", Name: "http_guard_refused_total",
			Help: "HTTP requests refused before any handler ran because they look like a web page's: a Host not served (DNS rebinding), a write from another origin, a body that is not JSON (or a form, for the console), by reason.",
		}, []string{"reason"}),
	}
	m.registry.MustRegister(m.requests, m.latency, m.inflight, m.streams, m.httpRefused, m.httpGuarded,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
