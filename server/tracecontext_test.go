package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
)

const (
	testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	testTracestate  = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
)

// TestTraceContextCapturedAtStart: the W3C trace context of StartTask, from gRPC
// metadata or HTTP headers, is kept on the task and handed to its lease; a malformed
// traceparent is not kept, nor a tracestate without one.
func TestTraceContextCapturedAtStart(t *testing.T) {
	in := servertest.Start(t, nil)
	agent := `{"apiVersion":"qar/v1","kind":"AgentSpec","instructions":"Be brief.","model":"m"}`
	start := func(t *testing.T, md ...string) *agentplanev1.Task {
		t.Helper()
		ctx := metadata.AppendToOutgoingContext(context.Background(), md...)
		resp, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
			Source: &agentplanev1.StartTaskRequest_Document{Document: []byte(agent)}, Input: client.UserText("hi")})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetTask()
	}

	t.Run("grpc", func(t *testing.T) {
		task := start(t, "traceparent", testTraceparent, "tracestate", testTracestate)
		if tc := task.GetTraceContext(); tc.GetTraceparent() != testTraceparent || tc.GetTracestate() != testTracestate {
			t.Fatalf("task trace context %v", tc)
		}
		resp, err := in.Client.Runtime.LeaseTasks(context.Background(), &agentplanev1.LeaseTasksRequest{RuntimeId: "rt"})
		if err != nil || len(resp.GetLeases()) != 1 {
			t.Fatalf("LeaseTasks: %v %v", resp, err)
		}
		l := resp.GetLeases()[0]
		if tc := l.GetTraceContext(); tc.GetTraceparent() != testTraceparent || tc.GetTracestate() != testTracestate ||
			l.GetTask().GetTraceContext().GetTraceparent() != testTraceparent {
			t.Fatalf("lease trace context %v", tc)
		}
		got, err := in.Client.Tasks.GetTask(context.Background(), &agentplanev1.GetTaskRequest{TaskId: task.GetTaskId()})
		if err != nil || got.GetTask().GetTraceContext().GetTraceparent() != testTraceparent {
			t.Fatalf("GetTask: %v %v", got, err)
		}
	})
	for name, md := range map[string][]string{
		"none":                 nil,
		"state only":           {"tracestate", testTracestate},
		"upper-case hex":       {"traceparent", strings.ToUpper(testTraceparent)},
		"zero trace id":        {"traceparent", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"},
		"version ff":           {"traceparent", "ff" + testTraceparent[2:]},
		"version 00 with more": {"traceparent", testTraceparent + "-extra"},
		"two traceparents":     {"traceparent", testTraceparent, "traceparent", testTraceparent},
	} {
		t.Run(name, func(t *testing.T) {
			if tc := start(t, md...).GetTraceContext(); tc != nil {
				t.Fatalf("kept %v", tc)
			}
		})
	}
	t.Run("tracestate too long is dropped", func(t *testing.T) {
		tc := start(t, "traceparent", testTraceparent, "tracestate", "a="+strings.Repeat("b", 600)).GetTraceContext()
		if tc.GetTraceparent() != testTraceparent || tc.GetTracestate() != "" {
			t.Fatalf("kept %v", tc)
		}
	})
	t.Run("http", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPost, "http://"+in.HTTPAddr+"/v1/tasks",
			strings.NewReader(`{"spec": `+agent+`, "input": {"parts": [{"text": "hi"}]}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Traceparent", testTraceparent)
		req.Header.Set("Tracestate", testTracestate)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out struct {
			Task struct {
				TraceContext struct{ Traceparent, Tracestate string } `json:"traceContext"`
			} `json:"task"`
		}
		if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %v: %s", resp.StatusCode, err, b)
		}
		if tc := out.Task.TraceContext; tc.Traceparent != testTraceparent || tc.Tracestate != testTracestate {
			t.Fatalf("HTTP task trace context %+v: %s", tc, b)
		}
	})
}
