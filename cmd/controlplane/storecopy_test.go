package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/boltstore"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
	"github.com/agentplane/agentplane/server/store/storetest"
)

// TestStoreCopyCommand runs `controlplane store copy` from a bbolt file to a fresh
// PostgreSQL database and reads its report of the copy and the comparison.
func TestStoreCopyCommand(t *testing.T) {
	file := filepath.Join(t.TempDir(), "agentplane.db")
	src, err := boltstore.Open(file, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Update(context.Background(), func(w store.Writer) error {
		return w.PutTask(storetest.Task("acme", "t1", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)))
	}); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	dsn := pgtest.DSN(t)
	var out, errOut bytes.Buffer
	if code := run([]string{"store", "copy", "--from", "bolt:" + file, "--to", "postgres:" + dsn}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "1 tasks") || !strings.Contains(out.String(), "compared: every record") {
		t.Fatalf("output: %s", out.String())
	}
	if code := run([]string{"store", "copy", "--from", "bolt:" + file, "--to", "postgres:" + dsn}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "already has tasks") {
		t.Fatalf("second copy: exit %d: %s", code, errOut.String())
	}
}
