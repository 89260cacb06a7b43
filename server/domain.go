package server

import (
	"errors"
	"fmt"

	"github.com/agentplane/agentplane/gates"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/hitl/approvals"
	"github.com/agentplane/agentplane/server/spec"
	"github.com/agentplane/agentplane/server/store/boltstore"
	"github.com/agentplane/agentplane/server/tasks"
	"github.com/agentplane/agentplane/server/verdicts"
)

// domain is everything beneath the service layer, built once at New.
type domain struct {
	store     *boltstore.Store
	tasks     *tasks.Manager
	specs     *spec.Validator
	decodes   *decodeGate
	static    map[string]*agentplanev1.AgentSpec
	compiler  *hitl.Compiler
	approvals *approvals.Service
	verdicts  *verdicts.Recorder
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
	d.store, err = boltstore.Open(cfg.StorePath(), boltstore.Options{
		OpenTimeout:        cfg.Store.OpenTimeout.D(),
		MaxBatch:           cfg.Store.MaxBatch,
		WAL:                cfg.Store.WAL,
		CheckpointInterval: cfg.Store.CheckpointInterval.D(),
		CheckpointBytes:    cfg.Store.CheckpointBytes,
		Logger:             s.log,
		OnHealth:           s.storeHealth,
	})
	if errors.Is(err, boltstore.ErrLocked) {
		return fmt.Errorf("data directory %s is in use by another agentplane process "+
			"(could not lock %s within %s); stop it or choose another --data-dir",
			cfg.DataDir, cfg.StorePath(), cfg.Store.OpenTimeout.D())
	}
	if err != nil {
		return err
	}
	s.domain = d // from here on closeAll closes the store
	s.metrics.registry.MustRegister(newStoreCollector(d.store.Stats, d.store.Health))
	if d.tasks, err = tasks.New(tasks.Options{Store: d.store, Config: tasks.ConfigFrom(cfg), Logger: s.log}); err != nil {
		return err
	}
	d.compiler = hitl.NewCompiler(0)
	if d.approvals, err = approvals.New(approvals.Options{
		Tasks:        d.tasks,
		Store:        d.store,
		Gate:         hitl.NewGate(d.compiler, gates.AlwaysGated),
		ValidateArgs: spec.ValidateArgs,
		Config:       approvals.ConfigFrom(cfg),
		Logger:       s.log,
	}); err != nil {
		return err
	}
	d.verdicts = verdicts.NewRecorder(d.tasks)
	return nil
}

// start runs the background loops: lease expiry, retention, interrupt deadlines.
func (d *domain) start() {
	d.tasks.StartMaintenance()
	d.approvals.Start()
}

// close stops the loops and closes the store.
func (d *domain) close() error {
	if d.approvals != nil {
		d.approvals.Stop()
	}
	if d.tasks != nil {
		d.tasks.Stop()
	}
	return d.store.Close()
}
