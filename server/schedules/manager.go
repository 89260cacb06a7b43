package schedules

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/pagetoken"
	"github.com/agentplane/agentplane/server/store/schema"
	"github.com/agentplane/agentplane/server/tasks"
)

// Config bounds and paces schedules (config section schedules).
type Config struct {
	// MaxPerTenant is the most schedules a tenant may have.
	MaxPerTenant int
	// RecentRuns is how many runs a schedule keeps.
	RecentRuns int
	// PollInterval is the longest the scheduler sleeps: how soon it sees a schedule
	// that another replica created or changed.
	PollInterval time.Duration
	// RecheckInterval is how often a buffered run (BUFFER_ONE) checks whether the
	// previous run has ended.
	RecheckInterval time.Duration
	// Concurrency is how many fires run at once.
	Concurrency int
}

// DefaultConfig is the configuration of a deployment that sets none.
func DefaultConfig() Config {
	return Config{MaxPerTenant: 1000, RecentRuns: 20, PollInterval: time.Second, RecheckInterval: time.Second, Concurrency: 16}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxPerTenant <= 0 {
		c.MaxPerTenant = d.MaxPerTenant
	}
	if c.RecentRuns <= 0 {
		c.RecentRuns = d.RecentRuns
	}
	if c.PollInterval <= 0 {
		c.PollInterval = d.PollInterval
	}
	if c.RecheckInterval <= 0 {
		c.RecheckInterval = d.RecheckInterval
	}
	if c.Concurrency <= 0 {
		c.Concurrency = d.Concurrency
	}
	return c
}

// PrepareFunc turns a schedule's task template into the parameters of a start, as
// StartTask would for principal of tenant: the spec validated and resolved, the
// gates applied, the interrupt policy compiled. Its errors are the caller's (an
// apierr.Error saying what is wrong with the template).
type PrepareFunc func(ctx context.Context, tenant, principal string, req *agentplanev1.StartTaskRequest) (tasks.StartParams, error)

// Options builds a Manager.
type Options struct {
	Store   store.Store
	Tasks   *tasks.Manager
	Prepare PrepareFunc
	Config  Config
	// Clock defaults to the system clock; waiting uses real time.
	Clock tasks.Clock
	// Logger defaults to slog.Default.
	Logger *slog.Logger
	// Registerer, when set, gets the scheduler's metrics.
	Registerer prometheus.Registerer
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now().UTC() }

// Manager is the schedule domain. It is safe for concurrent use.
type Manager struct {
	store   store.Store
	tasks   *tasks.Manager
	prepare PrepareFunc
	cfg     Config
	clock   tasks.Clock
	log     *slog.Logger
	tokens  *pagetoken.Codec

	runs     *prometheus.CounterVec
	lateness prometheus.Histogram

	// onFire, when set (benchmarks), is told each scheduled run's lateness at commit.
	onFire func(time.Duration)

	// poke wakes the loop after a local write that may move a wake time earlier.
	poke chan struct{}

	stopOnce sync.Once
	stop     context.CancelFunc
	loops    sync.WaitGroup
}

// New returns a Manager. It starts no goroutine; Start runs the scheduler.
func New(o Options) (*Manager, error) {
	if o.Store == nil || o.Tasks == nil || o.Prepare == nil {
		return nil, errors.New("schedules: Options.Store, Tasks and Prepare are required")
	}
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	m := &Manager{
		store: o.Store, tasks: o.Tasks, prepare: o.Prepare, cfg: o.Config.withDefaults(), clock: o.Clock, log: o.Logger,
		tokens: pagetoken.New(o.Store.TokenKey()), poke: make(chan struct{}, 1), stop: func() {},
	}
	m.runs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "agentplane", Name: "schedule_runs_total",
		Help: "Schedule runs, by outcome: started, skipped (overlap policy), buffered, missed (nominal times beyond the catch-up window, counted each), failed (the task could not be started; the schedule's recent_runs say why).",
	}, []string{"outcome"})
	m.lateness = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "agentplane", Name: "schedule_fire_lateness_seconds",
		Help:    "How long after its fire time (nominal time plus jitter) a scheduled run's task was committed. A growing tail means the scheduler or the store cannot keep up.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
	})
	if o.Registerer != nil {
		o.Registerer.MustRegister(m.runs, m.lateness)
	}
	return m, nil
}

// View says how much of a schedule to show.
type View int

// Views.
const (
	// ViewFull has every recent run.
	ViewFull View = iota
	// ViewList has the newest run only.
	ViewList
)

const (
	maxReasonBytes   = 1024
	maxRequestID     = 128
	nextTimesShown   = 5
	requestIDPrefix  = "schedule:"
	maxMissedCounted = 100000
)

// ReservedRequestID reports whether a StartTask request id is in the space of the
// ids derived for schedule runs, which callers may not use.
func ReservedRequestID(id string) bool {
	return len(id) >= len(requestIDPrefix) && id[:len(requestIDPrefix)] == requestIDPrefix
}

func invalid(field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return apierr.InvalidArgument(apierr.ReasonScheduleInvalid, "%s: %s", field, msg).
		WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: msg}}})
}

func fieldError(err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return invalid(fe.Field, "%s", fe.Message)
	}
	return err
}

// CheckID refuses a schedule id that is not 1 to 64 letters, digits, '.', '_' and
// '-', starting with a letter or digit.
func CheckID(id string) error {
	if !schema.ValidQueueName(id) {
		return apierr.InvalidArgument(apierr.ReasonInvalidArgument,
			"schedule_id %q must be 1 to %d letters, digits, '.', '_' and '-', starting with a letter or digit", id, schema.MaxQueueName)
	}
	return nil
}

// checkTemplate checks a task template and prepares it, so that a template that
// StartTask would refuse never becomes a schedule.
func (m *Manager) checkTemplate(ctx context.Context, tenant, principal string, t *agentplanev1.StartTaskRequest) error {
	if t == nil {
		return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "task is required: the StartTaskRequest each run starts")
	}
	if t.GetRequestId() != "" {
		return apierr.InvalidArgument(apierr.ReasonInvalidArgument,
			"task.request_id must be empty: each run's request id is derived from the schedule and the run's nominal time")
	}
	p, err := m.prepare(ctx, tenant, principal, t)
	if err != nil {
		return err
	}
	return m.tasks.CheckStart(&p)
}

// checkFuture refuses a one-shot time that has passed: it would never fire.
func (m *Manager) checkFuture(s *agentplanev1.ScheduleSpec) error {
	if at := s.GetAt(); at != nil && !at.AsTime().After(m.clock.Now()) {
		return invalid("spec.at", "%s has passed; a one-shot schedule needs a time to come", at.AsTime().Format(time.RFC3339))
	}
	return nil
}

// Create stores a new schedule (see ScheduleService.CreateSchedule).
func (m *Manager) Create(ctx context.Context, tenant, principal string, req *agentplanev1.CreateScheduleRequest) (*agentplanev1.Schedule, bool, error) {
	id := req.GetScheduleId()
	if err := CheckID(id); err != nil {
		return nil, false, err
	}
	if req.GetSpec() == nil {
		return nil, false, invalid("spec", "is required: give one of cron, interval and at")
	}
	spec, err := Compile(req.GetSpec())
	if err != nil {
		return nil, false, fieldError(err)
	}
	if err := m.checkFuture(req.GetSpec()); err != nil {
		return nil, false, err
	}
	if err := CheckPolicy(req.GetPolicy()); err != nil {
		return nil, false, fieldError(err)
	}
	if err := m.checkTemplate(ctx, tenant, principal, req.GetTask()); err != nil {
		return nil, false, err
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	digest := sha256.Sum256(b)
	now := m.clock.Now()
	rec := &storagev1.ScheduleRecord{
		Tenant: tenant, ScheduleId: id, Spec: req.GetSpec(), Policy: req.GetPolicy(), Task: req.GetTask(),
		Paused: req.GetPaused(), CreateTime: timestamppb.New(now), UpdateTime: timestamppb.New(now), CreatedBy: principal, RunAs: principal,
		Revision: 1, CreateDigest: digest[:], Counts: &agentplanev1.ScheduleCounts{},
	}
	if n, ok := spec.Next(now); ok {
		rec.NextNominalTime = timestamppb.New(n)
	}
	m.setWake(rec, spec, now)
	var out *storagev1.ScheduleRecord
	created := false
	err = m.store.Update(ctx, func(w store.Writer) error {
		out, created = nil, false
		old, err := w.GetSchedule(tenant, id)
		if err != nil && !store.IsNotFound(err) {
			return err
		}
		if old != nil {
			if !bytes.Equal(old.GetCreateDigest(), rec.GetCreateDigest()) {
				return apierr.New(codes.AlreadyExists, apierr.ReasonScheduleExists,
					"schedule %q already exists and is not this one; choose another id, or update it", id)
			}
			out = old
			return nil
		}
		n, err := w.ScheduleCount(tenant)
		if err != nil {
			return err
		}
		if n >= int64(m.cfg.MaxPerTenant) {
			return apierr.ResourceExhausted("tenant %s has %d schedules, the most schedules.max_per_tenant allows; delete one first", tenant, n)
		}
		out, created = rec, true
		return w.PutSchedule(rec)
	})
	if err != nil {
		return nil, false, err
	}
	if created {
		m.wakeUp()
	}
	return m.toAPI(out, ViewFull), created, nil
}

// Get returns a schedule.
func (m *Manager) Get(ctx context.Context, tenant, id string) (*agentplanev1.Schedule, error) {
	var rec *storagev1.ScheduleRecord
	err := m.store.View(ctx, func(r store.Reader) error {
		var err error
		rec, err = r.GetSchedule(tenant, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return m.toAPI(rec, ViewFull), nil
}

// List returns a page of the tenant's schedules in id order.
func (m *Manager) List(ctx context.Context, tenant string, pageSize int32, token string) ([]*agentplanev1.Schedule, string, error) {
	size, err := pagetoken.PageSize(pageSize)
	if err != nil {
		return nil, "", err
	}
	scope := pagetoken.Scope("schedules", tenant)
	after, err := m.tokens.Open(scope, token)
	if err != nil {
		return nil, "", err
	}
	var out []*agentplanev1.Schedule
	var next string
	err = m.store.View(ctx, func(r store.Reader) error {
		out, next = nil, ""
		return r.ScanSchedules(tenant, string(after), func(rec *storagev1.ScheduleRecord) (bool, error) {
			if len(out) == size {
				next = m.tokens.Seal(scope, []byte(out[len(out)-1].GetScheduleId()))
				return false, nil
			}
			out = append(out, m.toAPI(rec, ViewList))
			return true, nil
		})
	})
	return out, next, err
}

// modify changes a schedule under its lock in one transaction: fn edits the record
// (returning false when there is nothing to write); the revision and update time
// follow.
func (m *Manager) modify(ctx context.Context, tenant, id string, fn func(rec *storagev1.ScheduleRecord, now time.Time) (bool, error)) (*agentplanev1.Schedule, error) {
	now := m.clock.Now()
	var out *storagev1.ScheduleRecord
	err := m.store.Update(ctx, func(w store.Writer) error {
		rec, err := w.GetSchedule(tenant, id)
		if err != nil {
			return err
		}
		out = rec
		changed, err := fn(rec, now)
		if err != nil || !changed {
			return err
		}
		rec.Revision++
		rec.UpdateTime = timestamppb.New(now)
		return w.PutSchedule(rec)
	})
	if err != nil {
		return nil, err
	}
	m.wakeUp()
	return m.toAPI(out, ViewFull), nil
}

// Update replaces the spec, the policy and/or the template of a schedule.
func (m *Manager) Update(ctx context.Context, tenant, principal string, req *agentplanev1.UpdateScheduleRequest) (*agentplanev1.Schedule, error) {
	var spec *Spec
	if s := req.GetSpec(); s != nil {
		var err error
		if spec, err = Compile(s); err != nil {
			return nil, fieldError(err)
		}
		if err := m.checkFuture(s); err != nil {
			return nil, err
		}
	}
	if p := req.GetPolicy(); p != nil {
		if err := CheckPolicy(p); err != nil {
			return nil, fieldError(err)
		}
	}
	if t := req.GetTask(); t != nil {
		if err := m.checkTemplate(ctx, tenant, principal, t); err != nil {
			return nil, err
		}
	}
	return m.modify(ctx, tenant, req.GetScheduleId(), func(rec *storagev1.ScheduleRecord, now time.Time) (bool, error) {
		if r := req.GetExpectedRevision(); r != 0 && r != rec.GetRevision() {
			return false, apierr.FailedPrecondition(apierr.ReasonScheduleRevision,
				"schedule %q is at revision %d, not %d: read it again and reapply the change", rec.GetScheduleId(), rec.GetRevision(), r)
		}
		if req.GetPolicy() != nil {
			rec.Policy = req.GetPolicy()
		}
		if req.GetTask() != nil {
			rec.Task, rec.RunAs = req.GetTask(), principal
		}
		cur := spec
		if cur == nil {
			var err error
			if cur, err = Compile(rec.GetSpec()); err != nil {
				return false, err
			}
		} else {
			rec.Spec = req.GetSpec()
			rec.NextNominalTime = nil
			if n, ok := cur.Next(now); ok {
				rec.NextNominalTime = timestamppb.New(n)
			}
		}
		m.setWake(rec, cur, now)
		return true, nil
	})
}

// Pause stops a schedule from firing.
func (m *Manager) Pause(ctx context.Context, tenant, id, reason string) (*agentplanev1.Schedule, error) {
	if len(reason) > maxReasonBytes || !utf8.ValidString(reason) {
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "reason must be UTF-8 of at most %d bytes", maxReasonBytes)
	}
	return m.modify(ctx, tenant, id, func(rec *storagev1.ScheduleRecord, _ time.Time) (bool, error) {
		if rec.GetPaused() && rec.GetPauseReason() == reason {
			return false, nil
		}
		rec.Paused, rec.PauseReason, rec.WakeTime = true, reason, nil
		return true, nil
	})
}

// Resume lets a paused schedule fire again, from now on.
func (m *Manager) Resume(ctx context.Context, tenant, id string) (*agentplanev1.Schedule, error) {
	return m.modify(ctx, tenant, id, func(rec *storagev1.ScheduleRecord, now time.Time) (bool, error) {
		if !rec.GetPaused() {
			return false, nil
		}
		spec, err := Compile(rec.GetSpec())
		if err != nil {
			return false, err
		}
		rec.Paused, rec.PauseReason = false, ""
		// What passed while paused is not caught up.
		if n := rec.GetNextNominalTime(); n != nil && n.AsTime().Before(now) {
			rec.NextNominalTime = nil
			if next, ok := spec.Next(now); ok {
				rec.NextNominalTime = timestamppb.New(next)
			}
		}
		m.setWake(rec, spec, now)
		return true, nil
	})
}

// Delete removes a schedule.
func (m *Manager) Delete(ctx context.Context, tenant, id string) error {
	return m.store.Update(ctx, func(w store.Writer) error { return w.DeleteSchedule(tenant, id) })
}

// Trigger runs a schedule now (see ScheduleService.TriggerSchedule).
func (m *Manager) Trigger(ctx context.Context, tenant, id, requestID string) (*agentplanev1.ScheduleRun, *agentplanev1.Task, error) {
	if len(requestID) > maxRequestID || !utf8.ValidString(requestID) {
		return nil, nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "request_id must be UTF-8 of at most %d bytes", maxRequestID)
	}
	// The template is prepared outside the transaction, from the schedule as read;
	// when the schedule changes meanwhile, it is read and prepared again.
	for range 5 {
		var rec *storagev1.ScheduleRecord
		if err := m.store.View(ctx, func(r store.Reader) error {
			var err error
			rec, err = r.GetSchedule(tenant, id)
			return err
		}); err != nil {
			return nil, nil, err
		}
		prep := m.prepareRun(ctx, rec)
		now := m.clock.Now()
		taskID := tasks.NewTaskID()
		var run *agentplanev1.ScheduleRun
		var task *agentplanev1.Task
		stale := false
		err := m.store.Update(ctx, func(w store.Writer) error {
			run, task, stale = nil, nil, false
			cur, err := w.GetSchedule(tenant, id)
			if err != nil {
				return err
			}
			if cur.GetRevision() != rec.GetRevision() {
				stale = true
				return nil
			}
			key := requestID
			if key == "" {
				key = "t" + strconv.FormatInt(now.UnixNano(), 10)
			}
			var replay bool
			run, task, replay, err = m.run(w, cur, prep, now, now, true, key, taskID)
			if err != nil || replay {
				return err
			}
			m.record(cur, run)
			m.setWake(cur, prep.spec, now)
			cur.Revision++
			cur.UpdateTime = timestamppb.New(now)
			return w.PutSchedule(cur)
		})
		if err != nil {
			return nil, nil, err
		}
		if !stale {
			m.counted(run, now, false)
			m.wakeUp()
			return run, task, nil
		}
	}
	return nil, nil, apierr.FailedPrecondition(apierr.ReasonScheduleRevision, "schedule %q kept changing while it was triggered; try again", id)
}

func (m *Manager) taskView(r store.Reader, tenant, taskID string) (*agentplanev1.Task, error) {
	t, err := m.tasks.GetIn(r, tenant, taskID)
	if store.IsNotFound(err) {
		return nil, nil // purged since
	}
	return t, err
}
