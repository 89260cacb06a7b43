// Package pgtest gives tests a fresh PostgreSQL database of their own.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// AdminDSN is the server tests connect to for creating databases: the environment's
// AGENTPLANE_TEST_POSTGRES, else the local PostgreSQL with trust authentication.
func AdminDSN() string {
	if dsn := os.Getenv("AGENTPLANE_TEST_POSTGRES"); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// DSN creates an empty database for t, drops it when t ends, and returns its DSN.
// Where PostgreSQL is not reachable the test is skipped with a loud message, except
// under CI=true, where it fails.
func DSN(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin := AdminDSN()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		msg := "*** PostgreSQL is not reachable at " + admin + " (" + err.Error() + "); " +
			"start it (pg_ctlcluster 15 main start) or set AGENTPLANE_TEST_POSTGRES ***"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	defer conn.Close(context.Background())
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "agentplane_test_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("dropping database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil || u.Scheme == "" {
		return admin + " dbname=" + name
	}
	u.Path = "/" + name
	return u.String()
}

// AdminAddr is the host:port of AdminDSN, for a Proxy.
func AdminAddr(t testing.TB) string {
	t.Helper()
	u, err := url.Parse(AdminDSN())
	if err != nil || u.Host == "" {
		t.Fatalf("pgtest: AGENTPLANE_TEST_POSTGRES must be a URL with a host for this test, got %q", AdminDSN())
	}
	return u.Host
}
