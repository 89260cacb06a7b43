package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/server/servertest"
)

// The worked example of docs/schedules.md, against a real server.
func TestScheduleCommands(t *testing.T) {
	in := servertest.Start(t, nil)
	agent := writeFile(t, "report.yaml", agentDoc)
	run := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCtl(t, in.GRPCAddr, args...)
		if code != 0 {
			t.Fatalf("ctl %v: exit %d\n%s%s", args, code, out, errOut)
		}
		return out
	}

	out := run("schedule", "create", "nightly-report", "--cron", "30 2 * * *", "--time-zone", "Europe/Paris",
		"--agent", agent, "--input", "yesterday's numbers", "--label", "team=finance", "--overlap", "buffer-one")
	for _, want := range []string{"nightly-report", `cron "30 2 * * *" Europe/Paris`, "buffer-one", "active", "0 started"} {
		if !strings.Contains(out, want) {
			t.Fatalf("create printed no %q:\n%s", want, out)
		}
	}
	// The same command again is a retry.
	code, _, errOut := runCtl(t, in.GRPCAddr, "schedule", "create", "nightly-report", "--cron", "30 2 * * *", "--time-zone", "Europe/Paris",
		"--agent", agent, "--input", "yesterday's numbers", "--label", "team=finance", "--overlap", "buffer-one")
	if code != 0 || !strings.Contains(errOut, "existed already") {
		t.Fatalf("repeated create: exit %d %q", code, errOut)
	}
	run("schedule", "create", "sync", "--every", "15m", "--offset", "5m", "--jitter", "30s", "--agent", agent)

	out = run("schedule", "list")
	if !strings.Contains(out, "nightly-report") || !strings.Contains(out, "every 15m0s +5m0s jitter 30s") {
		t.Fatalf("list:\n%s", out)
	}
	out = run("schedule", "trigger", "nightly-report", "--request-id", "rerun-1")
	if !strings.Contains(out, "started") || !strings.Contains(out, "(trigger)") {
		t.Fatalf("trigger:\n%s", out)
	}
	out = run("schedule", "pause", "nightly-report", "--reason", "warehouse \x1b[31mmigration")
	if !strings.Contains(out, "paused") || !strings.Contains(out, `warehouse \x1b[31mmigration`) {
		t.Fatalf("pause did not show the reason escaped:\n%q", out)
	}
	run("schedule", "resume", "nightly-report")
	out = run("schedule", "update", "nightly-report", "--cron", "0 3 * * *", "--time-zone", "Europe/Paris")
	if !strings.Contains(out, `cron "0 3 * * *" Europe/Paris`) {
		t.Fatalf("update:\n%s", out)
	}
	var doc map[string]any
	out = run("schedule", "get", "nightly-report", "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc["schedule"].(map[string]any)["counts"].(map[string]any)["started"] != "1" {
		t.Fatalf("get -o json: %v\n%s", err, out)
	}
	run("schedule", "delete", "nightly-report")
	code, _, errOut = runCtl(t, in.GRPCAddr, "schedule", "get", "nightly-report")
	if code == 0 || !strings.Contains(errOut, "SCHEDULE_NOT_FOUND") {
		t.Fatalf("get after delete: exit %d %q", code, errOut)
	}

	// Mistakes are told before anything is sent, or by the server naming the field.
	for _, args := range [][]string{
		{"schedule", "create", "x", "--agent", agent},
		{"schedule", "create", "x", "--cron", "@daily", "--every", "1h", "--agent", agent},
		{"schedule", "create", "x", "--every", "1h", "--time-zone", "Europe/Paris", "--agent", agent},
		{"schedule", "create", "x", "--every", "1h", "--overlap", "sometimes", "--agent", agent},
		{"schedule", "update", "sync"},
	} {
		if code, _, errOut := runCtl(t, in.GRPCAddr, args...); code != exitUsage {
			t.Errorf("%v: exit %d (%q), want usage", args, code, errOut)
		}
	}
	code, _, errOut = runCtl(t, in.GRPCAddr, "schedule", "create", "x", "--cron", "0 9 * * *", "--time-zone", "Mars/Olympus", "--agent", agent)
	if code != exitFailed || !strings.Contains(errOut, "spec.cron.time_zone") {
		t.Fatalf("bad zone: exit %d %q", code, errOut)
	}
}
