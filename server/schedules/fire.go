package schedules

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/tasks"
)

// prepared is a schedule's template made ready to start, as of one revision.
type prepared struct {
	spec   *Spec
	params tasks.StartParams
	// err is why the template cannot be started now (the run is FAILED with it).
	err error
}

// prepareRun compiles the spec and prepares the template of rec, outside any
// transaction.
func (m *Manager) prepareRun(ctx context.Context, rec *storagev1.ScheduleRecord) prepared {
	spec, err := Compile(rec.GetSpec())
	if err != nil {
		// Validated when written; only a change of this binary's rules gets here.
		return prepared{err: fmt.Errorf("the stored spec no longer compiles: %w", err)}
	}
	p, err := m.prepare(ctx, rec.GetTenant(), runAs(rec), rec.GetTask())
	if err == nil {
		err = m.tasks.CheckStart(&p)
	}
	p.View = tasks.ViewBasic
	return prepared{spec: spec, params: p, err: err}
}

// runAs is the principal rec's runs start as.
func runAs(rec *storagev1.ScheduleRecord) string {
	if p := rec.GetRunAs(); p != "" {
		return p
	}
	return rec.GetCreatedBy()
}

// requestID is the task request id of a run: the schedule, its creation (a schedule
// deleted and created again under the same id starts afresh) and the nominal time,
// or for a trigger the caller's key.
func requestID(rec *storagev1.ScheduleRecord, nominal time.Time, manual bool, key string) string {
	base := requestIDPrefix + rec.GetScheduleId() + ":" + strconv.FormatInt(rec.GetCreateTime().AsTime().UnixMilli(), 36)
	if manual {
		sum := sha256Hex(key)
		return base + "!" + sum
	}
	return base + "@" + strconv.FormatInt(nominal.UnixNano(), 36)
}

// running is whether the schedule's last started run has not ended.
func (m *Manager) running(r store.Reader, rec *storagev1.ScheduleRecord) (string, bool, error) {
	id := rec.GetLastTaskId()
	if id == "" {
		return "", false, nil
	}
	t, err := r.GetTask(rec.GetTenant(), id)
	if store.IsNotFound(err) {
		return id, false, nil
	}
	if err != nil {
		return id, false, err
	}
	return id, !tasks.IsTerminal(t.GetState()), nil
}

// run acts on one nominal time of rec (a trigger's is now) inside w, applying the
// overlap policy, and returns what it did; rec is changed (last task, buffer, counts)
// but not written. replay is set when the run's task existed already: nothing was
// done and nothing must be written. An error is the store's.
func (m *Manager) run(w store.Writer, rec *storagev1.ScheduleRecord, prep prepared, nominal, now time.Time, manual bool, key, taskID string) (
	run *agentplanev1.ScheduleRun, task *agentplanev1.Task, replay bool, err error) {
	run = &agentplanev1.ScheduleRun{NominalTime: timestamppb.New(nominal), FireTime: timestamppb.New(now), Manual: manual}
	reqID := requestID(rec, nominal, manual, key)
	// Already started (the second line of exactly once): report that task.
	if owner, err := w.TaskForRequest(rec.GetTenant(), reqID); err != nil || owner != "" {
		if err != nil {
			return nil, nil, false, err
		}
		run.Outcome, run.TaskId = agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_STARTED, owner
		task, err = m.taskView(w, rec.GetTenant(), owner)
		return run, task, true, err
	}
	if prep.err != nil {
		run.Outcome, run.Message = agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_FAILED, m.describe(rec, prep.err)
		return run, nil, false, nil
	}
	prev, busy, err := m.running(w, rec)
	if err != nil {
		return nil, nil, false, err
	}
	if busy {
		switch overlap(rec.GetPolicy()) {
		case agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_SKIP:
			run.Outcome, run.Message = agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_SKIPPED, "the previous run (task "+prev+") is still going"
			return run, nil, false, nil
		case agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_BUFFER_ONE:
			if rec.GetBufferedNominalTime() != nil {
				run.Outcome, run.Message = agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_SKIPPED, "a run is already waiting for the previous one (task "+prev+")"
				return run, nil, false, nil
			}
			rec.BufferedNominalTime, rec.BufferedManual = timestamppb.New(nominal), manual
			run.Outcome, run.Message = agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_BUFFERED, "waiting for the previous run (task "+prev+") to end"
			return run, nil, false, nil
		case agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_CANCEL_PREVIOUS:
			reason := fmt.Sprintf("canceled by schedule %s: the run of %s replaces it", rec.GetScheduleId(), nominal.Format(time.RFC3339))
			if err := m.tasks.CancelIn(w, now, rec.GetTenant(), prev, runAs(rec), reason); err != nil {
				return nil, nil, false, err
			}
		}
	}
	task, err = m.start(w, rec, prep, nominal, manual, reqID, taskID, now)
	if apierr.HasReason(err, apierr.ReasonBudgetExceeded) {
		// A spent budget is an outcome of the run, like a template that no longer
		// starts: the run fails (StartIn refuses before it writes) and the schedule
		// moves on, rather than the fire failing and being retried until the period ends.
		run.Outcome, run.Message = agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_FAILED, m.describe(rec, err)
		return run, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, err
	}
	run.Outcome, run.TaskId = agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_STARTED, task.GetTaskId()
	return run, task, false, nil
}

// start creates the run's task in w.
func (m *Manager) start(w store.Writer, rec *storagev1.ScheduleRecord, prep prepared, nominal time.Time, manual bool, reqID, taskID string, now time.Time) (*agentplanev1.Task, error) {
	p := prep.params
	p.RequestID = reqID
	p.ScheduledBy = &agentplanev1.ScheduledBy{ScheduleId: rec.GetScheduleId(), NominalTime: timestamppb.New(nominal), Manual: manual}
	task, _, err := m.tasks.StartIn(w, p, taskID, now)
	if err != nil {
		return nil, err
	}
	rec.LastTaskId = task.GetTaskId()
	return task, nil
}

// describe is what a FAILED run says: the refusal's message when it is one the
// caller may see, otherwise a pointer to the log (which gets the detail).
func (m *Manager) describe(rec *storagev1.ScheduleRecord, err error) string {
	var ae *apierr.Error
	if errors.As(err, &ae) {
		return truncate(ae.Message, maxMessageBytes)
	}
	m.log.Error("schedule run could not start", "tenant", rec.GetTenant(), "schedule", rec.GetScheduleId(), "err", err)
	return "internal error starting the run; the control plane's log has the detail"
}

// maxMessageBytes bounds what a run keeps of why it failed.
const maxMessageBytes = 1024

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return hitl.TruncateUTF8(s, n) + "..."
}

// record adds a run to rec's recent runs and counts.
func (m *Manager) record(rec *storagev1.ScheduleRecord, run *agentplanev1.ScheduleRun) {
	runs := append([]*agentplanev1.ScheduleRun{run}, rec.GetRecentRuns()...)
	if len(runs) > m.cfg.RecentRuns {
		runs = runs[:m.cfg.RecentRuns]
	}
	rec.RecentRuns = runs
	if rec.Counts == nil {
		rec.Counts = &agentplanev1.ScheduleCounts{}
	}
	c := rec.Counts
	switch run.GetOutcome() {
	case agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_STARTED:
		c.Started++
	case agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_SKIPPED:
		c.Skipped++
	case agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_MISSED:
		c.Missed += run.GetMissedCount()
	case agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_FAILED:
		c.Failed++
	}
}

// counted updates the metrics for a committed run.
func (m *Manager) counted(run *agentplanev1.ScheduleRun, fire time.Time, scheduled bool) {
	if run == nil {
		return
	}
	n := float64(1)
	if run.GetOutcome() == agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_MISSED {
		n = float64(run.GetMissedCount())
	}
	m.runs.WithLabelValues(outcomeLabel(run.GetOutcome())).Add(n)
	if scheduled && run.GetOutcome() == agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_STARTED {
		late := m.clock.Now().Sub(fire)
		m.lateness.Observe(late.Seconds())
		if m.onFire != nil {
			m.onFire(late)
		}
	}
}

func outcomeLabel(o agentplanev1.ScheduleRunOutcome) string {
	switch o {
	case agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_STARTED:
		return "started"
	case agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_SKIPPED:
		return "skipped"
	case agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_BUFFERED:
		return "buffered"
	case agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_MISSED:
		return "missed"
	}
	return "failed"
}

// setWake sets when the scheduler looks at rec next.
func (m *Manager) setWake(rec *storagev1.ScheduleRecord, spec *Spec, now time.Time) {
	rec.WakeTime = nil
	if rec.GetPaused() {
		return
	}
	var wake time.Time
	if n := rec.GetNextNominalTime(); n != nil && spec != nil {
		wake = spec.FireTime(rec.GetTenant(), rec.GetScheduleId(), n.AsTime())
	}
	if rec.GetBufferedNominalTime() != nil {
		if r := now.Add(m.cfg.RecheckInterval); wake.IsZero() || r.Before(wake) {
			wake = r
		}
	}
	if !wake.IsZero() {
		rec.WakeTime = timestamppb.New(wake)
	}
}

// step does what is due for one schedule at now, inside w: a buffered run whose
// predecessor ended starts; a due nominal time is run (or, beyond the catch-up
// window, recorded as missed with the others beyond it); the schedule advances past
// it. It does nothing when another transaction holds the schedule or it is no longer
// at revision rev (another replica acted, or a caller changed it).
func (m *Manager) step(w store.Writer, tenant, id string, rev int64, prep prepared, now time.Time, ids [2]string) ([]*agentplanev1.ScheduleRun, error) {
	rec, err := w.TryLockSchedule(tenant, id)
	if err != nil || rec == nil || rec.GetRevision() != rev || rec.GetPaused() {
		if store.IsNotFound(err) {
			err = nil
		}
		return nil, err
	}
	spec := prep.spec
	// Non-nil from here: the schedule advances (progress for the loop).
	runs := []*agentplanev1.ScheduleRun{}
	if spec == nil {
		// Not reached unless this binary's rules changed under a stored spec: stop
		// the schedule, saying why, rather than look at it again and again.
		runs = append(runs, &agentplanev1.ScheduleRun{NominalTime: rec.GetNextNominalTime(), FireTime: timestamppb.New(now),
			Outcome: agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_FAILED, Message: m.describe(rec, prep.err)})
		m.record(rec, runs[0])
		rec.WakeTime, rec.NextNominalTime = nil, nil
		rec.Revision++
		rec.UpdateTime = timestamppb.New(now)
		return runs, w.PutSchedule(rec)
	}
	if b := rec.GetBufferedNominalTime(); b != nil {
		_, busy, err := m.running(w, rec)
		if err != nil {
			return nil, err
		}
		if !busy {
			rec.BufferedNominalTime = nil
			run, _, replay, err := m.run(w, rec, prep, b.AsTime(), now, rec.GetBufferedManual(), "t"+strconv.FormatInt(b.AsTime().UnixNano(), 10), ids[0])
			if err != nil {
				return nil, err
			}
			rec.BufferedManual = false
			if !replay {
				runs = append(runs, run)
			}
		}
	}
	if n := rec.GetNextNominalTime(); n != nil && !spec.FireTime(tenant, id, n.AsTime()).After(now) {
		nominal := n.AsTime()
		horizon := now.Add(-catchupWindow(rec.GetPolicy()))
		if nominal.Before(horizon) {
			runs = append(runs, m.missed(rec, spec, nominal, horizon, now))
		} else {
			run, _, replay, err := m.run(w, rec, prep, nominal, now, false, "", ids[1])
			if err != nil {
				return nil, err
			}
			if !replay {
				runs = append(runs, run)
			}
			rec.NextNominalTime = nil
			if next, ok := spec.Next(nominal); ok {
				rec.NextNominalTime = timestamppb.New(next)
			}
		}
	}
	for i := len(runs) - 1; i >= 0; i-- {
		m.record(rec, runs[i])
	}
	m.setWake(rec, spec, now)
	rec.Revision++
	rec.UpdateTime = timestamppb.New(now)
	return runs, w.PutSchedule(rec)
}

// missed skips the nominal times from nominal up to the catch-up horizon, moves
// rec's next nominal time to the first one within the window, and returns the MISSED
// run that records them.
func (m *Manager) missed(rec *storagev1.ScheduleRecord, spec *Spec, nominal, horizon, now time.Time) *agentplanev1.ScheduleRun {
	run := &agentplanev1.ScheduleRun{NominalTime: timestamppb.New(nominal), FireTime: timestamppb.New(now),
		Outcome: agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_MISSED}
	last, count := nominal, int64(0)
	next, ok := nominal, true
	for ok && next.Before(horizon) && count < maxMissedCounted {
		last, count = next, count+1
		next, ok = spec.Next(next)
	}
	if ok && next.Before(horizon) {
		// Too many to count one by one: jump to the window.
		run.Message = fmt.Sprintf("at least %d nominal times", count)
		last = horizon
		next, ok = spec.Next(horizon.Add(-time.Nanosecond))
	}
	run.MissedCount, run.LastMissedTime = count, timestamppb.New(last)
	if run.Message == "" {
		run.Message = fmt.Sprintf("%d nominal times older than the catch-up window (%s) were not run", count, catchupWindow(rec.GetPolicy()))
	}
	rec.NextNominalTime = nil
	if ok {
		rec.NextNominalTime = timestamppb.New(next)
	}
	return run
}

// Start runs the scheduler until Stop.
func (m *Manager) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	m.loops.Add(1)
	go func() {
		defer m.loops.Done()
		m.loop(ctx)
	}()
}

// Stop ends the scheduler and waits for it.
func (m *Manager) Stop() {
	m.stopOnce.Do(func() { m.stop() })
	m.loops.Wait()
}

func (m *Manager) wakeUp() {
	select {
	case m.poke <- struct{}{}:
	default:
	}
}

// batch is how many due schedules one pass reads.
const batch = 512

func (m *Manager) loop(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-m.poke:
		}
		wait := m.pass(ctx)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
	}
}

// pass fires what is due and returns how long to sleep: until the next wake time,
// at most PollInterval.
func (m *Manager) pass(ctx context.Context) time.Duration {
	for ctx.Err() == nil {
		now := m.clock.Now()
		var due []store.ScheduleDue
		next := time.Time{}
		err := m.store.View(ctx, func(r store.Reader) error {
			due, next = nil, time.Time{}
			return r.ScanDueSchedules(now.Add(m.cfg.PollInterval), func(d store.ScheduleDue) (bool, error) {
				if d.Wake.After(now) {
					next = d.Wake
					return false, nil
				}
				due = append(due, d)
				return len(due) < batch, nil
			})
		})
		if err != nil {
			if ctx.Err() == nil {
				m.log.Warn("scheduler: reading due schedules failed", "err", err)
			}
			return m.cfg.PollInterval
		}
		if len(due) == 0 {
			if next.IsZero() {
				return m.cfg.PollInterval
			}
			return max(time.Until(next), time.Millisecond)
		}
		progress := m.fireAll(ctx, due)
		if progress == 0 {
			// Everything due is held by other replicas (or failing): look again soon.
			return 50 * time.Millisecond
		}
	}
	return 0
}

// fireAll fires the due schedules, Concurrency at a time, and counts those that
// advanced.
func (m *Manager) fireAll(ctx context.Context, due []store.ScheduleDue) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	progress := 0
	sem := make(chan struct{}, m.cfg.Concurrency)
	for _, d := range due {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if ok := m.fire(ctx, d); ok {
				mu.Lock()
				progress++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return progress
}

// fire reads one due schedule, prepares its template and steps it in a transaction;
// it reports whether the schedule advanced.
func (m *Manager) fire(ctx context.Context, d store.ScheduleDue) bool {
	var rec *storagev1.ScheduleRecord
	if err := m.store.View(ctx, func(r store.Reader) error {
		var err error
		rec, err = r.GetSchedule(d.Tenant, d.ScheduleID)
		return err
	}); err != nil {
		if !store.IsNotFound(err) && ctx.Err() == nil {
			m.log.Warn("scheduler: reading a schedule failed", "tenant", d.Tenant, "schedule", d.ScheduleID, "err", err)
		}
		return false
	}
	prep := m.prepareRun(ctx, rec)
	ids := [2]string{tasks.NewTaskID(), tasks.NewTaskID()}
	now := m.clock.Now()
	var runs []*agentplanev1.ScheduleRun
	err := m.store.Update(ctx, func(w store.Writer) error {
		var err error
		runs, err = m.step(w, d.Tenant, d.ScheduleID, rec.GetRevision(), prep, now, ids)
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("scheduler: firing a schedule failed; it stays due", "tenant", d.Tenant, "schedule", d.ScheduleID, "err", err)
		}
		return false
	}
	for _, run := range runs {
		if run.GetOutcome() == agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_FAILED {
			m.log.Warn("schedule run failed: its task could not be started; the schedule goes on",
				"tenant", d.Tenant, "schedule", d.ScheduleID, "nominal_time", run.GetNominalTime().AsTime(), "why", run.GetMessage())
		}
		fire := run.GetNominalTime().AsTime()
		if prep.spec != nil {
			fire = prep.spec.FireTime(d.Tenant, d.ScheduleID, fire)
		}
		m.counted(run, fire, !run.GetManual())
	}
	return runs != nil
}
