package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
)

// requireServerSide skips the test while the real server still answers UNIMPLEMENTED
// for what it needs; these tests start running on their own when it lands.
func requireServerSide(t *testing.T, in *servertest.Instance) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	probes := map[string]error{}
	_, probes["RuntimeService.LeaseTasks"] = in.Client.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "probe"})
	_, probes["HitlService.ListInterrupts"] = in.Client.Hitl.ListInterrupts(ctx, &agentplanev1.ListInterruptsRequest{})
	_, probes["TaskService.ListTasks"] = in.Client.Tasks.ListTasks(ctx, &agentplanev1.ListTasksRequest{})
	for rpc, err := range probes {
		if status.Code(err) == codes.Unimplemented {
			t.Skipf("the server does not implement %s yet", rpc)
		}
	}
}

// ctlAsync runs ctl in the background and returns a channel with its result.
func ctlAsync(t *testing.T, addr string, args ...string) chan [3]any {
	done := make(chan [3]any, 1)
	go func() {
		code, out, errOut := runCtl(t, addr, args...)
		done <- [3]any{code, out, errOut}
	}()
	return done
}

func waitCtl(t *testing.T, what string, done chan [3]any) (int, string, string) {
	t.Helper()
	select {
	case r := <-done:
		return r[0].(int), r[1].(string), r[2].(string)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not finish", what)
		return 0, "", ""
	}
}

// TestTourAgainstTheServer is the README tour: start a task, play it with the
// scripted runtime, watch it complete.
func TestTourAgainstTheServer(t *testing.T) {
	in := servertest.Start(t, nil)
	requireServerSide(t, in)
	agent := writeFile(t, "agent.yaml", agentDoc)
	code, out, errOut := runCtl(t, in.GRPCAddr, "task", "start", "--agent", agent, "--input", "weather in Paris?", "-o", "json")
	if code != 0 {
		t.Fatalf("task start: %d %s", code, errOut)
	}
	id := regexp.MustCompile(`"taskId":\s*"([^"]+)"`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no task id in %s", out)
	}
	runtime := ctlAsync(t, in.GRPCAddr, "runtime", "run", "--script", "../../../../examples/runtime/hello.yaml", "--once")
	code, out, errOut = runCtl(t, in.GRPCAddr, "task", "watch", id[1])
	if code != 0 {
		t.Fatalf("task watch: %d %s", code, errOut)
	}
	for _, want := range []string{"tool call", "get_weather", "It is 21°C and clear in Paris.", "-> completed"} {
		if !strings.Contains(out, want) {
			t.Errorf("watch output lacks %q:\n%s", want, out)
		}
	}
	if code, rout, rerr := waitCtl(t, "runtime run --once", runtime); code != 0 || !strings.Contains(rout, id[1]+": completed") {
		t.Fatalf("runtime: %d %s %s", code, rout, rerr)
	}
}

// TestGatedCallApprovedFromCtl is the approval part of the tour: a gated call waits
// for `ctl hitl approve`, and the runtime then runs it.
func TestGatedCallApprovedFromCtl(t *testing.T) {
	in := servertest.Start(t, nil)
	requireServerSide(t, in)
	agent := writeFile(t, "agent.yaml", agentDoc+"tools:\n  - type: function\n    function:\n      name: get_weather\n      parameters: {type: object, properties: {city: {type: string}}, required: [city], additionalProperties: false}\n")
	policy := writeFile(t, "policy.yaml", "allowlist: {tools: [get_weather], tags: {get_weather: {tags: [outbound]}}}\n")
	code, out, errOut := runCtl(t, in.GRPCAddr, "task", "start", "--agent", agent, "--policy", policy, "--input", "weather?", "-o", "json")
	if code != 0 {
		t.Fatalf("task start: %d %s", code, errOut)
	}
	taskID := regexp.MustCompile(`"taskId":\s*"([^"]+)"`).FindStringSubmatch(out)[1]
	runtime := ctlAsync(t, in.GRPCAddr, "runtime", "run", "--script", "../../../../examples/runtime/hello.yaml", "--once")

	// The task's own log says when the interrupt is raised: wait on it, not on a timer.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := in.Client.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	var interruptID string
	for interruptID == "" {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("watching for the interrupt: %v", err)
		}
		interruptID = resp.GetEvent().GetInterruptRaised().GetInterrupt().GetInterruptId()
	}
	cancel()
	code, out, errOut = runCtl(t, in.GRPCAddr, "hitl", "list", "--tag", "outbound")
	if code != 0 || !strings.Contains(out, interruptID) || !strings.Contains(out, "get_weather") {
		t.Fatalf("hitl list: %d %s %s", code, out, errOut)
	}
	code, out, errOut = runCtl(t, in.GRPCAddr, "hitl", "show", interruptID)
	digest := regexp.MustCompile(`args digest\s+([0-9a-f]{64})`).FindStringSubmatch(out)
	if code != 0 || digest == nil || !strings.Contains(out, `"city": "Paris"`) {
		t.Fatalf("hitl show: %d %s %s", code, out, errOut)
	}
	code, _, errOut = runCtl(t, in.GRPCAddr, "hitl", "approve", interruptID, "--digest", strings.Repeat("0", 64))
	if code != exitFailed || !strings.Contains(errOut, "(INTERRUPT_ARGS_MISMATCH)") {
		t.Fatalf("approve with a stale digest: %d %s", code, errOut)
	}
	if code, out, errOut = runCtl(t, in.GRPCAddr, "hitl", "approve", interruptID, "--reason", "fine", "--digest", digest[1]); code != 0 {
		t.Fatalf("hitl approve: %d %s %s", code, out, errOut)
	}
	code, _, errOut = runCtl(t, in.GRPCAddr, "hitl", "approve", interruptID)
	if code != exitFailed || !strings.Contains(errOut, "(INTERRUPT_ALREADY_RESOLVED)") {
		t.Errorf("second approval: %d %s", code, errOut)
	}
	if code, rout, rerr := waitCtl(t, "runtime run --once", runtime); code != 0 || !strings.Contains(rout, taskID+": completed") {
		t.Fatalf("runtime: %d %s %s", code, rout, rerr)
	}
}

// TestExampleSpecsValidate keeps the example agent and policy in examples/runtime valid
// for the server that plays them.
func TestExampleSpecsValidate(t *testing.T) {
	in := servertest.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	doc, err := os.ReadFile("../../../../examples/runtime/approval.agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := in.Client.Spec.ValidateSpec(ctx, &agentplanev1.ValidateSpecRequest{Source: &agentplanev1.ValidateSpecRequest_Document{Document: doc}, DocumentName: "approval.agent.yaml"})
	if status.Code(err) == codes.Unimplemented {
		t.Skip("the server does not validate specs yet")
	}
	if err != nil || !resp.GetValid() {
		t.Fatalf("approval.agent.yaml: %v %v", err, resp)
	}
	policy := &agentplanev1.InterruptPolicy{}
	if err := readJSONOrYAML("../../../../examples/runtime/approval.policy.yaml", policy); err != nil || len(policy.GetAllowlist().GetTools()) != 2 {
		t.Fatalf("approval.policy.yaml: %v %v", err, policy)
	}
}

// TestBenchAgainstTheServer runs each bench briefly against the real server: it proves
// the load generators drive the real protocol (figures come from running ctl bench).
func TestBenchAgainstTheServer(t *testing.T) {
	for _, args := range [][]string{
		{"start", "--clients", "4", "--total", "40"},
		{"events", "--clients", "2", "--total", "40", "--batch", "3"},
		{"gate", "--total", "10"},
	} {
		t.Run(args[0], func(t *testing.T) {
			in := servertest.Start(t, nil) // each on an empty queue
			requireServerSide(t, in)
			out, errOut, err := runBench(t, in.GRPCAddr, args...)
			if err != nil || !regexp.MustCompile(`^`+args[0]+` `+summaryLine).MatchString(out) {
				t.Errorf("bench %v: %v\n%s%s", args, err, out, errOut)
			}
		})
	}
	// The benches share a control plane with a user's task and leave it, and nothing
	// else, for the next runtime: their tasks run on queues of their own and are
	// canceled or completed.
	t.Run("benches leave nothing for the next runtime", func(t *testing.T) {
		in := servertest.Start(t, nil)
		requireServerSide(t, in)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		mine, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(benchAgent(false))}, Input: client.UserText("mine")})
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"start", "--clients", "4", "--total", "40"}, {"events", "--total", "10"}, {"gate", "--total", "3"}} {
			if _, errOut, err := runBench(t, in.GRPCAddr, args...); err != nil {
				t.Fatalf("bench %v: %v %s", args, err, errOut)
			}
		}
		stats, err := in.Client.Admin.GetStats(ctx, &agentplanev1.GetStatsRequest{})
		if err != nil || len(stats.GetQueueDepth()) != 1 || stats.GetQueueDepth()["default"] != 1 {
			t.Fatalf("queue depth after the benches: %v, %v", stats.GetQueueDepth(), err)
		}
		leases, err := in.Client.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "next", MaxTasks: 64})
		if err != nil || len(leases.GetLeases()) != 1 || leases.GetLeases()[0].GetTask().GetTaskId() != mine.GetTask().GetTaskId() {
			t.Fatalf("the next runtime leased %v, %v; want only %s", leases.GetLeases(), err, mine.GetTask().GetTaskId())
		}
	})
}

// TestAdminAgainstTheServer takes a hot backup with ctl and starts a server on it.
func TestAdminAgainstTheServer(t *testing.T) {
	in := servertest.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := in.Client.Admin.GetStats(ctx, &agentplanev1.GetStatsRequest{}); status.Code(err) == codes.Unimplemented {
		t.Skip("the server does not implement AdminService yet")
	}
	requireServerSide(t, in)
	started, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(benchAgent(false))}, Input: client.UserText("keep me")})
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCtl(t, in.GRPCAddr, "admin", "stats")
	if code != 0 || !regexp.MustCompile(`tasks submitted\s+1`).MatchString(out) || !strings.Contains(out, "log since checkpoint") {
		t.Fatalf("stats: %d %s %s", code, out, errOut)
	}
	restoreDir := t.TempDir()
	backup := filepath.Join(restoreDir, filepath.Base(in.Config.StorePath()))
	code, out, errOut = runCtl(t, in.GRPCAddr, "admin", "backup", backup)
	if code != 0 || !strings.HasPrefix(out, "wrote ") {
		t.Fatalf("backup: %d %s %s", code, out, errOut)
	}
	restored := servertest.Start(t, func(c *config.Config) { c.DataDir = restoreDir })
	got, err := restored.Client.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: started.GetTask().GetTaskId()})
	if err != nil || client.MessageText(got.GetTask().GetInput()) != "keep me" {
		t.Fatalf("the restored server does not hold the task: %v %v", err, got)
	}
	code, out, errOut = runCtl(t, in.GRPCAddr, "admin", "purge", "--older-than", "24h", "--dry-run")
	if code != 0 || !strings.HasPrefix(out, "would purge 0 tasks") {
		t.Fatalf("purge: %d %s %s", code, out, errOut)
	}
}

// TestCtlOnPostgres: against a control plane on PostgreSQL, ctl capabilities names
// the store postgres and says no hot backup, ctl admin backup is refused with
// STORE_BACKUP_UNSUPPORTED (and writes no file), and ctl admin stats shows the
// database's figures, not the bbolt file's log.
func TestCtlOnPostgres(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) {
		c.Store.Backend = config.BackendPostgres
		c.Store.Postgres.DSN = pgtest.DSN(t)
	})
	fold := func(s string) string { return regexp.MustCompile(` +`).ReplaceAllString(s, " ") }
	code, out, errOut := runCtl(t, in.GRPCAddr, "capabilities")
	if code != 0 || !strings.Contains(fold(out), "\nstore postgres\n") || !strings.Contains(fold(out), "feature: hot backup no") {
		t.Errorf("capabilities on postgres: exit %d, want store postgres and no hot backup:\n%s%s", code, out, errOut)
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	code, out, errOut = runCtl(t, in.GRPCAddr, "admin", "backup", backup)
	if code == 0 || !strings.Contains(errOut, "STORE_BACKUP_UNSUPPORTED") {
		t.Errorf("admin backup on postgres: exit %d, want STORE_BACKUP_UNSUPPORTED:\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(backup); !os.IsNotExist(err) {
		t.Errorf("a refused backup left %s (%v)", backup, err)
	}
	code, out, errOut = runCtl(t, in.GRPCAddr, "admin", "stats")
	if code != 0 || !strings.Contains(out, "database size") || strings.Contains(out, "log since checkpoint") || strings.Contains(out, "file size") {
		t.Errorf("admin stats on postgres: exit %d, want the database size and no bbolt row:\n%s%s", code, out, errOut)
	}
}
