package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/webhooks/webhookstest"
)

// TestWebhooksSurviveSIGKILL ends tasks on the real binary, SIGKILLs it while the
// receiver holds deliveries in flight (some received, some claimed, most still in the
// outbox), restarts it on the same data, and checks that every task.ended notification
// arrives, signed: the outbox is durable, and claims left by the dead process expire
// and are attempted again.
func TestWebhooksSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8G"
	recv := webhookstest.New(t, secret)
	// The first 3 deliveries are answered; later ones are held until the kill.
	held := make(chan struct{})
	recv.Respond(func(webhookstest.Delivery) int {
		if len(recv.Deliveries()) > 3 {
			<-held
		}
		return http.StatusOK
	})
	defer func() {
		select {
		case <-held:
		default:
			close(held)
		}
	}()
	configFile := writeConfig(t, fmt.Sprintf(`notifications:
  allow_private_destinations: true
  delivery_timeout: 1s
  initial_backoff: 100ms
  max_backoff: 500ms
  poll_interval: 100ms
  concurrency: 2
  webhooks:
    - name: receiver
      url: %s/hook
      events: [task.ended]
      secret_env: TEST_WEBHOOK_SECRET
      max_attempts: 50
`, recv.URL))
	t.Setenv("TEST_WEBHOOK_SECRET", secret) // inherited by the binary
	bin := buildBinary(t)
	dataDir := t.TempDir()

	proc := startBinary(t, bin, dataDir, configFile)
	c, err := client.Dial(context.Background(), proc.addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitLimit)
	defer cancel()
	const n = 20
	ended := map[string]bool{}
	for i := range n {
		resp, err := c.Tasks.StartTask(ctx, startRequest(fmt.Sprintf("hook-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		id := resp.GetTask().GetTaskId()
		if _, err := c.Tasks.CancelTask(ctx, &agentplanev1.CancelTaskRequest{TaskId: id, Reason: "webhook crash test"}); err != nil {
			t.Fatal(err)
		}
		ended[id] = true
	}
	recv.WaitFor(t, testutil.WaitLimit, "deliveries in flight", func(ds []webhookstest.Delivery) bool { return len(ds) >= 5 })
	proc.kill(t)
	c.Close()
	before := len(recv.Deliveries())
	close(held)

	proc = startBinary(t, bin, dataDir, configFile)
	ds := recv.WaitFor(t, 2*testutil.WaitLimit, "every task.ended after the restart", func(ds []webhookstest.Delivery) bool {
		return len(endedTasks(t, ds)) == n
	})
	proc.stop(t)
	got := endedTasks(t, ds)
	for id := range ended {
		if !got[id] {
			t.Errorf("task %s: no task.ended notification", id)
		}
	}
	for _, d := range ds {
		if d.Verified != nil {
			t.Errorf("delivery %s: %v", d.ID, d.Verified)
		}
	}
	t.Logf("%d deliveries before the kill, %d in all for %d notifications", before, len(ds), n)
}

// endedTasks is the set of task ids the deliveries report as ended.
func endedTasks(t *testing.T, ds []webhookstest.Delivery) map[string]bool {
	out := map[string]bool{}
	for _, d := range ds {
		var m struct {
			Type string `json:"type"`
			Data struct {
				TaskID string `json:"task_id"`
				State  string `json:"state"`
			} `json:"data"`
		}
		if err := json.Unmarshal(d.Body, &m); err != nil {
			t.Errorf("delivery %s: %v", d.ID, err)
			continue
		}
		if m.Type == "task.ended" && m.Data.State == "canceled" {
			out[m.Data.TaskID] = true
		}
	}
	return out
}
