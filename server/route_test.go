package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
)

// TestQueuesEndToEnd: tasks started on a queue are leased only by runtimes serving it,
// carry their queue, filter listings, and are counted per queue in GetStats and
// /metrics.
func TestQueuesEndToEnd(t *testing.T) {
	in := servertest.Start(t, nil)
	c := in.Client
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	doc, err := os.ReadFile("../examples/agents/support-chat.yaml")
	if err != nil {
		t.Fatal(err)
	}
	start := func(queue string) *agentplanev1.Task {
		t.Helper()
		resp, err := c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{Source: &agentplanev1.StartTaskRequest_Document{Document: doc}, Input: client.UserText("hi"), Queue: queue})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetTask()
	}
	plain, gpu1, _ := start(""), start("gpu"), start("gpu")
	if plain.GetQueue() != "default" || gpu1.GetQueue() != "gpu" {
		t.Fatalf("queues %q %q", plain.GetQueue(), gpu1.GetQueue())
	}
	_, err = c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{Source: &agentplanev1.StartTaskRequest_Document{Document: doc}, Input: client.UserText("hi"), Queue: "gpu a100"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `queue "gpu a100" is not a queue name`) {
		t.Fatalf("bad queue: %v", err)
	}

	stats, err := c.Admin.GetStats(ctx, &agentplanev1.GetStatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if d := stats.GetQueueDepth(); len(d) != 2 || d["default"] != 1 || d["gpu"] != 2 {
		t.Fatalf("queue depth %v", d)
	}
	resp, err := http.Get("http://" + in.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range []string{`agentplane_queue_depth{queue="gpu"} 2`, `agentplane_queue_depth{queue="default"} 1`} {
		if !strings.Contains(string(body), line+"\n") {
			t.Fatalf("/metrics lacks %s", line)
		}
	}

	list, err := c.Tasks.ListTasks(ctx, &agentplanev1.ListTasksRequest{Queue: "gpu"})
	if err != nil || len(list.GetTasks()) != 2 {
		t.Fatalf("ListTasks(gpu) = %v, %v", list, err)
	}

	lease := func(queues ...string) []string {
		t.Helper()
		resp, err := c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt", MaxTasks: 10, Queues: queues})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, l := range resp.GetLeases() {
			ids = append(ids, l.GetTask().GetTaskId())
		}
		return ids
	}
	if got := lease(); len(got) != 1 || got[0] != plain.GetTaskId() {
		t.Fatalf("a runtime naming no queue leased %v; want only %s", got, plain.GetTaskId())
	}
	if got := lease("gpu"); len(got) != 2 {
		t.Fatalf("the gpu runtime leased %v", got)
	}
	stats, err = c.Admin.GetStats(ctx, &agentplanev1.GetStatsRequest{})
	if err != nil || len(stats.GetQueueDepth()) != 0 {
		t.Fatalf("queue depth after leasing everything: %v, %v", stats.GetQueueDepth(), err)
	}
}

// TestQueueDepthSeriesAreBounded: queue names are the callers', so /metrics has a
// series for the 64 deepest queues and sums the rest under queue="_other"; GetStats
// (admin only) counts every queue.
func TestQueueDepthSeriesAreBounded(t *testing.T) {
	in := servertest.Start(t, nil)
	c := in.Client
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	doc, err := os.ReadFile("../examples/agents/support-chat.yaml")
	if err != nil {
		t.Fatal(err)
	}
	queues := []string{"deep", "deep"}
	for i := range 65 {
		queues = append(queues, fmt.Sprintf("q%02d", i))
	}
	for _, q := range queues {
		if _, err := c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{Source: &agentplanev1.StartTaskRequest_Document{Document: doc}, Input: client.UserText("hi"), Queue: q}); err != nil {
			t.Fatal(err)
		}
	}
	stats, err := c.Admin.GetStats(ctx, &agentplanev1.GetStatsRequest{})
	if err != nil || len(stats.GetQueueDepth()) != 66 {
		t.Fatalf("GetStats counts %d queues, %v; want 66", len(stats.GetQueueDepth()), err)
	}
	resp, err := http.Get("http://" + in.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	series := regexp.MustCompile(`(?m)^agentplane_queue_depth\{queue="([^"]+)"\} (\d+)$`).FindAllStringSubmatch(string(body), -1)
	got := map[string]string{}
	for _, s := range series {
		got[s[1]] = s[2]
	}
	// The deepest first, then by name: deep and q00..q62 have series; q63 and q64 are summed.
	if len(series) != 65 || got["deep"] != "2" || got["q62"] != "1" || got["q63"] != "" || got["_other"] != "2" {
		t.Fatalf("%d queue_depth series: deep=%q q62=%q q63=%q _other=%q", len(series), got["deep"], got["q62"], got["q63"], got["_other"])
	}
}
