package tasks

import (
	"context"
	"time"

	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
)

// purgeBatch bounds the tasks one purge transaction deletes, so that retention never
// holds the write lock for long.
const purgeBatch = 64

// PurgeResult counts what Purge removed (or would remove, on a dry run).
type PurgeResult struct {
	Tasks, Events int64
}

// Purge deletes the terminal tasks that ended more than olderThan ago, with their
// events, interrupts, verdicts and obligations, in transactions of at most 64 tasks.
// A purged task's request id can be used again. With dryRun it only counts.
func (m *Manager) Purge(ctx context.Context, olderThan time.Duration, dryRun bool) (PurgeResult, error) {
	var res PurgeResult
	if olderThan <= 0 {
		return res, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "older_than must be positive")
	}
	cutoff := m.clock.Now().Add(-olderThan)
	if dryRun {
		err := m.store.View(ctx, func(r store.Reader) error {
			return eachEnded(r, cutoff, 0, func(tenant, taskID string) error {
				rec, err := r.GetTask(tenant, taskID)
				if err != nil {
					return err
				}
				res.Tasks++
				res.Events += rec.GetLastSequence()
				return nil
			})
		})
		return res, err
	}
	for {
		var batch PurgeResult
		err := m.store.Update(ctx, func(w store.Writer) error {
			batch = PurgeResult{}
			var ended [][2]string
			if err := eachEnded(w, cutoff, purgeBatch, func(tenant, taskID string) error {
				ended = append(ended, [2]string{tenant, taskID})
				return nil
			}); err != nil {
				return err
			}
			for _, e := range ended {
				d, err := w.DeleteTask(e[0], e[1])
				if store.IsNotFound(err) {
					continue // another replica's retention came first
				}
				if err != nil {
					return err
				}
				batch.Tasks++
				batch.Events += d.Events
			}
			return nil
		})
		res.Tasks += batch.Tasks
		res.Events += batch.Events
		if err != nil || batch.Tasks < purgeBatch {
			return res, err
		}
	}
}

// eachEnded calls fn for up to limit (0: all) tasks that ended at or before cutoff.
func eachEnded(r store.Reader, cutoff time.Time, limit int, fn func(tenant, taskID string) error) error {
	n := 0
	full := func() bool { return limit > 0 && n >= limit }
	return r.Tenants(store.IndexEnded, "", func(tenant string) (bool, error) {
		err := r.ScanIndex(store.IndexEnded, tenant, store.IndexRange{Until: cutoff}, func(e store.IndexEntry) (bool, error) {
			if err := fn(tenant, e.ID); err != nil {
				return false, err
			}
			n++
			return !full(), nil
		})
		return !full(), err
	})
}

// StartMaintenance starts the background loop: lease expiry several times per lease
// TTL (at least every second), and retention every Config.PurgeInterval when
// Config.Retention is set. Stop ends it. Expiry also happens lazily, so the loop only
// bounds how long an abandoned task waits when no runtime is asking for work.
func (m *Manager) StartMaintenance() {
	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	expiry := min(max(m.cfg.LeaseTTL/10, 10*time.Millisecond), time.Second)
	m.loops.Go(func() {
		m.every(ctx, expiry, "lease expiry", func() error { _, err := m.ExpireLeases(ctx); return err })
	})
	if m.cfg.Retention > 0 && m.cfg.PurgeInterval > 0 {
		m.loops.Go(func() {
			m.every(ctx, m.cfg.PurgeInterval, "retention", func() error {
				res, err := m.Purge(ctx, m.cfg.Retention, false)
				if res.Tasks > 0 {
					m.log.Info("retention purged tasks", "tasks", res.Tasks, "events", res.Events, "older_than", m.cfg.Retention)
				}
				return err
			})
		})
	}
}

func (m *Manager) every(ctx context.Context, d time.Duration, what string, fn func() error) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := fn(); err != nil && ctx.Err() == nil {
				m.log.Error("tasks: background "+what+" failed", "err", err)
			}
		}
	}
}

// Stop ends the maintenance loop and waits for it. It does not close the store.
func (m *Manager) Stop() {
	m.stopOnce.Do(func() {
		m.stop()
		m.loops.Wait()
	})
}
