package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/auth"
)

// The console's schedule pages list and show a tenant's schedules, escape what
// callers wrote (a pause reason, the template's labels), and show another tenant's
// schedule as not found.
func TestConsoleSchedules(t *testing.T) {
	mt := startMultiTenant(t, []string{"acme", "globex"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	user := mt.by["acme"][auth.RoleUser]
	tmpl := scheduleTemplate()
	tmpl.Labels = map[string]string{"team": `<img src=x onerror=alert(1)>`}
	if _, err := user.c.Schedules.CreateSchedule(ctx, &agentplanev1.CreateScheduleRequest{ScheduleId: "nightly", Spec: intervalSpec(time.Hour), Task: tmpl}); err != nil {
		t.Fatal(err)
	}
	if _, err := user.c.Schedules.PauseSchedule(ctx, &agentplanev1.PauseScheduleRequest{ScheduleId: "nightly", Reason: `<script>alert("x")</script>`}); err != nil {
		t.Fatal(err)
	}
	if _, err := mt.by["globex"][auth.RoleUser].c.Schedules.CreateSchedule(ctx, &agentplanev1.CreateScheduleRequest{ScheduleId: "theirs", Spec: intervalSpec(time.Hour), Task: scheduleTemplate()}); err != nil {
		t.Fatal(err)
	}

	u := signIn(t, mt.in.HTTPAddr, mt.by["acme"][auth.RoleApprover])
	resp, body := u.get("/ui/schedules")
	wantStatus(t, "list", resp, http.StatusOK, "")
	if !strings.Contains(body, `href="/ui/schedules/nightly"`) || !strings.Contains(body, "every 1h0m0s") || strings.Contains(body, "theirs") {
		t.Fatalf("list page:\n%s", body)
	}
	resp, body = u.get("/ui/schedules/nightly")
	wantStatus(t, "detail", resp, http.StatusOK, "")
	if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") ||
		!strings.Contains(body, "&lt;script&gt;") || !strings.Contains(body, "&lt;img src=x") {
		t.Fatalf("detail page does not escape what callers wrote:\n%s", body)
	}
	resp, _ = u.get("/ui/schedules/theirs")
	wantStatus(t, "another tenant's schedule", resp, http.StatusNotFound, "")
}
