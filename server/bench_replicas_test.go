package server_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
)

// BenchmarkWatchAcrossReplicas is two control planes on one PostgreSQL database: a
// runtime reports one event at a time through replica A while a WatchTask on replica
// B follows the task, each event written once B's watcher has the one before. The
// event reaches B through the database: A's commit notifies (LISTEN/NOTIFY), B's
// listener wakes the watcher, which reads the event from the table. ns/op is from the
// ReportEvents call on A until B's watcher has the event; deliver-p50-us and
// deliver-p99-us are its percentiles, ack-p50-us the writer's acknowledgement.
// Both replicas run in this process.
//
//	go test ./server -run '^$' -bench WatchAcrossReplicas -benchtime 2000x
func BenchmarkWatchAcrossReplicas(b *testing.B) {
	dsn := pgtest.DSN(b)
	pg := func(c *config.Config) {
		c.Store.Backend = config.BackendPostgres
		c.Store.Postgres.DSN = dsn
		c.Store.Postgres.MaxConns = 4
		c.Limits.MaxTaskEvents = int64(b.N) + 100
		c.Tasks.LeaseTTL = config.Duration(time.Hour)
	}
	a, rb := servertest.Start(b, pg), servertest.Start(b, pg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ref := startLeased(b, a)
	taskID := ref.GetTaskId()
	watch, err := rb.Client.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: taskID})
	if err != nil {
		b.Fatal(err)
	}
	for { // the start's own events, up to the live end
		resp, err := watch.Recv()
		if err != nil {
			b.Fatal(err)
		}
		if resp.GetCaughtUp() != nil {
			break
		}
	}
	got := make(chan int64, 16)
	go func() {
		for {
			resp, err := watch.Recv()
			if err != nil {
				close(got)
				return
			}
			if ev := resp.GetEvent(); ev != nil {
				got <- ev.GetSequence()
			}
		}
	}()
	ev := []*agentplanev1.RuntimeEvent{{Payload: &agentplanev1.RuntimeEvent_Message{
		Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "step")}}}
	deliver := make([]time.Duration, 0, b.N)
	acks := make([]time.Duration, 0, b.N)
	afterAck := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		resp, err := a.Client.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref, Events: ev})
		if err != nil {
			b.Fatal(err)
		}
		acked := time.Now()
		acks = append(acks, acked.Sub(t0))
		for seq := range got {
			if seq == resp.GetLastSequence() {
				break
			}
		}
		deliver = append(deliver, time.Since(t0))
		afterAck = append(afterAck, max(time.Since(acked), 0))
	}
	b.StopTimer()
	pct := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[int(p*float64(len(d)-1))].Microseconds())
	}
	b.ReportMetric(pct(deliver, 0.50), "deliver-p50-us")
	b.ReportMetric(pct(deliver, 0.99), "deliver-p99-us")
	b.ReportMetric(pct(acks, 0.50), "ack-p50-us")
	b.ReportMetric(pct(acks, 0.99), "ack-p99-us")
	b.ReportMetric(pct(afterAck, 0.50), "after-ack-p50-us")
	b.ReportMetric(pct(afterAck, 0.99), "after-ack-p99-us")
}
