package pgstore_test

import (
	"context"
	"testing"

	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/pgstore"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
	"github.com/agentplane/agentplane/server/store/storetest"
)

func open(t *testing.T, dsn string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), dsn, pgstore.Options{MaxConns: 8})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// TestConformance runs the store suite, each case on a database of its own.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, pgtest.DSN(t)) })
}
