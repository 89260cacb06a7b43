package tasks

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/store/boltstore"
)

// Benchmarks of lease-time fairness (docs/api.md#flow-control) on the server's
// default store (bbolt with the write-ahead log), every lease and completion durable:
//
//	go test -run '^$' -bench 'Starvation' -benchtime 1x ./server/tasks/
//	go test -run '^$' -bench 'LeaseFairness' -benchtime 4000x -count 3 ./server/tasks/
//
// The KeyStarvation and LeaseFairness/keys= benchmarks are the same between the
// customers (label customer) of one tenant, with flow.queues.default.fairness on or
// off (-count 3 interleaves the two).

// customerKey is the benchmarks' fairness key.
const customerKey = `"customer" in labels ? labels["customer"] : ""`

func fairManager(b *testing.B, mode string) *Manager {
	b.Helper()
	return keyFairManager(b, mode, false)
}

// keyFairManager is fairManager with fair share between the customers of a tenant's
// default queue when keys is set.
func keyFairManager(b *testing.B, mode string, keys bool) *Manager {
	b.Helper()
	st, err := boltstore.Open(filepath.Join(b.TempDir(), "bench.db"), boltstore.Options{WAL: true})
	if err != nil {
		b.Fatal(err)
	}
	cfg := testConfig()
	cfg.LeaseTTL = time.Hour
	cfg.Flow.Fairness.Mode = mode
	if keys {
		cfg.Flow.Queues = map[string]config.QueueFlow{"default": {Fairness: &config.KeyFairness{Key: customerKey}}}
	}
	m, err := New(Options{Store: st, Config: cfg})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Stop(); _ = st.Close() })
	return m
}

// fill starts n tasks of tenant, from 8 clients.
func fill(b *testing.B, m *Manager, tenant string, n int) {
	b.Helper()
	fillCustomer(b, m, tenant, "", n)
}

// fillCustomer is fill with the label customer set (when not "").
func fillCustomer(b *testing.B, m *Manager, tenant, customer string, n int) {
	b.Helper()
	p := params(tenant)
	if customer != "" {
		p.Labels = map[string]string{"customer": customer}
	}
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 8 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if _, _, err := m.Start(ctx, p); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// work runs runtimes that lease one task at a time and complete it, until stop says
// so; seen is told of each lease.
func work(b *testing.B, m *Manager, runtimes int, stop func() bool, seen func(*agentplanev1.Lease)) {
	var wg sync.WaitGroup
	for i := range runtimes {
		wg.Go(func() {
			for !stop() {
				ls, err := m.LeaseTasks(ctx, LeaseRequest{RuntimeID: fmt.Sprint("rt", i), MaxTasks: 1, Wait: 50 * time.Millisecond})
				if err != nil {
					b.Error(err)
					return
				}
				for _, l := range ls {
					seen(l)
					if _, err := m.Complete(ctx, ref(l), Request{}, &agentplanev1.TaskOutput{}); err != nil {
						b.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkStarvation: a flooding tenant queues 10,000 tasks, then a light tenant
// queues 10; four runtimes lease and complete one at a time. It reports the light
// tenant's lease wait (from its StartTask returning to its lease) p50 and p99, and
// how many leases went out before its last task's.
func BenchmarkStarvation(b *testing.B) {
	for _, mode := range []string{config.FairFIFO, config.FairRoundRobin, config.FairWeighted} {
		b.Run("fairness="+mode, func(b *testing.B) {
			for range b.N {
				starvation(b, fairManager(b, mode), func(light bool) StartParams {
					if light {
						return params("light")
					}
					return params("flood")
				})
			}
		})
	}
}

// BenchmarkKeyStarvation is BenchmarkStarvation between two customers of one
// tenant, with fair share between keys off and on.
func BenchmarkKeyStarvation(b *testing.B) {
	for _, keys := range []bool{false, true} {
		b.Run(fmt.Sprintf("keys=%v", keys), func(b *testing.B) {
			for range b.N {
				starvation(b, keyFairManager(b, config.FairRoundRobin, keys), func(light bool) StartParams {
					return labeled("acme", map[string]string{"customer": map[bool]string{true: "light", false: "flood"}[light]})
				})
			}
		})
	}
}

// starvation queues 10,000 tasks of who(false), then 10 of who(true), and reports
// the light ones' lease wait.
func starvation(b *testing.B, m *Manager, who func(light bool) StartParams) {
	flood := who(false)
	fillCustomer(b, m, flood.Tenant, flood.Labels["customer"], 10_000)
	started := map[string]time.Time{}
	for range 10 {
		task, _, err := m.Start(ctx, who(true))
		if err != nil {
			b.Fatal(err)
		}
		started[task.GetTaskId()] = time.Now()
	}
	var mu sync.Mutex
	var waits []time.Duration
	leases, lastLight := 0, 0
	b.ResetTimer()
	work(b, m, 4, func() bool { mu.Lock(); defer mu.Unlock(); return len(waits) == 10 }, func(l *agentplanev1.Lease) {
		mu.Lock()
		defer mu.Unlock()
		leases++
		if t, ok := started[l.GetTask().GetTaskId()]; ok {
			waits = append(waits, time.Since(t))
			lastLight = leases
		}
	})
	b.StopTimer()
	slices.Sort(waits)
	b.ReportMetric(float64(waits[len(waits)/2].Microseconds())/1000, "light-p50-ms")
	b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds())/1000, "light-p99-ms")
	b.ReportMetric(float64(lastLight), "leases-before-last-light")
}

// BenchmarkLeaseFairness: lease throughput under each fairness mode, with b.N tasks
// queued by ten tenants (one of them holding half), leased and completed by four
// runtimes one at a time.
func BenchmarkLeaseFairness(b *testing.B) {
	for _, mode := range []string{config.FairFIFO, config.FairRoundRobin, config.FairWeighted} {
		b.Run("fairness="+mode, func(b *testing.B) {
			m := fairManager(b, mode)
			fill(b, m, "t0", b.N/2)
			for i := 1; i < 10; i++ {
				fill(b, m, fmt.Sprint("t", i), (b.N-b.N/2)/9)
			}
			total := b.N/2 + 9*((b.N-b.N/2)/9)
			var done atomic.Int64
			b.ResetTimer()
			work(b, m, 4, func() bool { return done.Load() >= int64(total) }, func(*agentplanev1.Lease) { done.Add(1) })
			b.StopTimer()
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "leases/s")
		})
	}
	// Between the customers of one tenant: ten customers, one holding half, with fair
	// share between keys off and on; starts/s is the fill's, which pays for the tags.
	for _, keys := range []bool{false, true} {
		b.Run(fmt.Sprintf("keys=%v", keys), func(b *testing.B) {
			m := keyFairManager(b, config.FairRoundRobin, keys)
			began := time.Now()
			fillCustomer(b, m, "acme", "c0", b.N/2)
			for i := 1; i < 10; i++ {
				fillCustomer(b, m, "acme", fmt.Sprint("c", i), (b.N-b.N/2)/9)
			}
			total := b.N/2 + 9*((b.N-b.N/2)/9)
			startRate := float64(total) / time.Since(began).Seconds()
			var done atomic.Int64
			b.ResetTimer()
			work(b, m, 4, func() bool { return done.Load() >= int64(total) }, func(*agentplanev1.Lease) { done.Add(1) })
			b.StopTimer()
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "leases/s")
			b.ReportMetric(startRate, "starts/s")
		})
	}
}
