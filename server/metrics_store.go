package server

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentplane/agentplane/server/store"
)

// storeCollector exports the store's counters at scrape time; the log's series only
// for a store that keeps a write-ahead log (store.Features), so that each backend
// exports its own figures. Stats reads maintained counters, not the data, so a
// scrape costs one short read transaction. While the
// store is failed (health returns its refusal) only agentplane_store_failed is
// exported, so the rest of /metrics stays readable.
type storeCollector struct {
	stats  func(context.Context) (store.Stats, error)
	health func() error
	hasLog bool

	tasks, events, pending, leases, size, commits, updates *prometheus.Desc
	logBytes, checkpoints, checkpointSeconds, failed       *prometheus.Desc
	queueDepth                                             *prometheus.Desc
	outboxPending, outboxDead, outboxOldest                *prometheus.Desc
}

// maxQueueSeries bounds the queue_depth series: queue names are chosen by callers, so
// the deepest queues get a series each and the rest are summed under otherQueues
// (which no queue can be named: names start with a letter or digit).
const (
	maxQueueSeries = 64
	otherQueues    = "_other"
)

func newStoreCollector(stats func(context.Context) (store.Stats, error), health func() error, features store.Features) *storeCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("agentplane_"+name, help, labels, nil)
	}
	return &storeCollector{
		stats:             stats,
		health:            health,
		hasLog:            features.WriteAheadLog,
		failed:            d("store_failed", "1 while the store refuses calls after a failed write or sync (disk full, I/O error) and has not recovered yet."),
		tasks:             d("tasks", "Tasks held, by state.", "state"),
		events:            d("task_events", "Task events held."),
		pending:           d("pending_interrupts", "Interrupts waiting for a decision (the inbox)."),
		leases:            d("active_leases", "Runtime leases currently held."),
		size:              d("store_size_bytes", "Size of the store's data."),
		commits:           d("store_commits_total", "Store transactions committed since start."),
		updates:           d("store_updates_total", "Write calls carried by those commits; updates/commits is the mean group-commit batch."),
		logBytes:          d("store_log_bytes", "Bytes in the store's write-ahead log since the last checkpoint (what a restart after a crash replays)."),
		checkpoints:       d("store_checkpoints_total", "Checkpoints since start (each copies the whole store)."),
		checkpointSeconds: d("store_checkpoint_seconds_total", "Time spent writing checkpoints since start."),
		queueDepth:        d("queue_depth", "Tasks waiting for a lease, by run queue (the 64 deepest; the rest summed as _other).", "queue"),
		outboxPending:     d("webhook_outbox_pending", "Webhook notifications waiting for delivery (the outbox depth, dead letters excluded)."),
		outboxDead:        d("webhook_outbox_dead_letters", "Webhook notifications given up after their endpoint's max_attempts, waiting for an operator (ctl admin webhooks dead-letters)."),
		outboxOldest:      d("webhook_outbox_oldest_pending_age_seconds", "Age of the oldest webhook notification waiting for delivery; 0 when none waits. Growing means an endpoint is down or the sender is behind."),
	}
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.tasks, c.events, c.pending, c.leases, c.size, c.commits, c.updates, c.logBytes, c.checkpoints, c.checkpointSeconds, c.queueDepth, c.failed,
		c.outboxPending, c.outboxDead, c.outboxOldest} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	failed := c.health() != nil
	ch <- prometheus.MustNewConstMetric(c.failed, prometheus.GaugeValue, map[bool]float64{false: 0, true: 1}[failed])
	if failed {
		return
	}
	st, err := c.stats(ctx)
	if err != nil {
		if c.health() == nil { // not the store failing since the first look
			ch <- prometheus.NewInvalidMetric(c.tasks, err)
		}
		return
	}
	for state, n := range st.TasksByState {
		ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, float64(n), strings.ToLower(strings.TrimPrefix(state.String(), "TASK_STATE_")))
	}
	ch <- prometheus.MustNewConstMetric(c.events, prometheus.GaugeValue, float64(st.Events))
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(st.PendingInterrupts))
	ch <- prometheus.MustNewConstMetric(c.leases, prometheus.GaugeValue, float64(st.ActiveLeases))
	ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(st.SizeBytes))
	ch <- prometheus.MustNewConstMetric(c.commits, prometheus.CounterValue, float64(st.Commits))
	ch <- prometheus.MustNewConstMetric(c.updates, prometheus.CounterValue, float64(st.Updates))
	if c.hasLog {
		ch <- prometheus.MustNewConstMetric(c.logBytes, prometheus.GaugeValue, float64(st.LogBytes))
		ch <- prometheus.MustNewConstMetric(c.checkpoints, prometheus.CounterValue, float64(st.Checkpoints))
		ch <- prometheus.MustNewConstMetric(c.checkpointSeconds, prometheus.CounterValue, st.CheckpointTime.Seconds())
	}
	ch <- prometheus.MustNewConstMetric(c.outboxPending, prometheus.GaugeValue, float64(st.OutboxPending))
	ch <- prometheus.MustNewConstMetric(c.outboxDead, prometheus.GaugeValue, float64(st.OutboxDead))
	age := 0.0
	if !st.OutboxOldestPending.IsZero() {
		age = max(time.Since(st.OutboxOldestPending).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.outboxOldest, prometheus.GaugeValue, age)
	queues := slices.Collect(maps.Keys(st.QueueDepth))
	slices.SortFunc(queues, func(a, b string) int {
		return cmp.Or(cmp.Compare(st.QueueDepth[b], st.QueueDepth[a]), cmp.Compare(a, b))
	})
	var other int64
	for i, q := range queues {
		if i >= maxQueueSeries {
			other += st.QueueDepth[q]
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.queueDepth, prometheus.GaugeValue, float64(st.QueueDepth[q]), q)
	}
	if other > 0 {
		ch <- prometheus.MustNewConstMetric(c.queueDepth, prometheus.GaugeValue, float64(other), otherQueues)
	}
}
