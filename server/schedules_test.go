package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

func scheduleTemplate() *agentplanev1.StartTaskRequest {
	return &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())},
		Input:  client.UserText("nightly report"),
		Labels: map[string]string{"team": "a"},
		Queue:  "reports",
	}
}

func intervalSpec(d time.Duration) *agentplanev1.ScheduleSpec {
	return &agentplanev1.ScheduleSpec{Kind: &agentplanev1.ScheduleSpec_Interval{Interval: &agentplanev1.IntervalSpec{Every: durationpb.New(d)}}}
}

// A schedule's runs are ordinary tasks of its tenant, started by the real scheduler
// with the template's input, labels and queue and carrying the schedule and nominal
// time; another tenant sees neither the schedule nor its runs, and a role that may
// not start tasks may not make schedules.
func TestSchedulesEndToEnd(t *testing.T) {
	mt := startMultiTenant(t, []string{"acme", "globex"}, func(c *config.Config) {
		c.Schedules.PollInterval = config.Duration(50 * time.Millisecond)
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	user := mt.by["acme"][auth.RoleUser].c
	approver := mt.by["acme"][auth.RoleApprover].c
	other := mt.by["globex"][auth.RoleUser].c

	created, err := user.Schedules.CreateSchedule(ctx, &agentplanev1.CreateScheduleRequest{
		ScheduleId: "every-second", Spec: intervalSpec(time.Second), Task: scheduleTemplate(),
		Policy: &agentplanev1.SchedulePolicy{Overlap: agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_ALLOW_ALL},
	})
	if err != nil || !created.GetCreated() || created.GetSchedule().GetTenant() != "acme" {
		t.Fatalf("CreateSchedule = %v, %v", created, err)
	}

	// Wait for two runs, then pause.
	var runs []*agentplanev1.Task
	deadline := time.Now().Add(testutil.WaitLimit)
	for len(runs) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d runs after %s", len(runs), testutil.WaitLimit)
		}
		time.Sleep(100 * time.Millisecond)
		list, err := user.Tasks.ListTasks(ctx, &agentplanev1.ListTasksRequest{Queue: "reports"})
		if err != nil {
			t.Fatal(err)
		}
		runs = list.GetTasks()
	}
	paused, err := user.Schedules.PauseSchedule(ctx, &agentplanev1.PauseScheduleRequest{ScheduleId: "every-second", Reason: "enough"})
	if err != nil || !paused.GetSchedule().GetPaused() {
		t.Fatalf("PauseSchedule = %v, %v", paused, err)
	}
	for _, task := range runs {
		if task.GetScheduledBy().GetScheduleId() != "every-second" || task.GetLabels()["team"] != "a" || task.GetInput().GetParts() == nil ||
			task.GetTenant() != "acme" || task.GetCreatedBy() != "acme-user" || task.GetSpecKind() != "AgentSpec" {
			t.Fatalf("run %v", task)
		}
		if n := task.GetScheduledBy().GetNominalTime().AsTime(); n.Nanosecond() != 0 {
			t.Fatalf("nominal time %v is not on a whole second", n)
		}
	}

	// The approver reads but may not change it; another tenant learns nothing.
	got, err := approver.Schedules.GetSchedule(ctx, &agentplanev1.GetScheduleRequest{ScheduleId: "every-second"})
	if err != nil || len(got.GetSchedule().GetRecentRuns()) < 2 || got.GetSchedule().GetCounts().GetStarted() < 2 {
		t.Fatalf("GetSchedule = %v, %v", got, err)
	}
	if _, err := approver.Schedules.TriggerSchedule(ctx, &agentplanev1.TriggerScheduleRequest{ScheduleId: "every-second"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("approver TriggerSchedule = %v, want PermissionDenied", err)
	}
	for _, call := range []func() error{
		func() error {
			_, err := other.Schedules.GetSchedule(ctx, &agentplanev1.GetScheduleRequest{ScheduleId: "every-second"})
			return err
		},
		func() error {
			_, err := other.Schedules.TriggerSchedule(ctx, &agentplanev1.TriggerScheduleRequest{ScheduleId: "every-second"})
			return err
		},
		func() error {
			_, err := other.Schedules.DeleteSchedule(ctx, &agentplanev1.DeleteScheduleRequest{ScheduleId: "every-second"})
			return err
		},
	} {
		if err := call(); status.Code(err) != codes.NotFound || reasonOf(err) != apierr.ReasonScheduleNotFound {
			t.Fatalf("another tenant's call = %v, want NotFound SCHEDULE_NOT_FOUND", err)
		}
	}
	if list, err := other.Schedules.ListSchedules(ctx, &agentplanev1.ListSchedulesRequest{}); err != nil || len(list.GetSchedules()) != 0 {
		t.Fatalf("another tenant's ListSchedules = %v, %v", list, err)
	}
	if _, err := other.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: runs[0].GetTaskId()}); status.Code(err) != codes.NotFound {
		t.Fatalf("another tenant's GetTask of a run = %v", err)
	}

	// Trigger now, retried: one task.
	trig, err := user.Schedules.TriggerSchedule(ctx, &agentplanev1.TriggerScheduleRequest{ScheduleId: "every-second", RequestId: "deploy-42"})
	if err != nil || trig.GetRun().GetOutcome() != agentplanev1.ScheduleRunOutcome_SCHEDULE_RUN_OUTCOME_STARTED || !trig.GetTask().GetScheduledBy().GetManual() {
		t.Fatalf("TriggerSchedule = %v, %v", trig, err)
	}
	again, err := user.Schedules.TriggerSchedule(ctx, &agentplanev1.TriggerScheduleRequest{ScheduleId: "every-second", RequestId: "deploy-42"})
	if err != nil || again.GetTask().GetTaskId() != trig.GetTask().GetTaskId() {
		t.Fatalf("retried TriggerSchedule = %v, %v", again, err)
	}

	// Bad input: a clear error naming the field.
	_, err = user.Schedules.CreateSchedule(ctx, &agentplanev1.CreateScheduleRequest{ScheduleId: "bad",
		Spec: &agentplanev1.ScheduleSpec{Kind: &agentplanev1.ScheduleSpec_Cron{Cron: &agentplanev1.CronSpec{Expression: "0 9 * * *", TimeZone: "Europe/Atlantis"}}},
		Task: scheduleTemplate()})
	st := status.Convert(err)
	var field string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) == 1 {
			field = br.GetFieldViolations()[0].GetField()
		}
	}
	if st.Code() != codes.InvalidArgument || reasonOf(err) != apierr.ReasonScheduleInvalid || field != "spec.cron.time_zone" {
		t.Fatalf("bad time zone = %v (field %q)", err, field)
	}
	invalidTask := scheduleTemplate()
	invalidTask.GetSpec().Fields["kind"] = structpb.NewStringValue("Nonsense")
	_, err = user.Schedules.CreateSchedule(ctx, &agentplanev1.CreateScheduleRequest{ScheduleId: "bad", Spec: intervalSpec(time.Hour), Task: invalidTask})
	if reasonOf(err) != apierr.ReasonSpecInvalid {
		t.Fatalf("an invalid template = %v, want SPEC_INVALID", err)
	}
	// StartTask keeps the request ids of runs for them.
	req := scheduleTemplate()
	req.RequestId = "schedule:every-second:x@1"
	if _, err := user.Tasks.StartTask(ctx, req); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("StartTask with a run's request id = %v", err)
	}

	if _, err := user.Schedules.DeleteSchedule(ctx, &agentplanev1.DeleteScheduleRequest{ScheduleId: "every-second"}); err != nil {
		t.Fatal(err)
	}
	if _, err := user.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: runs[0].GetTaskId()}); err != nil {
		t.Fatalf("a run's task after its schedule was deleted: %v", err)
	}
}

// The HTTP/JSON routes of ScheduleService.
func TestSchedulesOverHTTP(t *testing.T) {
	in := servertest.Start(t, nil)
	base := "http://" + in.HTTPAddr
	do := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		out := map[string]any{}
		if len(bytes.TrimSpace(b)) > 0 {
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatalf("%s %s: %s", method, path, b)
			}
		}
		return resp.StatusCode, out
	}
	code, out := do("POST", "/v1/schedules", `{"scheduleId": "weekday-9", "spec": {"cron": {"expression": "0 9 * * MON-FRI", "timeZone": "Europe/Paris"}},
		"task": {"spec": {"apiVersion": "qar/v1", "kind": "AgentSpec", "instructions": "Report.", "model": "m"}}}`)
	if code != 200 || out["created"] != true {
		t.Fatalf("POST /v1/schedules = %d %v", code, out)
	}
	if code, out = do("GET", "/v1/schedules/weekday-9", ""); code != 200 || len(out["schedule"].(map[string]any)["nextNominalTimes"].([]any)) != 5 {
		t.Fatalf("GET = %d %v", code, out)
	}
	if code, out = do("PATCH", "/v1/schedules/weekday-9", `{"policy": {"overlap": "SCHEDULE_OVERLAP_POLICY_BUFFER_ONE"}}`); code != 200 {
		t.Fatalf("PATCH = %d %v", code, out)
	}
	if code, out = do("POST", "/v1/schedules/weekday-9:pause", `{"reason": "holiday"}`); code != 200 || out["schedule"].(map[string]any)["paused"] != true {
		t.Fatalf("pause = %d %v", code, out)
	}
	if code, out = do("POST", "/v1/schedules/weekday-9:resume", `{}`); code != 200 {
		t.Fatalf("resume = %d %v", code, out)
	}
	if code, out = do("POST", "/v1/schedules/weekday-9:trigger", `{"requestId": "r1"}`); code != 200 || out["task"] == nil {
		t.Fatalf("trigger = %d %v", code, out)
	}
	// The run is counted for operators.
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `agentplane_schedule_runs_total{outcome="started"} 1`) ||
		!strings.Contains(string(metrics), "agentplane_schedule_fire_lateness_seconds_bucket") {
		t.Fatalf("/metrics has no schedule runs:\n%s", metrics)
	}
	if code, out = do("GET", "/v1/schedules?pageSize=10", ""); code != 200 || len(out["schedules"].([]any)) != 1 {
		t.Fatalf("list = %d %v", code, out)
	}
	if code, out = do("DELETE", "/v1/schedules/weekday-9", ""); code != 200 {
		t.Fatalf("DELETE = %d %v", code, out)
	}
	if code, _ = do("GET", "/v1/schedules/weekday-9", ""); code != 404 {
		t.Fatalf("GET after DELETE = %d", code)
	}
}
