package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
	"github.com/agentplane/agentplane/server/webhooks"
	"github.com/agentplane/agentplane/server/webhooks/webhookstest"
)

// TestWebhooksTwoPostgresReplicas runs two control planes on one PostgreSQL database,
// both sending the same tenant's webhooks: a gated call raised through one and approved
// through the other, and tasks ended through either, each reach the receiver exactly
// once (it answers every attempt at once, so a second delivery of an id would be two
// replicas making the same attempt), signed, with links to the console.
func TestWebhooksTwoPostgresReplicas(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8G"
	recv := webhookstest.New(t, secret)
	dsn := pgtest.DSN(t)
	replica := func() *servertest.Instance {
		return servertest.Start(t, func(c *config.Config) {
			c.Store.Backend = config.BackendPostgres
			c.Store.Postgres.DSN = dsn
			n := &c.Notifications
			n.AllowPrivateDestinations = true
			n.ConsoleURL = "https://console.example.com"
			n.PollInterval = config.Duration(10 * time.Millisecond)
			n.Concurrency = 2
			n.Webhooks = []config.Webhook{{Name: "ops", URL: recv.URL, Secret: secret, Events: config.WebhookEvents}}
		})
	}
	r1, r2 := replica(), replica()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitLimit)
	defer cancel()

	// A gated call: raised under a lease taken through r1, approved through r2.
	started, err := r1.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())},
		Input:  client.UserText("move 5"), InterruptPolicy: gatedPolicy(),
	})
	if err != nil {
		t.Fatal(err)
	}
	id := started.GetTask().GetTaskId()
	leases, err := r1.Client.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt"})
	if err != nil || len(leases.GetLeases()) != 1 {
		t.Fatalf("lease: %v %v", leases, err)
	}
	l := leases.GetLeases()[0]
	ref := &agentplanev1.LeaseRef{TaskId: id, LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
	checked, err := r1.Client.Runtime.CheckToolCall(ctx, &agentplanev1.CheckToolCallRequest{Lease: ref, CallId: "c1", ToolName: gatedTool, AgentName: "teller", ArgumentsJson: `{"n": 5}`})
	if err != nil || checked.GetInterrupt() == nil {
		t.Fatalf("CheckToolCall = %v, %v; want an interrupt", checked, err)
	}
	interruptID := checked.GetInterrupt().GetInterruptId()
	if _, err := r2.Client.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{InterruptId: interruptID,
		Decision: &agentplanev1.ResolveInterruptRequest_Reject{Reject: &agentplanev1.RejectDecision{Reason: "not today"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r1.Client.Tasks.CancelTask(ctx, &agentplanev1.CancelTaskRequest{TaskId: id}); err != nil {
		t.Fatal(err)
	}
	// More tasks ended, alternately through each replica.
	const more = 20
	for i := range more {
		c := []*servertest.Instance{r1, r2}[i%2].Client
		s, err := c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
			Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}, Input: client.UserText(fmt.Sprint(i)),
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Tasks.CancelTask(ctx, &agentplanev1.CancelTaskRequest{TaskId: s.GetTask().GetTaskId()}); err != nil {
			t.Fatal(err)
		}
	}
	want := 2 + 1 + more // created, resolved, task.ended × (1 + more)
	recv.WaitFor(t, testutil.WaitLimit, "every notification", func(ds []webhookstest.Delivery) bool { return len(ds) >= want })
	// Let any duplicate show up: wait until both outboxes (one table) are empty.
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for pendingWebhooks(t, r1) != "0" {
			time.Sleep(10 * time.Millisecond)
		}
	}()
	testutil.Within(t, drained, "the outbox drained")
	ds := recv.Deliveries()
	seen := map[string]int{}
	types := map[string]int{}
	for _, d := range ds {
		seen[d.ID]++
		if d.Verified != nil {
			t.Errorf("%s: %v", d.ID, d.Verified)
		}
		var m webhooks.Message
		if err := json.Unmarshal(d.Body, &m); err != nil {
			t.Fatal(err)
		}
		types[m.Type]++
		switch m.Type {
		case config.EventInterruptCreated:
			if m.Data.InterruptID != interruptID || m.Data.Tool != gatedTool || m.Data.URL != "https://console.example.com/ui/interrupts/"+interruptID {
				t.Errorf("interrupt.created: %+v", m.Data)
			}
		case config.EventInterruptResolved:
			if m.Data.Decision == nil || m.Data.Decision.Type != "reject" || m.Data.Decision.Reason != "not today" {
				t.Errorf("interrupt.resolved: %+v", m.Data)
			}
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("notification %s delivered %d times; each attempt is one replica's", id, n)
		}
	}
	if len(ds) != want || types[config.EventInterruptCreated] != 1 || types[config.EventInterruptResolved] != 1 ||
		types[config.EventTaskEnded] != 1+more {
		t.Fatalf("%d deliveries by type %v, want %d: 1 created, 1 resolved, %d task.ended", len(ds), types, want, 1+more)
	}
}

// pendingWebhooks reads agentplane_webhook_outbox_pending from a replica's /metrics
// ("" when absent or unreadable).
func pendingWebhooks(t *testing.T, in *servertest.Instance) string {
	resp, err := http.Get("http://" + in.HTTPAddr + "/metrics")
	if err != nil {
		t.Error(err)
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "agentplane_webhook_outbox_pending "); ok {
			return v
		}
	}
	return ""
}
