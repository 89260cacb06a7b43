package tasks

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/budget"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/store/boltstore"
)

// Benchmarks of the task domain on a real store in the server's default mode (the
// write-ahead log), every operation durable before it returns. They report ops/s and p50/p99 latency per operation:
//
//	go test -run '^$' -bench . -benchtime 3000x ./server/tasks/

func benchManager(b *testing.B) *Manager {
	b.Helper()
	st, err := boltstore.Open(filepath.Join(b.TempDir(), "bench.db"), boltstore.Options{WAL: true}) // the server's default
	if err != nil {
		b.Fatal(err)
	}
	cfg := testConfig()
	cfg.LeaseTTL = time.Hour
	cfg.MaxTaskEvents = 1 << 40
	cfg.MaxTaskHistoryBytes = 1 << 50
	m, err := New(Options{Store: st, Config: cfg})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return m
}

type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) time(f func() error) error {
	start := time.Now()
	err := f()
	d := time.Since(start)
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
	return err
}

func (l *latencies) report(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	sort.Slice(l.d, func(i, j int) bool { return l.d[i] < l.d[j] })
	if len(l.d) > 0 {
		b.ReportMetric(float64(l.d[len(l.d)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(l.d[len(l.d)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// run calls op b.N times from clients goroutines; op gets the client's index.
func run(b *testing.B, m *Manager, clients int, op func(client int) error) {
	var lat latencies
	var next atomic.Int64
	var wg sync.WaitGroup
	before, err := m.store.Stats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for c := range clients {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := lat.time(func() error { return op(c) }); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	lat.report(b)
	if after, err := m.store.Stats(ctx); err == nil && after.Commits > before.Commits {
		b.ReportMetric(float64(after.Updates-before.Updates)/float64(after.Commits-before.Commits), "updates/commit")
	}
}

func BenchmarkStart(b *testing.B) {
	for _, clients := range []int{1, 64} {
		b.Run("clients="+strconv.Itoa(clients), func(b *testing.B) {
			m := benchManager(b)
			var n atomic.Int64
			run(b, m, clients, func(int) error {
				p := params("default")
				p.RequestID = fmt.Sprint("req-", n.Add(1))
				_, _, err := m.Start(ctx, p)
				return err
			})
		})
	}
}

func BenchmarkReportEvents(b *testing.B) {
	for _, clients := range []int{1, 64} {
		b.Run("clients="+strconv.Itoa(clients), func(b *testing.B) {
			m := benchManager(b)
			for range clients {
				if _, _, err := m.Start(ctx, params("default")); err != nil {
					b.Fatal(err)
				}
			}
			leases, err := m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "bench", MaxTasks: clients})
			if err != nil || len(leases) != clients {
				b.Fatalf("leased %d of %d: %v", len(leases), clients, err)
			}
			events := []*agentplanev1.RuntimeEvent{note("a tool said something of moderate length, as runtimes do")}
			run(b, m, clients, func(c int) error {
				_, err := m.ReportEvents(ctx, ref(leases[c]), Request{}, events)
				return err
			})
		})
	}
}

// BenchmarkListLargeSpecs lists 500 tasks whose specs are 1 MB each (page_size 500)
// in each view, with the default 2 MiB byte cap, and reports the encoded page
// (resp-bytes), the tasks on it, and what one listing allocates (alloc-MB/op):
//
//	go test -run '^$' -bench ListLargeSpecs -benchtime 5x ./server/tasks/
func BenchmarkListLargeSpecs(b *testing.B) {
	const tasks, specBytes = 500, 1_000_000
	m := benchManager(b)
	m.cfg.MaxListResponseBytes = 2 << 20 // the deployment default
	for range tasks {
		if _, _, err := m.Start(ctx, bigAgentParams("default", specBytes)); err != nil {
			b.Fatal(err)
		}
	}
	for _, view := range []View{ViewBasic, ViewFull} {
		b.Run(strings.ToLower(strings.TrimPrefix(view.String(), "TASK_VIEW_")), func(b *testing.B) {
			var size, n int
			b.ReportAllocs()
			for b.Loop() {
				list, _, err := m.List(ctx, "default", ListQuery{PageSize: tasks, View: view})
				if err != nil {
					b.Fatal(err)
				}
				size, n = proto.Size(&agentplanev1.ListTasksResponse{Tasks: list}), len(list)
			}
			b.ReportMetric(float64(size), "resp-bytes")
			b.ReportMetric(float64(n), "tasks/page")
		})
	}
}

// BenchmarkReportUsage reports assistant messages with usage, without budgets and with
// two budgets every message counts against (what exact counting costs per report):
//
//	go test -run '^$' -bench ReportUsage ./server/tasks/
func BenchmarkReportUsage(b *testing.B) {
	withBudgets, err := budget.New(config.Budgets{
		Prices: map[string]config.Price{"*": {InputUSDPerMillion: "1", OutputUSDPerMillion: "2"}},
		Rules: []config.BudgetRule{
			{Name: "daily", Period: config.PeriodDay, MaxTokens: 1 << 60},
			{Name: "monthly", Period: config.PeriodMonth, MaxCostUSD: "1000000"},
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, budgets := range []*budget.Budgets{nil, withBudgets} {
		for _, clients := range []int{1, 64} {
			b.Run(fmt.Sprintf("budgets=%v/clients=%d", budgets != nil, clients), func(b *testing.B) {
				m := benchManager(b)
				m.budgets = budgets
				for range clients {
					if _, _, err := m.Start(ctx, params("default")); err != nil {
						b.Fatal(err)
					}
				}
				leases, err := m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "bench", MaxTasks: clients})
				if err != nil || len(leases) != clients {
					b.Fatalf("leased %d of %d: %v", len(leases), clients, err)
				}
				msg := &agentplanev1.Message{Role: agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, Parts: textParts("ok"), Model: "m",
					Usage: &agentplanev1.TokenUsage{InputTokens: 300, OutputTokens: 40, TotalTokens: 340}}
				events := []*agentplanev1.RuntimeEvent{{Payload: &agentplanev1.RuntimeEvent_Message{Message: msg}}}
				run(b, m, clients, func(c int) error {
					_, err := m.ReportEvents(ctx, ref(leases[c]), Request{}, events)
					return err
				})
			})
		}
	}
}
