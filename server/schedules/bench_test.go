package schedules

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/store/boltstore"
	"github.com/agentplane/agentplane/server/tasks"
)

// BenchmarkFireLateness measures how late runs fire with many schedules: 10,000
// interval schedules (BENCH_SCHEDULES) on a bbolt store with its write-ahead log,
// each every 20s (BENCH_EVERY), their offsets spread evenly over the period (500
// runs a second), each run a real task committed with the schedule's advance. It
// fires for two periods (BENCH_PERIODS) after a warm-up period and reports the
// lateness of each run at its commit, measured from its fire time: p50, p99 and max.
//
//	go test -run '^$' -bench FireLateness -benchtime 1x ./server/schedules/
func BenchmarkFireLateness(b *testing.B) {
	n, every, periods := envInt("BENCH_SCHEDULES", 10000), envDuration("BENCH_EVERY", 20*time.Second), envInt("BENCH_PERIODS", 2)
	for range b.N {
		st, err := boltstore.Open(filepath.Join(b.TempDir(), "agentplane.db"), boltstore.Options{WAL: true})
		if err != nil {
			b.Fatal(err)
		}
		tm, err := tasks.New(tasks.Options{Store: st, Config: tasks.ConfigFrom(config.Default())})
		if err != nil {
			b.Fatal(err)
		}
		m, err := New(Options{Store: st, Tasks: tm, Prepare: prepare, Config: Config{MaxPerTenant: n, PollInterval: 100 * time.Millisecond}})
		if err != nil {
			b.Fatal(err)
		}
		// Create them, 32 at a time.
		var wg sync.WaitGroup
		sem := make(chan struct{}, 32)
		for i := range n {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				spec := &agentplanev1.ScheduleSpec{Kind: &agentplanev1.ScheduleSpec_Interval{Interval: &agentplanev1.IntervalSpec{
					Every: durationpb.New(every), Offset: durationpb.New(time.Duration(i) * every / time.Duration(n))}}}
				_, _, err := m.Create(ctx, fmt.Sprintf("t%d", i%10), "bench", &agentplanev1.CreateScheduleRequest{
					ScheduleId: fmt.Sprintf("s%05d", i), Spec: spec, Task: template(map[string]string{"n": strconv.Itoa(i)}),
					Policy: &agentplanev1.SchedulePolicy{Overlap: agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_ALLOW_ALL}})
				if err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		var mu sync.Mutex
		var late []time.Duration
		warm := time.Now().Add(every)
		m.onFire = func(d time.Duration) {
			if time.Now().After(warm) {
				mu.Lock()
				late = append(late, d)
				mu.Unlock()
			}
		}
		b.ResetTimer()
		m.Start()
		time.Sleep(every * time.Duration(1+periods))
		m.Stop()
		b.StopTimer()
		tm.Stop()
		_ = st.Close()
		mu.Lock()
		slices.Sort(late)
		if len(late) == 0 {
			b.Fatal("no runs fired")
		}
		q := func(p float64) time.Duration { return late[min(len(late)-1, int(p*float64(len(late))))] }
		b.ReportMetric(float64(len(late)), "runs")
		b.ReportMetric(float64(q(0.50).Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(q(0.99).Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(late[len(late)-1].Microseconds())/1000, "max-ms")
		b.Logf("%d schedules every %s: %d runs measured, lateness p50 %s p99 %s max %s", n, every, len(late), q(0.50), q(0.99), late[len(late)-1])
		mu.Unlock()
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
