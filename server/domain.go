package server

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/agentplane/agentplane/gates"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/budget"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/console"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/hitl/approvals"
	"github.com/agentplane/agentplane/server/hitl/links"
	"github.com/agentplane/agentplane/server/schedules"
	"github.com/agentplane/agentplane/server/spec"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/boltstore"
	"github.com/agentplane/agentplane/server/store/pgstore"
	"github.com/agentplane/agentplane/server/tasks"
	"github.com/agentplane/agentplane/server/verdicts"
	"github.com/agentplane/agentplane/server/webhooks"
)

// domain is everything beneath the service layer, built once at New.
type domain struct {
	store domainStore
	// where names the store for people: the bbolt file, or the database without its
	// password.
	where     string
	tasks     *tasks.Manager
	specs     *spec.Validator
	decodes   *decodeGate
	static    map[string]*agentplanev1.AgentSpec
	compiler  *hitl.Compiler
	approvals *approvals.Service
	verdicts  *verdicts.Recorder
	webhooks  *webhooks.Service
	// budgets is the compiled budgets.* config; nil without budgets.
	budgets *budget.Budgets
	// links signs approval links (nil when no notification carries them).
	links     *links.Issuer
	schedules *schedules.Manager
}

// domainStore is the store with its health: the failure that makes it refuse writes
// until it recovers, or nil.
type domainStore interface {
	store.Store
	Health() error
}

// openStore opens the configured backend.
func (s *Server) openStore() (domainStore, error) {
	cfg := s.cfg
	if cfg.Store.Backend == config.BackendPostgres {
		pg := cfg.Store.Postgres
		ctx, cancel := context.WithTimeout(context.Background(), 2*pg.ConnectTimeout.D()+time.Minute)
		defer cancel()
		return pgstore.Open(ctx, pg.DSN, pgstore.Options{
			MaxConns:         pg.MaxConns,
			ConnectTimeout:   pg.ConnectTimeout.D(),
			StatementTimeout: pg.StatementTimeout.D(),
			Writers:          pg.WriteTransactions,
			MaxBatch:         cfg.Store.MaxBatch,
			PollInterval:     pg.PollInterval.D(),
			OnHealth:         s.storeHealth,
			Logger:           s.log,
		})
	}
	st, err := boltstore.Open(cfg.StorePath(), boltstore.Options{
		OpenTimeout:        cfg.Store.OpenTimeout.D(),
		MaxBatch:           cfg.Store.MaxBatch,
		WAL:                cfg.Store.WAL,
		CheckpointInterval: cfg.Store.CheckpointInterval.D(),
		CheckpointBytes:    cfg.Store.CheckpointBytes,
		Logger:             s.log,
		OnHealth:           s.storeHealth,
	})
	if errors.Is(err, boltstore.ErrLocked) {
		return nil, fmt.Errorf("data directory %s is in use by another agentplane process "+
			"(could not lock %s within %s); stop it or choose another --data-dir",
			cfg.DataDir, cfg.StorePath(), cfg.Store.OpenTimeout.D())
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// openDomain opens the store (failing fast when another process holds it) and builds
// the domain packages over it. It starts no goroutine.
func (s *Server) openDomain() (err error) {
	cfg := s.cfg
	d := &domain{}
	dep, err := spec.DeploymentFrom(&cfg)
	if err != nil {
		return err
	}
	d.static = dep.StaticAgents
	d.specs = spec.NewValidator(dep)
	gate := cfg.Limits.SpecDecodeBytes
	if gate == 0 {
		gate = 2 * cfg.Limits.MaxSpecBytes
	}
	d.decodes = newDecodeGate(gate)
	if d.store, err = s.openStore(); err != nil {
		return err
	}
	d.where = cfg.StorePath()
	if cfg.Store.Backend == config.BackendPostgres {
		d.where = "postgres " + pgstore.Redact(cfg.Store.Postgres.DSN)
	}
	s.domain = d // from here on closeAll closes the store
	s.metrics.registry.MustRegister(newStoreCollector(d.store.Stats, d.store.Health, d.store.Features()))
	if d.links, err = s.linkIssuer(); err != nil {
		return err
	}
	if d.webhooks, err = webhooks.New(webhooks.Options{
		Store: d.store, Config: cfg.Notifications, BaseDir: cfg.BaseDir(), Logger: s.log, Registerer: s.metrics.registry,
		Links: d.links, SlackButtons: cfg.HITL.Slack.Enabled(), Approvers: cfg.HITL.Approvers,
		A2APush: a2aPushFunc(&cfg),
	}); err != nil {
		return err
	}
	if d.budgets, err = budget.New(cfg.Budgets); err != nil {
		return err
	}
	if d.budgets != nil {
		s.metrics.registry.MustRegister(newBudgetCollector(d.budgets, d.store))
	}
	if d.tasks, err = tasks.New(tasks.Options{
		Store: d.store, Config: tasks.ConfigFrom(cfg), Logger: s.log, WrapWriter: d.webhooks.WrapWriter,
		Budgets: d.budgets, BudgetWarned: d.webhooks.BudgetWarned,
		CountFlow: s.metrics.countFlow, ObserveQueueWait: s.metrics.observeQueueWait,
	}); err != nil {
		return err
	}
	d.compiler = hitl.NewCompiler(0)
	if d.approvals, err = approvals.New(approvals.Options{
		Tasks:        d.tasks,
		Store:        d.store,
		Gate:         hitl.NewGate(d.compiler, gates.AlwaysGated),
		ValidateArgs: spec.ValidateArgs,
		Budgets:      d.budgets,
		Config:       approvals.ConfigFrom(cfg),
		Logger:       s.log,
	}); err != nil {
		return err
	}
	d.webhooks.SetInterruptView(d.approvals.View)
	d.verdicts = verdicts.NewRecorder(d.tasks)
	sc := cfg.Schedules
	if d.schedules, err = schedules.New(schedules.Options{
		Store: d.store, Tasks: d.tasks, Prepare: s.startParams, Logger: s.log, Registerer: s.metrics.registry,
		Config: schedules.Config{MaxPerTenant: sc.MaxPerTenant, RecentRuns: sc.RecentRuns, PollInterval: sc.PollInterval.D(),
			RecheckInterval: sc.RecheckInterval.D(), Concurrency: sc.Concurrency},
	}); err != nil {
		return err
	}
	if shared, ok := d.store.(store.Shared); ok {
		// Other replicas write to the same database: their commits wake this one's
		// watchers, long polls and AwaitDecision calls.
		shared.OnChange(func(c store.Change) {
			d.tasks.Changed(c)
			d.approvals.Changed(c)
		})
	}
	return nil
}

// linkIssuer loads (or makes) the key of approval links when a notification carries
// them: an email endpoint, or a webhook with approval_links_for.
func (s *Server) linkIssuer() (*links.Issuer, error) {
	n := s.cfg.Notifications
	needed := len(n.Emails) > 0
	for _, w := range n.Webhooks {
		needed = needed || len(w.ApprovalLinksFor) > 0
	}
	if !needed || n.ConsoleURL == "" {
		return nil, nil
	}
	keyFile := s.cfg.HITL.Links.KeyFile
	if keyFile == "" {
		keyFile = filepath.Join(s.cfg.DataDir, "hitl-links.key")
	} else if !filepath.IsAbs(keyFile) {
		keyFile = filepath.Join(s.cfg.BaseDir(), keyFile)
	}
	key, err := console.LoadKey(keyFile)
	if err != nil {
		return nil, fmt.Errorf("hitl.links.key_file: %w", err)
	}
	return &links.Issuer{Key: key, TTL: s.cfg.HITL.Links.TTL.D(), Base: n.ConsoleURL}, nil
}

// StoreLocation names the store the server opened: the bbolt file, or the PostgreSQL
// database without its password.
func (s *Server) StoreLocation() string { return s.domain.where }

// start runs the background loops: lease expiry, retention, interrupt deadlines.
func (d *domain) start() {
	d.tasks.StartMaintenance()
	d.approvals.Start()
	d.webhooks.Start()
	d.schedules.Start()
}

// close stops the loops and closes the store.
func (d *domain) close() error {
	if d.schedules != nil {
		d.schedules.Stop()
	}
	if d.webhooks != nil {
		d.webhooks.Stop()
	}
	if d.approvals != nil {
		d.approvals.Stop()
	}
	if d.tasks != nil {
		d.tasks.Stop()
	}
	return d.store.Close()
}
