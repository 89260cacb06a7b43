package server_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/servertest"
)

// startLeased starts a one-agent task and leases it.
func startLeased(t testing.TB, in *servertest.Instance) *agentplanev1.LeaseRef {
	t.Helper()
	ctx := context.Background()
	doc := []byte(`{"apiVersion":"qar/v1","kind":"AgentSpec","instructions":"Be brief.","model":"m"}`)
	if _, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Document{Document: doc}, Input: client.UserText("hi")}); err != nil {
		t.Fatal(err)
	}
	resp, err := in.Client.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt"})
	if err != nil || len(resp.GetLeases()) != 1 {
		t.Fatalf("LeaseTasks: %v, %v", resp, err)
	}
	l := resp.GetLeases()[0]
	return &agentplanev1.LeaseRef{TaskId: l.GetTask().GetTaskId(), LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
}

// noteOfSize is a note event whose payload is as large as max allows.
func noteOfSize(max int64) *agentplanev1.RuntimeEvent {
	text := strings.Repeat("x", int(max))
	for int64(proto.Size(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_Note{Note: &agentplanev1.RuntimeNote{Text: text}}})) > max {
		text = text[1:]
	}
	return &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_Note{Note: &agentplanev1.RuntimeNote{Text: text}}}
}

// TestReportBatchLimit: Capabilities advertises the limits a client hits, and a
// ReportEvents call of max_events_per_report events of max_event_bytes each fits the
// transport's request cap, while one more event (however small) is refused by the
// server with a clear LIMIT_EXCEEDED, not by the transport.
func TestReportBatchLimit(t *testing.T) {
	in := servertest.Start(t, nil)
	ctx := context.Background()
	resp, err := in.Client.Capabilities.GetCapabilities(ctx, &agentplanev1.GetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	lim := resp.GetCapabilities().GetLimits()
	cfg := in.Config.Limits
	want := &agentplanev1.Limits{
		MaxDepth: int32(in.Config.Spec.PlatformMaxDepth), MaxSpecBytes: cfg.MaxSpecBytes, MaxEventBytes: cfg.MaxEventBytes,
		MaxTaskHistoryBytes: cfg.MaxTaskHistoryBytes, MaxTaskEvents: int32(cfg.MaxTaskEvents),
		MaxRequestBytes: cfg.MaxRequestBytes(), MaxInputBytes: cfg.MaxInputBytes, MaxLabels: int32(cfg.MaxLabels),
		MaxListResponseBytes: cfg.MaxListResponseBytes, MaxEventsPerReport: int32(cfg.MaxEventsPerReport()),
		DefaultPageSize: 50, MaxPageSize: 500,
		// Single-user: no per-principal limits.
	}
	if !proto.Equal(lim, want) {
		t.Fatalf("limits\n got %v\nwant %v", lim, want)
	}
	if lim.GetMaxEventsPerReport() < 2 || lim.GetMaxRequestBytes() <= lim.GetMaxSpecBytes() {
		t.Fatalf("implausible limits %v", lim)
	}

	ref := startLeased(t, in)
	full := noteOfSize(lim.GetMaxEventBytes())
	batch := make([]*agentplanev1.RuntimeEvent, lim.GetMaxEventsPerReport())
	for i := range batch {
		batch[i] = full
	}
	if _, err := in.Client.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref, Events: batch}); err != nil {
		t.Fatalf("%d events of %d bytes: %v", len(batch), lim.GetMaxEventBytes(), err)
	}
	small := make([]*agentplanev1.RuntimeEvent, lim.GetMaxEventsPerReport()+1)
	for i := range small {
		small[i] = noteOfSize(16)
	}
	_, err = in.Client.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref, Events: small})
	if status.Code(err) != codes.InvalidArgument || reasons.Of(err) != apierr.ReasonResourceExhausted ||
		!strings.Contains(err.Error(), "max_events_per_report") {
		t.Fatalf("%d small events: want INVALID_ARGUMENT LIMIT_EXCEEDED naming max_events_per_report, got %v", len(small), err)
	}
	task, err := in.Client.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: ref.GetTaskId()})
	if err != nil {
		t.Fatal(err)
	}
	// submitted, state, lease, the batch; nothing of the refused report.
	if got, want := task.GetTask().GetLastSequence(), int64(3+len(batch)); got != want {
		t.Fatalf("last sequence %d, want %d", got, want)
	}
}
