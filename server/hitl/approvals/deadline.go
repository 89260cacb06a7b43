package approvals

import (
	"context"
	"time"

	"github.com/agentplane/agentplane/server/store"
)

// deadlineBatch bounds the overdue interrupts one look collects.
const deadlineBatch = 256

// maxDeadlineSleep bounds the loop's sleep, so a deadline written by another process
// sharing the store (or missed for any reason) is applied within it.
const maxDeadlineSleep = time.Minute

type dueInterrupt struct{ tenant, taskID, id string }

// ApplyDeadlines resolves every pending interrupt whose deadline has passed with the
// deployment default (reject unless configured approve), each in its own transaction,
// recorded like any decision (source DEADLINE, principal "system"). It returns how
// many it resolved. The loop started by Start calls it; reads apply overdue deadlines
// lazily too, so no reader sees an overdue interrupt as pending.
func (s *Service) ApplyDeadlines(ctx context.Context) (int, error) {
	return s.applyDue(ctx, "")
}

// applyDue applies overdue deadlines of one tenant, or of all when tenant is "".
func (s *Service) applyDue(ctx context.Context, tenant string) (int, error) {
	total := 0
	for {
		due, err := s.findDue(ctx, tenant, s.clock.Now())
		if err != nil {
			return total, err
		}
		for _, d := range due {
			in, err := s.expire(ctx, d.tenant, d.taskID, d.id)
			if store.IsNotFound(err) {
				continue // purged meanwhile
			}
			if err != nil {
				return total, err
			}
			if in.GetDecision() != nil {
				total++
			}
		}
		if len(due) < deadlineBatch {
			return total, nil
		}
	}
}

// scanDue is the one scan of the interrupt time indexes (store.IndexInterruptDeadlines,
// store.IndexInterruptEscalations): it collects, of tenant (every tenant when ""), the
// interrupts whose entry in idx is due at now, at most deadlineBatch, and the earliest
// entry not yet due (zero: none seen). A zero now collects nothing and finds the
// earliest entry of all.
func (s *Service) scanDue(ctx context.Context, idx store.Index, tenant string, now time.Time) ([]dueInterrupt, time.Time, error) {
	var due []dueInterrupt
	var next time.Time
	err := s.store.View(ctx, func(r store.Reader) error {
		scan := func(t string) (bool, error) {
			err := r.ScanIndex(idx, t, store.IndexRange{}, func(e store.IndexEntry) (bool, error) {
				if now.IsZero() || e.At.After(now) {
					if next.IsZero() || e.At.Before(next) {
						next = e.At
					}
					return false, nil
				}
				rec, err := r.GetInterrupt(t, e.ID)
				if err != nil {
					return false, err
				}
				due = append(due, dueInterrupt{tenant: t, taskID: rec.GetInterrupt().GetTaskId(), id: e.ID})
				return len(due) < deadlineBatch, nil
			})
			return len(due) < deadlineBatch, err
		}
		if tenant != "" {
			_, err := scan(tenant)
			return err
		}
		return r.Tenants(idx, "", scan)
	})
	return due, next, err
}

// findDue collects overdue interrupts from the deadline index.
func (s *Service) findDue(ctx context.Context, tenant string, now time.Time) ([]dueInterrupt, error) {
	due, _, err := s.scanDue(ctx, store.IndexInterruptDeadlines, tenant, now)
	return due, err
}

// nextDeadline is the earliest pending deadline of any tenant (zero: none).
func (s *Service) nextDeadline(ctx context.Context) (time.Time, error) {
	_, next, err := s.scanDue(ctx, store.IndexInterruptDeadlines, "", time.Time{})
	return next, err
}

// kickDeadlines tells the loop that a new deadline exists.
func (s *Service) kickDeadlines() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Start runs the deadline loop until Stop: it sleeps until the earliest pending
// deadline (or until a new interrupt brings an earlier one), applies what is due,
// and repeats. Calling Start twice is a no-op.
func (s *Service) Start() {
	s.loopMu.Lock()
	defer s.loopMu.Unlock()
	if s.stopLoop != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopLoop = cancel
	s.loopDone = make(chan struct{})
	go s.loop(ctx, s.loopDone)
}

// Stop ends the deadline loop and waits for it.
func (s *Service) Stop() {
	s.loopMu.Lock()
	cancel, done := s.stopLoop, s.loopDone
	s.stopLoop, s.loopDone = nil, nil
	s.loopMu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (s *Service) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-s.kick:
		}
		// After a failure, back off instead of spinning on an overdue deadline.
		floor := time.Duration(0)
		if _, err := s.ApplyDeadlines(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("applying interrupt deadlines", "error", err)
			floor = time.Second
		}
		sleep := maxDeadlineSleep
		_, step, err := s.ApplyEscalations(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Error("applying approval escalations", "error", err)
			floor = time.Second
		}
		if !step.IsZero() {
			sleep = min(max(step.Sub(s.clock.Now()), floor), maxDeadlineSleep)
		}
		if next, err := s.nextDeadline(ctx); err != nil {
			if ctx.Err() == nil {
				s.log.Error("reading interrupt deadlines", "error", err)
			}
		} else if !next.IsZero() {
			sleep = min(sleep, max(next.Sub(s.clock.Now()), floor))
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(sleep)
	}
}
