package approvals

import (
	"github.com/agentplane/agentplane/server/store/boltstore"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// BenchmarkGateRoundTrip measures, over a real store in the server's default mode (the
// write-ahead log, fsynced on every commit), what the goal is about without
// the gRPC hop: a gated call's CheckToolCall,
// plus the time from a reviewer's ResolveInterrupt to the waiting runtime holding the
// decision. The time the reviewer takes is excluded, and so is the report of the
// call that follows (a runtime reports every call it runs, which spends the
// decision). p50 and p99 are reported.
func BenchmarkGateRoundTrip(b *testing.B) {
	e := newEnvStore(b, testConfig(), boltstore.Options{WAL: true})
	ref := e.startAndLease(b, tenant)
	a := args(b, map[string]any{"path": "/tmp/report.csv", "data": "x"})
	var samples, checks, delivers []time.Duration
	i := 0
	for b.Loop() {
		i++
		start := time.Now()
		resp, err := e.svc.CheckToolCall(ctx, checkReq(ref, "call-"+strconv.Itoa(i), "fs.write", a))
		if err != nil {
			b.Fatal(err)
		}
		check := time.Since(start)
		id := resp.GetInterrupt().GetInterruptId()
		got := make(chan *agentplanev1.Decision, 1)
		go func() {
			d, err := awaitDecision(e.svc, ctx, ref, id)
			if err != nil {
				b.Error(err)
			}
			got <- d
		}()
		for e.svc.waiters.count() == 0 { // the runtime is waiting; the reviewer's time starts
			runtime.Gosched()
		}
		resolve := time.Now()
		if _, err := e.svc.ResolveInterrupt(ctx, tenant, "alice", approve(id)); err != nil {
			b.Fatal(err)
		}
		if d := <-got; d == nil {
			b.Fatal("no decision")
		}
		deliver := time.Since(resolve)
		samples = append(samples, check+deliver)
		checks = append(checks, check)
		delivers = append(delivers, deliver)
		for e.svc.waiters.count() != 0 {
			runtime.Gosched()
		}
		// The runtime runs the call and reports it, spending the decision (untimed).
		if err := e.report(ref, "call-"+strconv.Itoa(i), "fs.write", a); err != nil {
			b.Fatal(err)
		}
	}
	pct := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[min(len(d)-1, int(p*float64(len(d))))].Microseconds())
	}
	b.ReportMetric(pct(samples, 0.50), "p50-µs")
	b.ReportMetric(pct(samples, 0.99), "p99-µs")
	// The two halves: the gate's commit, and the decision's commit to delivery.
	b.ReportMetric(pct(checks, 0.50), "check-p50-µs")
	b.ReportMetric(pct(delivers, 0.50), "deliver-p50-µs")
}
