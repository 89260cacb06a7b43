package server

import (
	"time"

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
	// flow counts flow-control outcomes (docs/api.md#flow-control); queueWait is how
	// long leased tasks waited in their queue.
	flow      *prometheus.CounterVec
	queueWait *prometheus.HistogramVec
}

func (m *metrics) countFlow(queue, what string) { m.flow.WithLabelValues(queue, what).Inc() }

func (m *metrics) observeQueueWait(queue string, wait time.Duration) {
	m.queueWait.WithLabelValues(queue).Observe(wait.Seconds())
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
		flow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "agentplane", Name: "flow_limited_total",
			Help: "Flow control at work, by queue and outcome: start_rate_limited (a StartTask refused with FLOW_RATE_LIMITED), concurrency_full (a queued task passed over by a lease because its key's slots are taken), lease_rate_limited (passed over because its lease bucket is empty).",
		}, []string{"queue", "outcome"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "agentplane", Name: "lease_queue_wait_seconds",
			Help:    "How long each leased task waited in its run queue since it was last queued, by queue.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600},
		}, []string{"queue"}),
	}
	m.registry.MustRegister(m.requests, m.latency, m.inflight, m.streams, m.httpRefused, m.httpGuarded, m.flow, m.queueWait,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
