package server_test

import (
	"context"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
)

// TestPostgresBackend serves the API on PostgreSQL (one replica): an idempotent start,
// a watch that follows the task live, a lease, a gated tool call approved, events
// reported, completion; then stats, a purge and a backup refused with its reason.
func TestPostgresBackend(t *testing.T) {
	dsn := pgtest.DSN(t)
	in := servertest.Start(t, func(c *config.Config) {
		c.Store.Backend = config.BackendPostgres
		c.Store.Postgres.DSN = dsn
	})
	c := in.Client
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	req := &agentplanev1.StartTaskRequest{
		RequestId: "pg-req-1",
		Source:    &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())},
		Input:     client.UserText("move 5"), InterruptPolicy: gatedPolicy(),
	}
	started, err := c.Tasks.StartTask(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	id := started.GetTask().GetTaskId()
	again, err := c.Tasks.StartTask(ctx, req)
	if err != nil || again.GetTask().GetTaskId() != id || again.GetCreated() {
		t.Fatalf("retried StartTask = %v, %v; want task %s, not created", again, err, id)
	}

	// The watch starts before any runtime work and follows it live.
	watch, err := c.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: id})
	if err != nil {
		t.Fatal(err)
	}

	leases, err := c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt"})
	if err != nil || len(leases.GetLeases()) != 1 || leases.GetLeases()[0].GetTask().GetTaskId() != id {
		t.Fatalf("lease: %v %v", leases, err)
	}
	l := leases.GetLeases()[0]
	ref := &agentplanev1.LeaseRef{TaskId: id, LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
	const args = `{"n": 5}`
	checked, err := c.Runtime.CheckToolCall(ctx, &agentplanev1.CheckToolCallRequest{Lease: ref, CallId: "c1", ToolName: gatedTool, AgentName: "teller", ArgumentsJson: args})
	if err != nil || checked.GetInterrupt() == nil {
		t.Fatalf("CheckToolCall = %v, %v; want an interrupt", checked, err)
	}
	inbox, err := c.Hitl.ListInterrupts(ctx, &agentplanev1.ListInterruptsRequest{})
	if err != nil || len(inbox.GetInterrupts()) != 1 {
		t.Fatalf("inbox = %v, %v", inbox, err)
	}
	if _, err := c.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{InterruptId: checked.GetInterrupt().GetInterruptId(),
		Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref, Events: []*agentplanev1.RuntimeEvent{
		{Payload: &agentplanev1.RuntimeEvent_ToolCall{ToolCall: &agentplanev1.ToolCall{CallId: "c1", ToolName: gatedTool, ArgumentsJson: args}}},
		{Payload: &agentplanev1.RuntimeEvent_ToolResult{ToolResult: &agentplanev1.ToolResult{CallId: "c1"}}},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Runtime.CompleteTask(ctx, &agentplanev1.CompleteTaskRequest{Lease: ref,
		Output: &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "moved")}}); err != nil {
		t.Fatal(err)
	}

	var seqs []int64
	sawCall, sawGated := false, false
	for {
		r, err := watch.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		if r.GetEvent() == nil {
			continue // the caught-up marker
		}
		seqs = append(seqs, r.GetEvent().GetSequence())
		sawGated = sawGated || r.GetEvent().GetToolGated() != nil
		sawCall = sawCall || r.GetEvent().GetToolCall().GetArgumentsJson() == args
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("watched sequences %v are not 1..n", seqs)
		}
	}
	if !sawGated || !sawCall {
		t.Fatalf("the watch missed the gated call (%v) or the call (%v): %v", sawGated, sawCall, seqs)
	}
	got, err := c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: id})
	if err != nil || got.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("task = %v, %v", got, err)
	}

	stats, err := c.Admin.GetStats(ctx, &agentplanev1.GetStatsRequest{})
	if err != nil || stats.GetStore() != "postgres" || stats.GetEvents() != int64(len(seqs)) ||
		stats.GetTasksByState()[agentplanev1.TaskState_TASK_STATE_COMPLETED.String()] != 1 {
		t.Fatalf("stats = %v, %v", stats, err)
	}
	purged, err := c.Admin.PurgeTasks(ctx, &agentplanev1.PurgeTasksRequest{OlderThan: durationpb.New(time.Nanosecond)})
	if err != nil || purged.GetTasks() != 1 || purged.GetEvents() != int64(len(seqs)) {
		t.Fatalf("purge = %v, %v", purged, err)
	}
	if _, err := c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: id}); status.Code(err) != codes.NotFound {
		t.Fatalf("purged task: %v", err)
	}

	backup, err := c.Admin.Backup(ctx, &agentplanev1.BackupRequest{})
	if err == nil {
		_, err = backup.Recv()
	}
	if status.Code(err) != codes.FailedPrecondition || reasonOf(err) != apierr.ReasonStoreBackupUnsupported {
		t.Fatalf("backup = %v, want FAILED_PRECONDITION STORE_BACKUP_UNSUPPORTED", err)
	}
}
