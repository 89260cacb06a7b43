package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"

	"github.com/agentplane/agentplane/server/apierr"
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

// TestReplicasMigrateOnce opens the same empty database from several stores at once:
// the advisory lock lets one apply each migration and the others find it done.
func TestReplicasMigrateOnce(t *testing.T) {
	dsn := pgtest.DSN(t)
	const n = 4
	errs := make(chan error, n)
	stores := make(chan *pgstore.Store, n)
	for range n {
		go func() {
			s, err := pgstore.Open(context.Background(), dsn, pgstore.Options{MaxConns: 2})
			errs <- err
			stores <- s
		}()
	}
	var keys [][]byte
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("Open: %v", err)
		}
		s := <-stores
		keys = append(keys, s.TokenKey())
		t.Cleanup(func() { _ = s.Close() })
	}
	for _, k := range keys[1:] {
		if !bytes.Equal(k, keys[0]) || len(k) < 16 {
			t.Fatalf("replicas got different page-token keys: %x", keys)
		}
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var count, max int
	if err := conn.QueryRow(context.Background(), "SELECT count(*), max(version) FROM agentplane_schema").Scan(&count, &max); err != nil {
		t.Fatal(err)
	}
	if count != pgstore.Version || max != pgstore.Version {
		t.Fatalf("agentplane_schema has %d rows up to %d, want each of 1..%d once", count, max, pgstore.Version)
	}
}

// TestNewerSchemaRefused: a database migrated by a newer binary is refused with
// STORE_SCHEMA_MISMATCH, and left as it is.
func TestNewerSchemaRefused(t *testing.T) {
	dsn := pgtest.DSN(t)
	open(t, dsn).Close()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "INSERT INTO agentplane_schema (version) VALUES ($1)", pgstore.Version+1); err != nil {
		t.Fatal(err)
	}
	_, err = pgstore.Open(context.Background(), dsn, pgstore.Options{})
	var e *apierr.Error
	if !errors.As(err, &e) || e.Code != codes.FailedPrecondition || e.Reason != apierr.ReasonStoreSchemaMismatch {
		t.Fatalf("Open of a newer schema = %v, want FAILED_PRECONDITION STORE_SCHEMA_MISMATCH", err)
	}
}

// TestLeasersSkipEachOther: two Updates leasing from one queue at once each take a
// different task (FOR UPDATE SKIP LOCKED) instead of both taking the first.
func TestLeasersSkipEachOther(t *testing.T) {
	s := open(t, pgtest.DSN(t))
	defer s.Close()
	ctx := context.Background()
	if err := s.Update(ctx, func(w store.Writer) error {
		for i, id := range []string{"a", "b"} {
			rec := storetest.Task("acme", id, time.Unix(int64(i), 0))
			rec.QueueTime = rec.GetCreateTime()
			if err := w.PutTask(rec); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// take leases the first queued task it can lock; the first caller holds its
	// transaction open until the second has taken one.
	took := make(chan string, 2)
	hold := make(chan struct{})
	take := func(ctx context.Context, wait bool) error {
		return s.Update(ctx, func(w store.Writer) error {
			var id string
			if err := w.ScanQueue("acme", "", store.IndexRange{}, func(e store.IndexEntry) (bool, error) {
				id = e.ID
				return false, nil
			}); err != nil {
				return err
			}
			rec, err := w.GetTask("acme", id)
			if err != nil {
				return err
			}
			rec.QueueTime = nil
			if err := w.PutTask(rec); err != nil {
				return err
			}
			took <- id
			if wait {
				<-hold
			}
			return nil
		})
	}
	first := make(chan error, 1)
	go func() { first <- take(ctx, true) }()
	a := <-took
	// Bounded: a leaser that waited for the first one's lock would wait forever.
	second, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := take(second, false); err != nil {
		close(hold)
		t.Fatal(err)
	}
	b := <-took
	close(hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatalf("both leasers took %s", a)
	}
}
