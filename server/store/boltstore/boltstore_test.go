package boltstore

import (
	"path/filepath"
	"testing"

	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/storetest"
)

func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "agentplane.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t) })
}
