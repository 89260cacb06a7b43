package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

// TestTaskViewsPerRPC: StartTask and ListTasks answer the basic view unless asked for
// the full one, GetTask the full view unless asked for the basic one, over gRPC and
// HTTP/JSON; a view the API does not define is INVALID_ARGUMENT.
func TestTaskViewsPerRPC(t *testing.T) {
	in := servertest.Start(t, nil)
	ctx := context.Background()
	tasks := in.Client.Tasks
	const basic, full, unspecified = agentplanev1.TaskView_TASK_VIEW_BASIC, agentplanev1.TaskView_TASK_VIEW_FULL, agentplanev1.TaskView_TASK_VIEW_UNSPECIFIED
	start := func(view agentplanev1.TaskView) *agentplanev1.Task {
		t.Helper()
		resp, err := tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{RequestId: "r",
			Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}, Input: client.UserText("hi"), View: view})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetTask()
	}
	hasSpec := func(task *agentplanev1.Task) bool { return task.GetAgent().GetName() == "teller" }
	check := func(what string, task *agentplanev1.Task, wantSpec bool) {
		t.Helper()
		if hasSpec(task) != wantSpec || task.GetSpecKind() != "AgentSpec" {
			t.Errorf("%s: spec %v, spec_kind %q; want the spec: %v", what, task.GetSpec() != nil, task.GetSpecKind(), wantSpec)
		}
	}
	// Retries of one request in each view: the same task, each in the view asked for.
	check("StartTask", start(unspecified), false)
	check("StartTask BASIC", start(basic), false)
	id := start(full).GetTaskId()
	check("StartTask FULL", start(full), true)
	for view, want := range map[agentplanev1.TaskView]bool{unspecified: true, basic: false, full: true} {
		resp, err := tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: id, View: view})
		if err != nil {
			t.Fatal(err)
		}
		check("GetTask "+view.String(), resp.GetTask(), want)
	}
	for view, want := range map[agentplanev1.TaskView]bool{unspecified: false, basic: false, full: true} {
		resp, err := tasks.ListTasks(ctx, &agentplanev1.ListTasksRequest{View: view})
		if err != nil || len(resp.GetTasks()) != 1 {
			t.Fatalf("ListTasks %v: %d tasks, %v", view, len(resp.GetTasks()), err)
		}
		check("ListTasks "+view.String(), resp.GetTasks()[0], want)
	}

	bad := agentplanev1.TaskView(7)
	_, errGet := tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: id, View: bad})
	_, errList := tasks.ListTasks(ctx, &agentplanev1.ListTasksRequest{View: bad})
	_, errStart := tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}, View: bad})
	for name, err := range map[string]error{"GetTask": errGet, "ListTasks": errList, "StartTask": errStart} {
		if status.Code(err) != codes.InvalidArgument || reasonOf(err) != apierr.ReasonInvalidArgument {
			t.Errorf("%s with view 7: %v, want INVALID_ARGUMENT", name, err)
		}
	}

	// HTTP/JSON: the view is a query parameter of the GETs, a body field of the POST.
	get := func(method, path, body string) *agentplanev1.Task {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, "http://"+in.HTTPAddr+path, strings.NewReader(body))
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
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		var list agentplanev1.ListTasksResponse
		var one agentplanev1.GetTaskResponse
		if strings.HasPrefix(path, "/v1/tasks?") {
			if err := protojson.Unmarshal(b, &list); err != nil || len(list.GetTasks()) == 0 {
				t.Fatalf("%s: %v %s", path, err, b)
			}
			return list.GetTasks()[0]
		}
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &one); err != nil { // StartTaskResponse too
			t.Fatalf("%s: %v %s", path, err, b)
		}
		return one.GetTask()
	}
	check("GET /v1/tasks/ID", get(http.MethodGet, "/v1/tasks/"+id, ""), true)
	check("GET /v1/tasks/ID?view=TASK_VIEW_BASIC", get(http.MethodGet, "/v1/tasks/"+id+"?view=TASK_VIEW_BASIC", ""), false)
	check("GET /v1/tasks?page_size=1", get(http.MethodGet, "/v1/tasks?page_size=1", ""), false)
	check("GET /v1/tasks?view=TASK_VIEW_FULL", get(http.MethodGet, "/v1/tasks?view=TASK_VIEW_FULL", ""), true)
	agentJSON, err := specwire.Encode(tenancyAgent())
	if err != nil {
		t.Fatal(err)
	}
	check("POST /v1/tasks", get(http.MethodPost, "/v1/tasks", `{"spec":`+string(agentJSON)+`}`), false)
	check("POST /v1/tasks view FULL", get(http.MethodPost, "/v1/tasks", `{"view":"TASK_VIEW_FULL","spec":`+string(agentJSON)+`}`), true)
}

// TestListTasksByteCap: through the server, limits.max_list_response_bytes ends a
// page early with a token, and the pages together list every task.
func TestListTasksByteCap(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) { c.Limits.MaxListResponseBytes = 4 << 10 })
	ctx := context.Background()
	big := tenancyAgent()
	big.Instructions = &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: strings.Repeat("be brief. ", 300)}}
	const n = 5
	for range n {
		if _, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(big)}, Input: client.UserText("hi")}); err != nil {
			t.Fatal(err)
		}
	}
	for view, wantPages := range map[agentplanev1.TaskView]int{agentplanev1.TaskView_TASK_VIEW_BASIC: 1, agentplanev1.TaskView_TASK_VIEW_FULL: n} {
		seen, pages := map[string]bool{}, 0
		req := &agentplanev1.ListTasksRequest{PageSize: 500, View: view}
		for pages < 2*n {
			resp, err := in.Client.Tasks.ListTasks(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if size := proto.Size(resp); len(resp.GetTasks()) > 1 && size > 4<<10 {
				t.Errorf("%v: a page of %d tasks is %d bytes, over the 4 KiB cap", view, len(resp.GetTasks()), size)
			}
			for _, task := range resp.GetTasks() {
				seen[task.GetTaskId()] = true
			}
			if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
				break
			}
		}
		if len(seen) != n || pages != wantPages {
			t.Errorf("%v: %d tasks in %d pages, want %d in %d", view, len(seen), pages, n, wantPages)
		}
	}
}
