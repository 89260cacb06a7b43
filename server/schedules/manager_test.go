package schedules

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/boltstore"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/pgstore"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
	"github.com/agentplane/agentplane/server/tasks"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var ctx = context.Background()

// base is a whole minute, so that interval nominal times fall on it.
var base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type harness struct {
	m     *Manager
	tasks *tasks.Manager
	store store.Store
	clock *fakeClock
}

// prepare stands in for the server's StartTask checks: a template labelled
// refuse=yes is refused as an invalid spec would be.
func prepare(_ context.Context, tenant, principal string, req *agentplanev1.StartTaskRequest) (tasks.StartParams, error) {
	if req.GetLabels()["refuse"] == "yes" {
		return tasks.StartParams{}, apierr.InvalidArgument(apierr.ReasonSpecInvalid, "the spec is invalid: agent_id %q is not in the static agent table", req.GetAgentId())
	}
	return tasks.StartParams{
		Tenant: tenant, Principal: principal, AgentID: req.GetAgentId(), Labels: req.GetLabels(), Queue: req.GetQueue(), Input: req.GetInput(),
		Resolved:      &agentplanev1.ResolvedSpec{Spec: &agentplanev1.ResolvedSpec_Agent{Agent: &agentplanev1.AgentSpec{ApiVersion: "qar/v1", Kind: "AgentSpec"}}},
		RequestDigest: tasks.RequestDigest(req),
	}, nil
}

// backend opens an empty store of one kind for a test.
type backend struct {
	name string
	open func(t *testing.T) store.Store
}

var backends = []backend{
	{"bbolt", func(t *testing.T) store.Store {
		st, err := boltstore.Open(filepath.Join(t.TempDir(), "agentplane.db"), boltstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}},
	{"postgres", func(t *testing.T) store.Store {
		st, err := pgstore.Open(context.Background(), pgtest.DSN(t), pgstore.Options{MaxConns: 8})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}},
}

// onBoth runs fn on each backend.
func onBoth(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
}

func newHarnessOn(t *testing.T, b backend, cfg Config) *harness {
	t.Helper()
	st := b.open(t)
	clock := &fakeClock{t: base}
	tm, err := tasks.New(tasks.Options{Store: st, Config: tasks.ConfigFrom(config.Default()), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{Store: st, Tasks: tm, Prepare: prepare, Clock: clock, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(); tm.Stop(); _ = st.Close() })
	return &harness{m: m, tasks: tm, store: st, clock: clock}
}

func template(labels map[string]string) *agentplanev1.StartTaskRequest {
	return &agentplanev1.StartTaskRequest{Source: &agentplanev1.StartTaskRequest_AgentId{AgentId: "echo"}, Labels: labels}
}

func every(d time.Duration) *agentplanev1.ScheduleSpec {
	return &agentplanev1.ScheduleSpec{Kind: &agentplanev1.ScheduleSpec_Interval{Interval: &agentplanev1.IntervalSpec{Every: durationpb.New(d)}}}
}

func policy(o agentplanev1.ScheduleOverlapPolicy, window time.Duration) *agentplanev1.SchedulePolicy {
	p := &agentplanev1.SchedulePolicy{Overlap: o}
	if window > 0 {
		p.CatchupWindow = durationpb.New(window)
	}
	return p
}

func (h *harness) create(t *testing.T, id string, spec *agentplanev1.ScheduleSpec, pol *agentplanev1.SchedulePolicy) *agentplanev1.Schedule {
	t.Helper()
	sc, created, err := h.m.Create(ctx, "acme", "alice", &agentplanev1.CreateScheduleRequest{ScheduleId: id, Spec: spec, Policy: pol, Task: template(nil)})
	if err != nil || !created {
		t.Fatalf("Create(%s) = %v, %v", id, created, err)
	}
	return sc
}

// pass runs one scheduler pass at the fake clock's time.
func (h *harness) pass(t *testing.T) {
	t.Helper()
	h.m.pass(ctx)
}

// runs lists the tasks started by schedule id, by nominal time.
func (h *harness) runs(t *testing.T, id string) []*storagev1.TaskRecord {
	t.Helper()
	var out []*storagev1.TaskRecord
	if err := h.store.View(ctx, func(r store.Reader) error {
		return r.ScanTasks("acme", store.TaskRange{}, func(_ []byte, rec *storagev1.TaskRecord) (bool, error) {
			if rec.GetScheduledBy().GetScheduleId() == id {
				out = append(out, rec)
			}
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].GetScheduledBy().GetNominalTime().AsTime().Before(out[j].GetScheduledBy().GetNominalTime().AsTime())
	})
	return out
}

func nominals(recs []*storagev1.TaskRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.GetScheduledBy().GetNominalTime().AsTime().Sub(base).String())
	}
	return out
}

func (h *harness) get(t *testing.T, id string) *agentplanev1.Schedule {
	t.Helper()
	sc, err := h.m.Get(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func (h *harness) end(t *testing.T, taskID string) {
	t.Helper()
	if _, err := h.tasks.Cancel(ctx, "acme", taskID, "test", "done", tasks.Request{}); err != nil {
		t.Fatal(err)
	}
}

func outcomes(sc *agentplanev1.Schedule) []string {
	var out []string
	for i := len(sc.GetRecentRuns()) - 1; i >= 0; i-- {
		r := sc.GetRecentRuns()[i]
		out = append(out, fmt.Sprintf("%s@%s", r.GetOutcome().String()[len("SCHEDULE_RUN_OUTCOME_"):], r.GetNominalTime().AsTime().Sub(base)))
	}
	return out
}

// Each nominal time starts one task carrying the schedule and the nominal time; a
// second pass at the same time starts nothing more.
func TestEachNominalTimeOnce(t *testing.T) { onBoth(t, testEachNominalTimeOnce) }

func testEachNominalTimeOnce(t *testing.T, b backend) {
	h := newHarnessOn(t, b, Config{})
	sc := h.create(t, "tick", every(time.Minute), policy(agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_ALLOW_ALL, 0))
	if got := sc.GetNextFireTime().AsTime(); !got.Equal(base.Add(time.Minute)) {
		t.Fatalf("next fire %v, want %v", got, base.Add(time.Minute))
	}
	if len(sc.GetNextNominalTimes()) != nextTimesShown {
		t.Fatalf("%d next nominal times, want %d", len(sc.GetNextNominalTimes()), nextTimesShown)
	}
	h.pass(t)
	equal(t, "before the first nominal time", nominals(h.runs(t, "tick")), nil)
	h.clock.Advance(time.Minute)
	h.pass(t)
	h.pass(t)
	equal(t, "after one minute", nominals(h.runs(t, "tick")), []string{"1m0s"})
	h.clock.Advance(3 * time.Minute)
	h.pass(t)
	runs := h.runs(t, "tick")
	equal(t, "after three more (caught up)", nominals(runs), []string{"1m0s", "2m0s", "3m0s", "4m0s"})
	for _, r := range runs {
		if r.GetCreatedBy() != "alice" || r.GetRequestId() == "" || r.GetState() != agentplanev1.TaskState_TASK_STATE_SUBMITTED {
			t.Fatalf("run task %v", r)
		}
	}
	got := h.get(t, "tick")
	if got.GetCounts().GetStarted() != 4 || len(got.GetRecentRuns()) != 4 || got.GetRecentRuns()[0].GetTaskId() != runs[3].GetTaskId() {
		t.Fatalf("schedule after 4 runs: counts %v, runs %v", got.GetCounts(), got.GetRecentRuns())
	}
}

func TestOverlapPolicies(t *testing.T) { onBoth(t, testOverlapPolicies) }

func testOverlapPolicies(t *testing.T, b backend) {
	h := newHarnessOn(t, b, Config{RecheckInterval: time.Second})
	for _, o := range []agentplanev1.ScheduleOverlapPolicy{
		agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_UNSPECIFIED,
		agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_BUFFER_ONE,
		agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
		agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_CANCEL_PREVIOUS,
	} {
		h.create(t, fmt.Sprintf("p%d", o), every(time.Minute), policy(o, 0))
	}
	// Three nominal times while the first run goes on.
	for range 3 {
		h.clock.Advance(time.Minute)
		h.pass(t)
	}
	t.Run("skip (the default)", func(t *testing.T) {
		equal(t, "runs", outcomes(h.get(t, "p0")), []string{"STARTED@1m0s", "SKIPPED@2m0s", "SKIPPED@3m0s"})
		equal(t, "tasks", nominals(h.runs(t, "p0")), []string{"1m0s"})
	})
	t.Run("buffer one", func(t *testing.T) {
		equal(t, "runs", outcomes(h.get(t, "p2")), []string{"STARTED@1m0s", "BUFFERED@2m0s", "SKIPPED@3m0s"})
		first := h.runs(t, "p2")[0]
		h.end(t, first.GetTaskId())
		h.clock.Advance(time.Second)
		h.pass(t)
		equal(t, "tasks after the first ended", nominals(h.runs(t, "p2")), []string{"1m0s", "2m0s"})
		if sc := h.get(t, "p2"); sc.GetBufferedNominalTime() != nil || sc.GetRecentRuns()[0].GetOutcome() != agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_STARTED {
			t.Fatalf("after the buffered run started: %v", sc)
		}
	})
	t.Run("allow all", func(t *testing.T) {
		equal(t, "tasks", nominals(h.runs(t, "p3")), []string{"1m0s", "2m0s", "3m0s"})
	})
	t.Run("cancel previous", func(t *testing.T) {
		runs := h.runs(t, "p4")
		equal(t, "tasks", nominals(runs), []string{"1m0s", "2m0s", "3m0s"})
		for i, want := range []agentplanev1.TaskState{agentplanev1.TaskState_TASK_STATE_CANCELED, agentplanev1.TaskState_TASK_STATE_CANCELED, agentplanev1.TaskState_TASK_STATE_SUBMITTED} {
			if runs[i].GetState() != want {
				t.Fatalf("run %d is %v, want %v", i, runs[i].GetState(), want)
			}
		}
		if r := runs[0].GetCancellation().GetReason(); r == "" {
			t.Fatal("the canceled run says nothing of why")
		}
	})
}

// After downtime, nominal times within the catch-up window run; older ones are one
// MISSED run with their count.
func TestCatchupWindow(t *testing.T) { onBoth(t, testCatchupWindow) }

func testCatchupWindow(t *testing.T, b backend) {
	h := newHarnessOn(t, b, Config{})
	h.create(t, "c", every(time.Minute), policy(agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_ALLOW_ALL, 5*time.Minute))
	h.clock.Advance(30 * time.Minute)
	h.pass(t)
	equal(t, "tasks", nominals(h.runs(t, "c")), []string{"25m0s", "26m0s", "27m0s", "28m0s", "29m0s", "30m0s"})
	sc := h.get(t, "c")
	missed := sc.GetRecentRuns()[len(sc.GetRecentRuns())-1]
	if missed.GetOutcome() != agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_MISSED || missed.GetMissedCount() != 24 ||
		!missed.GetNominalTime().AsTime().Equal(base.Add(time.Minute)) || !missed.GetLastMissedTime().AsTime().Equal(base.Add(24*time.Minute)) {
		t.Fatalf("missed run %v", missed)
	}
	if sc.GetCounts().GetMissed() != 24 || sc.GetCounts().GetStarted() != 6 {
		t.Fatalf("counts %v", sc.GetCounts())
	}
}

// A run fires at nominal time plus its jitter, not before.
func TestJitterDelaysTheFire(t *testing.T) { onBoth(t, testJitterDelaysTheFire) }

func testJitterDelaysTheFire(t *testing.T, b backend) {
	h := newHarnessOn(t, b, Config{})
	spec := every(time.Hour)
	spec.Jitter = durationpb.New(10 * time.Minute)
	sc := h.create(t, "j", spec, nil)
	offset := sc.GetNextFireTime().AsTime().Sub(sc.GetNextNominalTimes()[0].AsTime())
	if offset <= 0 || offset >= 10*time.Minute {
		t.Skipf("jitter offset %v: nothing to wait for", offset)
	}
	h.clock.Advance(time.Hour)
	h.pass(t)
	equal(t, "at the nominal time", nominals(h.runs(t, "j")), nil)
	h.clock.Advance(offset)
	h.pass(t)
	equal(t, "at the fire time", nominals(h.runs(t, "j")), []string{"1h0m0s"})
}

func TestPauseResumeTriggerUpdateDelete(t *testing.T) { onBoth(t, testPauseResumeTriggerUpdateDelete) }

func testPauseResumeTriggerUpdateDelete(t *testing.T, b backend) {
	h := newHarnessOn(t, b, Config{})
	h.create(t, "s", every(time.Minute), policy(agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_ALLOW_ALL, 0))
	if sc, err := h.m.Pause(ctx, "acme", "s", "maintenance"); err != nil || !sc.GetPaused() || sc.GetNextFireTime() != nil {
		t.Fatalf("Pause = %v, %v", sc, err)
	}
	h.clock.Advance(5 * time.Minute)
	h.pass(t)
	equal(t, "while paused", nominals(h.runs(t, "s")), nil)

	// A trigger runs a paused schedule; its retry returns the same task.
	run, task, err := h.m.Trigger(ctx, "acme", "s", "req-1")
	if err != nil || run.GetOutcome() != agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_STARTED || task.GetScheduledBy().GetManual() != true {
		t.Fatalf("Trigger = %v, %v, %v", run, task, err)
	}
	h.clock.Advance(time.Second)
	run2, task2, err := h.m.Trigger(ctx, "acme", "s", "req-1")
	if err != nil || task2.GetTaskId() != task.GetTaskId() || run2.GetTaskId() != task.GetTaskId() {
		t.Fatalf("retried Trigger = %v, %v, %v; want task %s", run2, task2, err, task.GetTaskId())
	}
	if _, task3, err := h.m.Trigger(ctx, "acme", "s", ""); err != nil || task3.GetTaskId() == task.GetTaskId() {
		t.Fatalf("Trigger without a request id = %v, %v", task3, err)
	}
	if n := len(h.runs(t, "s")); n != 2 {
		t.Fatalf("%d tasks after two triggers and a retry", n)
	}

	// Resume: what passed while paused is not caught up.
	sc, err := h.m.Resume(ctx, "acme", "s")
	if err != nil || sc.GetPaused() || !sc.GetNextNominalTimes()[0].AsTime().Equal(base.Add(6*time.Minute)) {
		t.Fatalf("Resume = %v, %v", sc, err)
	}
	h.clock.Advance(time.Minute)
	h.pass(t)
	if n := len(h.runs(t, "s")); n != 3 {
		t.Fatalf("%d tasks after resuming, want 3", n)
	}

	// Update: a new spec counts from now; a stale expected revision is refused.
	rev := h.get(t, "s").GetRevision()
	_, err = h.m.Update(ctx, "acme", "alice", &agentplanev1.UpdateScheduleRequest{ScheduleId: "s", Spec: every(time.Hour), ExpectedRevision: rev - 1})
	wantReason(t, err, codes.FailedPrecondition, apierr.ReasonScheduleRevision)
	sc, err = h.m.Update(ctx, "acme", "alice", &agentplanev1.UpdateScheduleRequest{ScheduleId: "s", Spec: every(time.Hour), ExpectedRevision: rev})
	if err != nil || !sc.GetNextNominalTimes()[0].AsTime().Equal(base.Add(time.Hour)) {
		t.Fatalf("Update = %v, %v", sc, err)
	}

	// A new template is started as whoever set it, not as the creator: bob cannot
	// make runs that alice started (and he could approve).
	sc, err = h.m.Update(ctx, "acme", "bob", &agentplanev1.UpdateScheduleRequest{ScheduleId: "s", Spec: every(time.Minute), Task: template(map[string]string{"v": "2"})})
	if err != nil || sc.GetRunAs() != "bob" || sc.GetCreatedBy() != "alice" {
		t.Fatalf("Update of the template = %v, %v", sc, err)
	}
	h.clock.Advance(time.Minute)
	h.pass(t)
	if runs := h.runs(t, "s"); len(runs) != 4 || runs[3].GetCreatedBy() != "bob" || runs[3].GetLabels()["v"] != "2" {
		t.Fatalf("the run after the template changed: %v", runs[len(runs)-1])
	}

	// Delete, then create again under the same id: the new schedule's runs are new
	// tasks, not the old schedule's.
	if err := h.m.Delete(ctx, "acme", "s"); err != nil {
		t.Fatal(err)
	}
	_, err = h.m.Get(ctx, "acme", "s")
	wantReason(t, err, codes.NotFound, apierr.ReasonScheduleNotFound)
	h.clock.Advance(time.Minute)
	h.create(t, "s", every(time.Minute), policy(agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_ALLOW_ALL, 0))
	h.clock.Advance(time.Minute)
	h.pass(t)
	if n := len(h.runs(t, "s")); n != 5 {
		t.Fatalf("%d tasks after re-creating and one run, want 5", n)
	}
}

func wantReason(t *testing.T, err error, code codes.Code, reason apierr.Reason) {
	t.Helper()
	var e *apierr.Error
	if !errors.As(err, &e) || e.Code != code || e.Reason != reason {
		t.Fatalf("error %v, want %v %v", err, code, reason)
	}
}

func TestCreateRefuses(t *testing.T) { onBoth(t, testCreateRefuses) }

func testCreateRefuses(t *testing.T, b backend) {
	h := newHarnessOn(t, b, Config{MaxPerTenant: 2})
	req := func(id string) *agentplanev1.CreateScheduleRequest {
		return &agentplanev1.CreateScheduleRequest{ScheduleId: id, Spec: every(time.Minute), Task: template(nil)}
	}
	if _, _, err := h.m.Create(ctx, "acme", "alice", req("a")); err != nil {
		t.Fatal(err)
	}
	// The same request again is a retry; a different one under the id is refused.
	if _, created, err := h.m.Create(ctx, "acme", "alice", req("a")); err != nil || created {
		t.Fatalf("retried Create = %v, %v", created, err)
	}
	other := req("a")
	other.Paused = true
	_, _, err := h.m.Create(ctx, "acme", "alice", other)
	wantReason(t, err, codes.AlreadyExists, apierr.ReasonScheduleExists)
	if _, _, err := h.m.Create(ctx, "acme", "alice", req("b")); err != nil {
		t.Fatal(err)
	}
	_, _, err = h.m.Create(ctx, "acme", "alice", req("c"))
	wantReason(t, err, codes.ResourceExhausted, apierr.ReasonResourceExhausted)
	// Another tenant has its own bound and does not see acme's.
	if _, _, err := h.m.Create(ctx, "globex", "gina", req("a")); err != nil {
		t.Fatal(err)
	}
	_, err = h.m.Get(ctx, "globex", "b")
	wantReason(t, err, codes.NotFound, apierr.ReasonScheduleNotFound)

	bad := req("d")
	bad.Spec = cronSpec("0 25 * * *", "")
	_, _, err = h.m.Create(ctx, "globex", "gina", bad)
	wantReason(t, err, codes.InvalidArgument, apierr.ReasonScheduleInvalid)
	bad = req("d")
	bad.Task.RequestId = "mine"
	_, _, err = h.m.Create(ctx, "globex", "gina", bad)
	wantReason(t, err, codes.InvalidArgument, apierr.ReasonInvalidArgument)
	bad = req("d")
	bad.Task = template(map[string]string{"refuse": "yes"})
	_, _, err = h.m.Create(ctx, "globex", "gina", bad)
	wantReason(t, err, codes.InvalidArgument, apierr.ReasonSpecInvalid)
	bad = req("d")
	bad.Spec = &agentplanev1.ScheduleSpec{Kind: &agentplanev1.ScheduleSpec_At{At: timestamppb.New(base.Add(-time.Second))}}
	_, _, err = h.m.Create(ctx, "globex", "gina", bad)
	wantReason(t, err, codes.InvalidArgument, apierr.ReasonScheduleInvalid)
	_, _, err = h.m.Create(ctx, "globex", "gina", req("no/slash"))
	wantReason(t, err, codes.InvalidArgument, apierr.ReasonInvalidArgument)
}

// A run whose template no longer starts is FAILED with the reason, and the schedule
// goes on.
func TestFailedRunIsRecorded(t *testing.T) { onBoth(t, testFailedRunIsRecorded) }

func testFailedRunIsRecorded(t *testing.T, b backend) {
	h := newHarnessOn(t, b, Config{})
	h.create(t, "f", every(time.Minute), nil)
	// The template turns bad under the schedule (as a static agent removed from the
	// deployment would): written directly, past Update's check.
	if err := h.store.Update(ctx, func(w store.Writer) error {
		rec, err := w.GetSchedule("acme", "f")
		if err != nil {
			return err
		}
		rec.Task, rec.Revision = template(map[string]string{"refuse": "yes"}), rec.GetRevision()+1
		return w.PutSchedule(rec)
	}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(2 * time.Minute)
	h.pass(t)
	sc := h.get(t, "f")
	equal(t, "runs", outcomes(sc), []string{"FAILED@1m0s", "FAILED@2m0s"})
	if msg := sc.GetRecentRuns()[0].GetMessage(); msg == "" || sc.GetCounts().GetFailed() != 2 || sc.GetNextNominalTimes()[0].AsTime() != base.Add(3*time.Minute) {
		t.Fatalf("after failed runs: %v", sc)
	}
}

func TestListPages(t *testing.T) { onBoth(t, testListPages) }

func testListPages(t *testing.T, b backend) {
	h := newHarnessOn(t, b, Config{})
	for i := range 7 {
		h.create(t, fmt.Sprintf("s%d", i), every(time.Minute), nil)
	}
	var ids []string
	token := ""
	for {
		page, next, err := h.m.List(ctx, "acme", 3, token)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page {
			ids = append(ids, s.GetScheduleId())
		}
		if next == "" {
			break
		}
		token = next
	}
	equal(t, "listed", ids, []string{"s0", "s1", "s2", "s3", "s4", "s5", "s6"})
	_, _, err := h.m.List(ctx, "globex", 3, token)
	wantReason(t, err, codes.InvalidArgument, apierr.ReasonPageTokenInvalid)
}

// Two schedulers on one store (as replicas would be) racing over the same due
// schedules start each nominal time once.
func TestConcurrentSchedulersFireOnce(t *testing.T) { onBoth(t, testConcurrentSchedulersFireOnce) }

func testConcurrentSchedulersFireOnce(t *testing.T, b backend) {
	h := newHarnessOn(t, b, Config{})
	other, err := New(Options{Store: h.store, Tasks: h.tasks, Prepare: prepare, Clock: h.clock})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		h.create(t, fmt.Sprintf("r%d", i), every(time.Minute), policy(agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_ALLOW_ALL, 0))
	}
	for range 3 {
		h.clock.Advance(time.Minute)
		var wg sync.WaitGroup
		for _, m := range []*Manager{h.m, other} {
			wg.Add(1)
			go func() { defer wg.Done(); m.pass(ctx) }()
		}
		wg.Wait()
	}
	for i := range 20 {
		equal(t, "runs", nominals(h.runs(t, fmt.Sprintf("r%d", i))), []string{"1m0s", "2m0s", "3m0s"})
	}
}
