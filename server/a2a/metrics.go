package a2a

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests *prometheus.CounterVec
	streams  prometheus.Gauge
	refused  prometheus.Counter
	retries  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "agentplane", Name: "a2a_requests_total",
			Help: "A2A calls answered, by binding (jsonrpc, rest, card), method (the A2A 1.0 name) and outcome (ok or the A2A error reason)."},
			[]string{"binding", "method", "outcome"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "agentplane", Name: "a2a_open_streams",
			Help: "A2A server-sent-event streams open (SendStreamingMessage, SubscribeToTask)."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "agentplane", Name: "a2a_streams_refused_total",
			Help: "A2A streams refused because a2a.max_streams were open."}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "agentplane", Name: "a2a_send_retries_total",
			Help: "SendMessage calls that named a messageId already seen and so started nothing new."}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.streams, m.refused, m.retries} {
			if err := reg.Register(c); err != nil {
				var are prometheus.AlreadyRegisteredError
				if !errors.As(err, &are) {
					return nil, err
				}
			}
		}
	}
	return m, nil
}
