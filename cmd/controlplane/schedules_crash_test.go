package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
)

// Schedules of the crash tests: every second (interval nominal times fall on whole
// seconds, so a kill timed just after a second boundary lands while runs are being
// fired), every run allowed to overlap, a catch-up window longer than any downtime
// here, so that every nominal time from the first to the last must have exactly one
// task.
const crashSchedules = 12

func createCrashSchedules(ctx context.Context, t *testing.T, c *client.Client) {
	t.Helper()
	for i := range crashSchedules {
		_, err := c.Schedules.CreateSchedule(ctx, &agentplanev1.CreateScheduleRequest{
			ScheduleId: fmt.Sprintf("tick-%02d", i),
			Spec:       &agentplanev1.ScheduleSpec{Kind: &agentplanev1.ScheduleSpec_Interval{Interval: &agentplanev1.IntervalSpec{Every: durationpb.New(time.Second)}}},
			Policy: &agentplanev1.SchedulePolicy{Overlap: agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
				CatchupWindow: durationpb.New(time.Hour)},
			Task: startRequest(""),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// killAtFire waits for the next whole second plus up to 30ms, the moment the
// schedules fire.
func killAtFire(rng *rand.Rand) {
	now := time.Now()
	next := now.Truncate(time.Second).Add(time.Second + time.Duration(rng.IntN(30))*time.Millisecond)
	time.Sleep(next.Sub(now))
}

// verifyCrashSchedules pauses every schedule (so nothing fires while it reads), then
// checks that each has one task per nominal time, with no gap and no repeat from its
// first run to its last, and that its started count says as many.
func verifyCrashSchedules(ctx context.Context, t *testing.T, c *client.Client) {
	t.Helper()
	for i := range crashSchedules {
		if _, err := c.Schedules.PauseSchedule(ctx, &agentplanev1.PauseScheduleRequest{ScheduleId: fmt.Sprintf("tick-%02d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	byNominal := map[string]map[int64]int{}
	token := ""
	for {
		page, err := c.Tasks.ListTasks(ctx, &agentplanev1.ListTasksRequest{PageSize: 500, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range page.GetTasks() {
			sb := task.GetScheduledBy()
			if sb == nil {
				t.Fatalf("task %s has no scheduled_by", task.GetTaskId())
			}
			if byNominal[sb.GetScheduleId()] == nil {
				byNominal[sb.GetScheduleId()] = map[int64]int{}
			}
			byNominal[sb.GetScheduleId()][sb.GetNominalTime().AsTime().Unix()]++
		}
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	total := 0
	for i := range crashSchedules {
		id := fmt.Sprintf("tick-%02d", i)
		runs := byNominal[id]
		var secs []int64
		for s, n := range runs {
			if n != 1 {
				t.Errorf("%s: nominal time %d has %d tasks", id, s, n)
			}
			secs = append(secs, s)
		}
		sort.Slice(secs, func(i, j int) bool { return secs[i] < secs[j] })
		for k := 1; k < len(secs); k++ {
			if secs[k] != secs[k-1]+1 {
				t.Errorf("%s: no task for the nominal times between %d and %d", id, secs[k-1], secs[k])
			}
		}
		sc, err := c.Schedules.GetSchedule(ctx, &agentplanev1.GetScheduleRequest{ScheduleId: id})
		if err != nil {
			t.Fatal(err)
		}
		if got := sc.GetSchedule().GetCounts().GetStarted(); got != int64(len(secs)) {
			t.Errorf("%s: counts.started = %d, but %d tasks", id, got, len(secs))
		}
		if len(secs) < 3 {
			t.Errorf("%s: only %d runs", id, len(secs))
		}
		total += len(secs)
	}
	t.Logf("%d runs of %d schedules, each nominal time once", total, crashSchedules)
}

// TestSchedulesFireOnceAcrossSIGKILL SIGKILLs the real binary (bbolt, write-ahead
// log on) again and again at the moment its schedules fire, leaves it down for up to
// 2.5s, restarts it on the same data, and checks that every nominal time was run
// exactly once: none twice (the advance and the task commit together), none lost (the
// restarted process catches up what came due while it was down).
func TestSchedulesFireOnceAcrossSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	bin := buildBinary(t)
	dataDir := t.TempDir()
	configFile := writeConfig(t, "schedules:\n  poll_interval: 100ms\n")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))

	proc := startBinary(t, bin, dataDir, configFile)
	c, err := client.Dial(ctx, proc.addr)
	if err != nil {
		t.Fatal(err)
	}
	createCrashSchedules(ctx, t, c)
	for range 6 {
		for range 1 + rng.IntN(2) {
			killAtFire(rng)
		}
		proc.kill(t)
		c.Close()
		// Down for a while: the nominal times that pass meanwhile are caught up.
		time.Sleep(time.Duration(500+rng.IntN(2000)) * time.Millisecond)
		proc = startBinary(t, bin, dataDir, configFile)
		if c, err = client.Dial(ctx, proc.addr); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	verifyCrashSchedules(ctx, t, c)
	c.Close()
	proc.stop(t)
}

// TestSchedulesFireOnceAcrossReplicas runs three controlplane processes on one
// PostgreSQL database and SIGKILLs one of them, in turn, at the moment the schedules
// fire, restarting it after a while: every nominal time is run exactly once by
// whichever replica takes it.
func TestSchedulesFireOnceAcrossReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs three processes on PostgreSQL")
	}
	t.Setenv("AGENTPLANE_POSTGRES_DSN", pgtest.DSN(t))
	configFile := writeConfig(t, `store:
  backend: postgres
  postgres:
    max_conns: 4
    poll_interval: 200ms
schedules:
  poll_interval: 100ms
`)
	bin := buildBinary(t)
	rs := startReplicas(t, bin, configFile, "A", "B", "C")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13))
	createCrashSchedules(ctx, t, rs[0].c)
	for round := range 6 {
		r := rs[round%3]
		killAtFire(rng)
		r.proc.kill(t)
		killAtFire(rng) // the others fire without it
		r.proc = startBinary(t, bin, t.TempDir(), configFile)
		_ = r.c.Close()
		c, err := client.Dial(ctx, r.proc.addr)
		if err != nil {
			t.Fatal(err)
		}
		r.c = c
	}
	time.Sleep(1500 * time.Millisecond)
	verifyCrashSchedules(ctx, t, rs[1].c)
}
