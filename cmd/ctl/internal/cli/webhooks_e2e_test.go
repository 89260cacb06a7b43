package cli

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/webhooks/webhookstest"
)

// TestWebhookDeadLettersListAndRetry: a notification its receiver refuses becomes a
// dead letter that ctl lists; once the receiver works, ctl retries it and it arrives.
func TestWebhookDeadLettersListAndRetry(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8G"
	recv := webhookstest.New(t, secret)
	var working atomic.Bool
	recv.Respond(func(webhookstest.Delivery) int {
		if working.Load() {
			return http.StatusOK
		}
		return http.StatusBadGateway
	})
	in := servertest.Start(t, func(c *config.Config) {
		n := &c.Notifications
		n.AllowPrivateDestinations = true
		n.PollInterval = config.Duration(20 * time.Millisecond)
		n.InitialBackoff = config.Duration(20 * time.Millisecond)
		n.Webhooks = []config.Webhook{{Name: "ops", URL: recv.URL, Secret: secret, Events: []string{config.EventTaskEnded}, MaxAttempts: 2}}
	})
	agent := writeFile(t, "agent.yaml", agentDoc)
	_, out, _ := runCtl(t, in.GRPCAddr, "task", "start", "--agent", agent, "--input", "x", "-o", "json")
	taskID := regexp.MustCompile(`"taskId":\s*"([^"]+)"`).FindStringSubmatch(out)[1]
	if code, _, errOut := runCtl(t, in.GRPCAddr, "task", "cancel", taskID); code != 0 {
		t.Fatalf("cancel: %s", errOut)
	}
	recv.WaitFor(t, testutil.WaitLimit, "2 refused attempts", func(ds []webhookstest.Delivery) bool { return len(ds) == 2 })

	var list struct {
		DeadLetters []struct {
			ID, Tenant, Endpoint, EventType, LastError string
			Attempts                                   int
		}
	}
	listed := make(chan struct{})
	go func() {
		defer close(listed)
		for len(list.DeadLetters) == 0 {
			code, out, errOut := runCtl(t, in.GRPCAddr, "admin", "webhooks", "dead-letters", "list", "-o", "json")
			if code != 0 {
				t.Errorf("list: exit %d: %s", code, errOut)
				return
			}
			if err := json.Unmarshal([]byte(out), &list); err != nil {
				t.Errorf("list -o json: %v\n%s", err, out)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	testutil.Within(t, listed, "the dead letter listed")
	d := list.DeadLetters[0]
	if len(list.DeadLetters) != 1 || d.Tenant != "default" || d.Endpoint != "ops" || d.EventType != "task.ended" ||
		d.Attempts != 2 || !strings.Contains(d.LastError, "502") {
		t.Fatalf("dead letters: %+v", list.DeadLetters)
	}
	code, out, _ := runCtl(t, in.GRPCAddr, "admin", "webhooks", "dead-letters", "list")
	if code != 0 || !strings.Contains(out, d.ID) || !strings.Contains(out, "HTTP 502 Bad Gateway") {
		t.Fatalf("table: exit %d\n%s", code, out)
	}

	working.Store(true)
	code, out, errOut := runCtl(t, in.GRPCAddr, "admin", "webhooks", "dead-letters", "retry", d.ID)
	if code != 0 || out != "retried 1 dead letter(s)\n" {
		t.Fatalf("retry: exit %d out %q err %q", code, out, errOut)
	}
	ds := recv.WaitFor(t, testutil.WaitLimit, "the retried delivery", func(ds []webhookstest.Delivery) bool { return len(ds) == 3 })
	if ds[2].ID != d.ID || ds[2].Verified != nil || !strings.Contains(string(ds[2].Body), taskID) {
		t.Fatalf("retried delivery %s (%v): %s", ds[2].ID, ds[2].Verified, ds[2].Body)
	}
	code, _, errOut = runCtl(t, in.GRPCAddr, "admin", "webhooks", "dead-letters", "retry", d.ID)
	if code != exitFailed || !strings.Contains(errOut, "WEBHOOK_DELIVERY_NOT_FOUND") {
		t.Fatalf("retrying again: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCtl(t, in.GRPCAddr, "admin", "webhooks", "dead-letters", "retry"); code != exitUsage {
		t.Fatalf("retry without an id: exit %d: %s", code, errOut)
	}
}
