package tasks

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/budget"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/flow"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/pagetoken"
)

// Config is what the task domain needs from the deployment's configuration.
type Config struct {
	// LeaseTTL is how long a lease lasts without a heartbeat.
	LeaseTTL time.Duration
	// MaxAttempts is how many leases in a row may be lost (expired, or failed with
	// retry) before the task fails.
	MaxAttempts int
	// MaxLeaseWait caps a runtime's long poll.
	MaxLeaseWait time.Duration
	// Retention is how long terminal tasks are kept; 0 keeps them.
	Retention time.Duration
	// PurgeInterval is how often retention runs.
	PurgeInterval time.Duration
	// MaxInputBytes bounds a task's input and a ContinueTask message.
	MaxInputBytes int64
	// MaxEventBytes bounds one reported event's encoded payload.
	MaxEventBytes int64
	// MaxEventsPerReport bounds the events of one ReportEvents call; 0 means no bound.
	MaxEventsPerReport int
	// MaxTaskHistoryBytes bounds the total encoded payload of a task's events.
	MaxTaskHistoryBytes int64
	// MaxTaskEvents bounds the number of a task's events.
	MaxTaskEvents int64
	// MaxLabels bounds a task's labels.
	MaxLabels int
	// MaxWatchBuffer is how many live events a watcher may have queued before it falls
	// back to reading the store.
	MaxWatchBuffer int
	// MaxListResponseBytes bounds the encoded tasks of one List page (a page holds at
	// least one task whatever its size).
	MaxListResponseBytes int64
	// StreamKeepalive is how often an idle watch sends a keepalive; 0 sends none.
	StreamKeepalive time.Duration
	// Flow is lease-time flow control: fairness between tenants, and per-queue
	// concurrency keys and rate limits (docs/api.md#flow-control).
	Flow config.Flow
}

// ConfigFrom takes the task domain's settings from the deployment configuration.
func ConfigFrom(c config.Config) Config {
	return Config{
		LeaseTTL:            c.Tasks.LeaseTTL.D(),
		MaxAttempts:         c.Tasks.MaxAttempts,
		MaxLeaseWait:        c.Tasks.MaxLeaseWait.D(),
		Retention:           c.Tasks.Retention.D(),
		PurgeInterval:       c.Tasks.PurgeInterval.D(),
		MaxInputBytes:       c.Limits.MaxInputBytes,
		MaxEventBytes:       c.Limits.MaxEventBytes,
		MaxEventsPerReport:  c.Limits.MaxEventsPerReport(),
		MaxTaskHistoryBytes: c.Limits.MaxTaskHistoryBytes,
		MaxTaskEvents:       c.Limits.MaxTaskEvents,
		MaxLabels:           c.Limits.MaxLabels,
		MaxWatchBuffer:      c.Limits.MaxWatchBuffer,

		MaxListResponseBytes: c.Limits.MaxListResponseBytes,
		StreamKeepalive:      c.Limits.StreamKeepaliveInterval.D(),
		Flow:                 c.Flow,
	}
}

func (c Config) validate() error {
	if c.LeaseTTL <= 0 || c.MaxAttempts < 1 || c.MaxLeaseWait < 0 || c.MaxInputBytes < 1 || c.MaxEventBytes < 1 || c.MaxEventsPerReport < 0 ||
		c.MaxTaskHistoryBytes < 1 || c.MaxTaskEvents < 1 || c.MaxLabels < 0 || c.MaxWatchBuffer < 1 || c.MaxListResponseBytes < 1 {
		return errors.New("tasks: config needs positive lease_ttl, max_attempts, limits and max_watch_buffer")
	}
	return nil
}

// Clock tells the time. Timestamps, lease deadlines and expiry use it; waiting (long
// polls, the maintenance ticker) uses real time.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now().UTC() }

// Options builds a Manager.
type Options struct {
	Store  store.Store
	Config Config
	// Clock defaults to the system clock.
	Clock Clock
	// Logger defaults to slog.Default.
	Logger *slog.Logger
	// WrapWriter, if set, wraps the writer of every task operation, so that writes
	// derived from a change (the webhook outbox) join the change's transaction.
	WrapWriter func(store.Writer) store.Writer
	// Budgets counts model usage as it is logged and refuses starts of a spent budget
	// (docs/budgets.md); nil: no budgets.
	Budgets *budget.Budgets
	// BudgetWarned, if set, is called in the transaction that took a budget to its
	// warning threshold (once per budget and period), after the task's BudgetWarning
	// event: writes it makes (the webhook outbox) join the transaction.
	BudgetWarned func(w store.Writer, taskID string, st *agentplanev1.BudgetStatus) error
	// CountFlow, if set, counts a flow-control outcome (FlowStartRefused,
	// FlowConcurrencyWait, FlowLeaseRateWait) of a queue, for metrics.
	CountFlow func(queue, what string)
	// ObserveQueueWait, if set, is told how long each leased task waited in its queue
	// (since it was last queued), for metrics.
	ObserveQueueWait func(queue string, wait time.Duration)
}

// Manager is the task domain. It is safe for concurrent use.
type Manager struct {
	store  store.Store
	cfg    Config
	clock  Clock
	log    *slog.Logger
	tokens *pagetoken.Codec
	hub    *hub
	// wrap is Options.WrapWriter, or nil.
	wrap func(store.Writer) store.Writer
	// budgets and budgetWarned are Options.Budgets and Options.BudgetWarned.
	budgets      *budget.Budgets
	budgetWarned func(w store.Writer, taskID string, st *agentplanev1.BudgetStatus) error
	// work is broadcast, per queue, after a commit that queued a task, waking the
	// long polls of that queue.
	work queueSignal

	// rrMu guards rrTenant, where the next lease scan starts (round-robin across
	// tenants). It is a fairness hint only.
	rrMu     sync.Mutex
	rrTenant string
	// fair is the weighted fair-share state of this replica (Config.Flow.Fairness
	// mode weighted), guarded by rrMu.
	fair fairShare
	// flow holds the compiled per-queue policies of Config.Flow.
	flow map[string]*queueFlow
	// taskKeys compiles the concurrency keys tasks name themselves.
	taskKeys flow.Cache
	// fairMu guards vclocks, this replica's view of the virtual times of the queues
	// that share leases between keys (fairTag).
	fairMu  sync.Mutex
	vclocks map[[2]string]vclock
	// onFlow and onWait are Options.CountFlow and ObserveQueueWait.
	onFlow func(queue, what string)
	onWait func(queue string, wait time.Duration)

	// endHooks are called after a commit that ended a task (OnTaskEnd); written
	// under hooksMu, read without a lock on every commit.
	hooksMu  sync.Mutex
	endHooks atomic.Pointer[[]EndHook]

	stopOnce sync.Once
	stop     context.CancelFunc
	loops    sync.WaitGroup
}

// EndHook is told that a task ended, after the commit that ended it: its tenant and
// id, and the decisions that resolved the interrupts still pending then (source
// TASK_ENDED; none when nothing was pending). It runs on the committing goroutine, so
// it must be quick and must not block or call back into the Manager.
type EndHook func(tenant, taskID string, resolved []*agentplanev1.Decision)

// OnTaskEnd adds h to the hooks called when a task ends, so that a domain above this
// one (approvals, whose waiters block on interrupts) learns of it without polling and
// without this package knowing it. Hooks run in the order added. Safe to call at any
// time; a hook added late misses the tasks that ended before.
func (m *Manager) OnTaskEnd(h EndHook) {
	m.hooksMu.Lock()
	defer m.hooksMu.Unlock()
	var hooks []EndHook
	if old := m.endHooks.Load(); old != nil {
		hooks = append(hooks, *old...)
	}
	hooks = append(hooks, h)
	m.endHooks.Store(&hooks)
}

// taskEnded calls the end hooks.
func (m *Manager) taskEnded(tenant, taskID string, resolved []*agentplanev1.Decision) {
	if hooks := m.endHooks.Load(); hooks != nil {
		for _, h := range *hooks {
			h(tenant, taskID, resolved)
		}
	}
}

// New returns a Manager over the store. It starts no goroutines; call
// StartMaintenance for lease expiry and retention.
func New(opts Options) (*Manager, error) {
	if opts.Store == nil {
		return nil, errors.New("tasks: Options.Store is required")
	}
	if err := opts.Config.validate(); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = systemClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	flows, err := compileFlow(opts.Config.Flow)
	if err != nil {
		return nil, err
	}
	return &Manager{
		flow:   flows,
		onFlow: opts.CountFlow,
		onWait: opts.ObserveQueueWait,
		store:  opts.Store,
		cfg:    opts.Config,
		clock:  opts.Clock,
		log:    opts.Logger,
		tokens: pagetoken.New(opts.Store.TokenKey()),
		hub:    newHub(),
		wrap:   opts.WrapWriter,
		stop:   func() {},

		budgets:      opts.Budgets,
		budgetWarned: opts.BudgetWarned,
	}, nil
}

// idEncoding is base32 with an alphabet in ASCII order, so ids sort like their bytes.
var idEncoding = base32.HexEncoding.WithPadding(base32.NoPadding)

// newID returns a 26-character id: 48 bits of Unix milliseconds, then 80 random bits.
// Ids of things created later sort later, so new tasks, their specs and their events
// land at the end of their buckets instead of dirtying a random page each: fewer pages
// per commit, and listings read neighbouring pages.
func newID() string { return newIDAt(time.Now()) }

// NewIDAt is the id of a thing (a task, an event's task) created at t, as the control
// plane makes them: for tools that write a store directly (tools/millionstore).
func NewIDAt(t time.Time) string { return newIDAt(t) }

func newIDAt(t time.Time) string {
	b := idBytes(t)
	return encodeID(b[:])
}

func idBytes(t time.Time) [16]byte {
	var b [16]byte
	ms := uint64(t.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	_, _ = rand.Read(b[6:]) // never fails (crypto/rand panics rather than return an error)
	return b
}

func encodeID(b []byte) string { return strings.ToLower(idEncoding.EncodeToString(b)) }

// lastTaskID is the newest id newTaskID returned.
var lastTaskID struct {
	mu sync.Mutex
	b  [16]byte
}

// newTaskID is newID made strictly increasing within the process: an id that would
// not sort after the previous one (the same millisecond, or a clock stepped back) is
// the previous one plus one. The run queue orders tasks queued at the same instant
// by id, so this makes it FIFO by start also when the clock does not tell the
// starts apart. Only task ids are made this way: lease ids must stay unguessable.
func newTaskID() string {
	b := idBytes(time.Now())
	lastTaskID.mu.Lock()
	defer lastTaskID.mu.Unlock()
	if bytes.Compare(b[:], lastTaskID.b[:]) <= 0 {
		b = lastTaskID.b
		for i := len(b) - 1; i >= 0; i-- {
			if b[i]++; b[i] != 0 {
				break
			}
		}
	}
	lastTaskID.b = b
	return encodeID(b[:])
}
