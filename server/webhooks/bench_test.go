package webhooks_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/webhooks/webhookstest"
)

// BenchmarkEnqueueAndDeliver: b.N tasks ended (each an enqueue in the task's own
// transaction, on bbolt), then every notification delivered, signed, to a loopback
// receiver; reports notifications per second end to end.
func BenchmarkEnqueueAndDeliver(b *testing.B) {
	secret := secretOf(9)
	recv := webhookstest.New(b, secret)
	cfg := fastConfig(config.Webhook{Name: "ops", URL: recv.URL, Secret: secret, Events: []string{config.EventTaskEnded}})
	f := open(b, cfg, prometheus.NewRegistry())
	f.svc.Start()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		f.endTask(b, "default", fmt.Sprintf("t%d", i))
	}
	recv.WaitFor(b, 10*time.Minute, "every notification", func(ds []webhookstest.Delivery) bool { return len(ds) >= b.N })
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "notifications/s")
}
