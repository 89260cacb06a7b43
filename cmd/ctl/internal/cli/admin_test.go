package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

func TestAdminBackup(t *testing.T) {
	chunks := [][]byte{bytes.Repeat([]byte{1}, 1000), bytes.Repeat([]byte{2}, 24)}
	for _, tc := range []struct {
		name     string
		total    int64
		chunks   [][]byte
		existing string // content of FILE before the backup
		wantErr  string
	}{
		{name: "complete", total: 1024, chunks: chunks},
		{name: "replaces an older backup", total: 1024, chunks: chunks, existing: "old"},
		{name: "cut short", total: 4096, chunks: chunks, existing: "old", wantErr: "backup stream ended after 1024 of 4096 bytes"},
		{name: "empty", chunks: nil, wantErr: "empty backup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeCP{backup: tc.chunks, backupTotal: tc.total}
			addr := startFakeCP(t, f)
			path := filepath.Join(t.TempDir(), "agentplane.db")
			if tc.existing != "" {
				if err := os.WriteFile(path, []byte(tc.existing), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			code, out, errOut := runCtl(t, addr, "admin", "backup", path)
			if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
				t.Errorf("the temporary file was left behind: %v", err)
			}
			got, readErr := os.ReadFile(path)
			if tc.wantErr != "" {
				if code != exitFailed || !strings.Contains(errOut, tc.wantErr) {
					t.Fatalf("exit %d stderr %q", code, errOut)
				}
				if tc.existing != "" && string(got) != tc.existing {
					t.Fatalf("a failed backup changed the file: %q", got)
				}
				if tc.existing == "" && !os.IsNotExist(readErr) {
					t.Fatalf("a failed backup left a file: %v", readErr)
				}
				return
			}
			if code != 0 || out != "wrote 1024 bytes to "+path+"\n" {
				t.Fatalf("exit %d out %q err %q", code, out, errOut)
			}
			if !bytes.Equal(got, bytes.Join(tc.chunks, nil)) {
				t.Fatalf("backup content differs (%d bytes)", len(got))
			}
		})
	}
}

func TestAdminBackupJSON(t *testing.T) {
	f := &fakeCP{backup: [][]byte{[]byte("bbolt")}, backupTotal: 5}
	addr := startFakeCP(t, f)
	path := filepath.Join(t.TempDir(), "b.db")
	code, out, _ := runCtl(t, addr, "admin", "backup", path, "-o", "json")
	var doc struct {
		File  string
		Bytes float64
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || doc.File != path || doc.Bytes != 5 {
		t.Fatalf("exit %d out %q", code, out)
	}
}

func TestAdminStatsAndPurge(t *testing.T) {
	f := &fakeCP{
		stats: &agentplanev1.GetStatsResponse{
			ServerVersion: "v1.2.3", Uptime: durationpb.New(90 * time.Minute), Store: "bbolt", StorePath: "/data/agentplane.db",
			StoreBytes: 3 << 20, SchemaVersion: 2, Events: 42, PendingInterrupts: 3, ActiveLeases: 1,
			LogBytes: 2048, Checkpoints: 4, WriteAheadLog: true, Commits: 10, Updates: 25,
			TasksByState: map[string]int64{"TASK_STATE_WORKING": 4, "TASK_STATE_COMPLETED": 10},
			QueueDepth:   map[string]int64{"default": 2, "gpu": 5},
		},
		purge: &agentplanev1.PurgeTasksResponse{Tasks: 7, Events: 70},
	}
	addr := startFakeCP(t, f)
	code, out, _ := runCtl(t, addr, "admin", "stats")
	for _, want := range []string{"v1.2.3", "1h30m0s", "bbolt /data/agentplane.db (schema 2)", "3.0 MiB (3145728 bytes)", "tasks completed     10", "tasks working       4", "pending interrupts  3",
		"2.0 KiB (2048 bytes) (4 checkpoints since start)", "commits 10 (2.5 writes each)", "queued in default 2", "queued in gpu 5"} {
		// Column widths follow the longest label; compare with runs of spaces folded.
		fold := func(s string) string { return regexp.MustCompile(` +`).ReplaceAllString(s, " ") }
		if code != 0 || !strings.Contains(fold(out), fold(want)) {
			t.Errorf("stats: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}

	// Each backend shows its own figures: PostgreSQL has a database, no file nor log.
	f.stats = &agentplanev1.GetStatsResponse{Store: "postgres", StorePath: "postgres://agentplane@db/agentplane", StoreBytes: 8 << 20, SchemaVersion: 3}
	code, out, _ = runCtl(t, addr, "admin", "stats")
	if fold := regexp.MustCompile(` +`).ReplaceAllString(out, " "); code != 0 || !strings.Contains(fold, "database size 8.0 MiB") ||
		strings.Contains(out, "log since checkpoint") || strings.Contains(out, "file size") {
		t.Errorf("stats on postgres: exit %d, want the database size and no bbolt row:\n%s", code, out)
	}

	// bbolt without its log (store.wal: false) has no log to show.
	f.stats = &agentplanev1.GetStatsResponse{Store: "bbolt", StorePath: "/data/agentplane.db", StoreBytes: 1 << 20, SchemaVersion: 3}
	code, out, _ = runCtl(t, addr, "admin", "stats")
	if code != 0 || !strings.Contains(out, "store file size") || strings.Contains(out, "log since checkpoint") {
		t.Errorf("stats on bbolt without a log: exit %d, want the file size and no log row:\n%s", code, out)
	}

	code, out, _ = runCtl(t, addr, "admin", "purge", "--older-than", "720h", "--dry-run")
	if code != 0 || out != "would purge 7 tasks and 70 events\n" {
		t.Errorf("purge --dry-run: %d %q", code, out)
	}
	code, out, _ = runCtl(t, addr, "admin", "purge")
	if code != 0 || out != "purged 7 tasks and 70 events\n" {
		t.Errorf("purge: %d %q", code, out)
	}
	reqs := requests[*agentplanev1.PurgeTasksRequest](f)
	if reqs[0].GetOlderThan().AsDuration() != 720*time.Hour || !reqs[0].GetDryRun() || reqs[1].GetOlderThan() != nil || reqs[1].GetDryRun() {
		t.Errorf("purge requests %v", reqs)
	}
}
