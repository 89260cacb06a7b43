package server

import (
	"errors"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/agentplane/agentplane/server/config"
)

// storeHandle is the open store. It is a placeholder until the durable store lands
// (issue 4): it takes the file lock so that a second process fails fast.
type storeHandle struct {
	db *bolt.DB
}

// openStore creates the data directory and opens the bbolt file, failing after
// cfg.Store.OpenTimeout when another process holds its lock.
func openStore(cfg config.Config) (*storeHandle, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", cfg.DataDir, err)
	}
	db, err := bolt.Open(cfg.StorePath(), 0o600, &bolt.Options{Timeout: cfg.Store.OpenTimeout.D()})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("data directory %s is in use by another agentplane process "+
			"(could not lock %s within %s); stop it or choose another --data-dir",
			cfg.DataDir, cfg.StorePath(), cfg.Store.OpenTimeout.D())
	}
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", cfg.StorePath(), err)
	}
	return &storeHandle{db: db}, nil
}

// Close closes the file.
func (h *storeHandle) Close() error { return h.db.Close() }
