package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

// TestFlowOverTheWire: a queue's start rate refuses StartTask over gRPC with
// RESOURCE_EXHAUSTED, reason FLOW_RATE_LIMITED, its metadata and one RetryInfo whose
// delay is the bucket's; priority round-trips; the refusals and queue waits show on
// /metrics.
func TestFlowOverTheWire(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) {
		c.Flow.Queues = map[string]config.QueueFlow{
			"reports": {Rate: &config.Rate{Key: `labels["customer"]`, On: config.RateOnStart, PerSecond: 0.1, Burst: 1}},
		}
	})
	ctx := context.Background()
	// No client retries: the SDK would wait out the RetryInfo and try again.
	c, err := client.Dial(ctx, in.GRPCAddr, client.WithRetry(client.Retry{Attempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := func(customer string, prio int32) (*agentplanev1.StartTaskResponse, error) {
		return c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
			Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(&agentplanev1.AgentSpec{ApiVersion: "qar/v1", Kind: "AgentSpec", Model: "m",
				Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "hi"}}})},
			Input: client.UserText("report"), Queue: "reports", Labels: map[string]string{"customer": customer}, Priority: prio,
		})
	}
	first, err := start("a", 3)
	if err != nil {
		t.Fatal(err)
	}
	if first.GetTask().GetPriority() != 3 {
		t.Fatalf("priority = %d, want 3", first.GetTask().GetPriority())
	}
	_, err = start("a", 0)
	if status.Code(err) != codes.ResourceExhausted || reasons.Of(err) != agentplanev1.ErrorReason_ERROR_REASON_FLOW_RATE_LIMITED {
		t.Fatalf("second start of customer a = %v; want RESOURCE_EXHAUSTED FLOW_RATE_LIMITED", err)
	}
	if md := reasons.Info(err).GetMetadata(); md["queue"] != "reports" || md["key"] != "a" || md["rate"] != "0.1" {
		t.Fatalf("ErrorInfo metadata = %v", md)
	}
	delay, ok := reasons.RetryAfter(err)
	if !ok || delay <= 9*time.Second || delay > 10*time.Second {
		t.Fatalf("RetryInfo = %v, %v; want about 10s (one token at 0.1/s)", delay, ok)
	}
	n := 0
	for _, d := range status.Convert(err).Details() {
		if _, isRetry := d.(*errdetails.RetryInfo); isRetry {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d RetryInfo details, want 1", n)
	}
	if _, err := start("b", 0); err != nil {
		t.Fatalf("customer b is not limited by customer a's bucket: %v", err)
	}
	resp, err := http.Get("http://" + in.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `agentplane_flow_limited_total{outcome="start_rate_limited",queue="reports"} 1`; !strings.Contains(string(b), want) {
		t.Fatalf("/metrics lacks %s", want)
	}
}

// TestTaskConcurrencyOverTheWire: StartTaskRequest.concurrency reaches the task (its
// cap and the key it computed), and a key that does not compile is INVALID_ARGUMENT
// with a BadRequest naming concurrency.key.
func TestTaskConcurrencyOverTheWire(t *testing.T) {
	in := servertest.Start(t, nil)
	ctx := context.Background()
	c, err := client.Dial(ctx, in.GRPCAddr, client.WithRetry(client.Retry{Attempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := func(key string) (*agentplanev1.StartTaskResponse, error) {
		return c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
			Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(&agentplanev1.AgentSpec{ApiVersion: "qar/v1", Kind: "AgentSpec", Model: "m",
				Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "hi"}}})},
			Input: client.UserText("report"), Labels: map[string]string{"customer": "globex"},
			Concurrency: &agentplanev1.ConcurrencyLimit{Key: key, Limit: 1},
		})
	}
	resp, err := start(`"c-" + labels["customer"]`)
	if err != nil {
		t.Fatal(err)
	}
	if task := resp.GetTask(); task.GetConcurrency().GetLimit() != 1 || task.GetConcurrencyKey() != "c-globex" {
		t.Fatalf("task concurrency %v key %q", task.GetConcurrency(), task.GetConcurrencyKey())
	}
	_, err = start(`labels[`)
	if status.Code(err) != codes.InvalidArgument || reasons.Of(err) != agentplanev1.ErrorReason_ERROR_REASON_REQUEST_INVALID {
		t.Fatalf("a key that does not compile = %v; want INVALID_ARGUMENT REQUEST_INVALID", err)
	}
	var fields []string
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fields = append(fields, v.GetField())
			}
		}
	}
	if len(fields) != 1 || fields[0] != "concurrency.key" {
		t.Fatalf("BadRequest fields %v, want [concurrency.key]", fields)
	}
}
