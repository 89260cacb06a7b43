package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	"github.com/agentplane/agentplane/cmd/runtime/internal/agent"
	"github.com/agentplane/agentplane/cmd/runtime/internal/fakemodel"
	"github.com/agentplane/agentplane/cmd/runtime/internal/telemetry"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/tracing"
)

// benchSteps is the number of tool-calling steps of the bench agent.
const benchSteps = 10

// overhead sorts the runtime's calls to the control plane by what they served: a tool
// call (its gate and reports), a model turn (the assistant message's report and its
// deltas), or the lease (lease, history, heartbeat, completion). A tool result's
// report travels while the model is asked again: what of it stays on the step's path
// is the runtime's wait for it before the next assistant message (settled), not the
// report's own round trip (results).
type overhead struct {
	mu      sync.Mutex
	tool    map[string]*cost // by task and call id
	turn    []time.Duration
	gate    []time.Duration // CheckToolCall alone
	results []time.Duration // the tool results' reports, off the path
	settled []time.Duration // the waits for them, on the path
	lease   time.Duration
	trips   map[string]int // round trips by kind
	last    *cost          // the tool call gated last
}

// settle files a wait for a tool result's report under the call gated last.
func (o *overhead) settle(d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.settled = append(o.settled, d)
	if o.last != nil {
		o.last.d += d
	}
}

type cost struct {
	d     time.Duration
	trips int
}

func (o *overhead) interceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	err := invoke(ctx, method, req, reply, cc, opts...)
	d := time.Since(start)
	o.mu.Lock()
	defer o.mu.Unlock()
	toolCall := func(task, call string) {
		c := o.tool[task+"/"+call]
		if c == nil {
			c = &cost{}
			o.tool[task+"/"+call] = c
		}
		c.d += d
		c.trips++
		o.trips["tool"]++
		o.last = c
	}
	switch r := req.(type) {
	case *agentplanev1.CheckToolCallRequest:
		toolCall(r.GetLease().GetTaskId(), r.GetCallId())
		o.gate = append(o.gate, d)
		return err
	case *agentplanev1.ReportEventsRequest:
		if ev := r.GetEvents(); len(ev) > 0 {
			switch {
			case ev[0].GetToolCall() != nil:
				toolCall(r.GetLease().GetTaskId(), ev[0].GetToolCall().GetCallId())
				return err
			case ev[0].GetToolResult() != nil:
				o.results = append(o.results, d)
				o.trips["tool"]++
				return err
			case ev[0].GetMessage() != nil:
				o.turn = append(o.turn, d)
				o.trips["turn"]++
				return err
			}
		}
	case *agentplanev1.PublishDeltasRequest:
		if n := len(o.turn); n > 0 {
			o.turn[n-1] += d // deltas go before the message's report
		}
		o.trips["turn"]++
		return err
	}
	o.lease += d
	o.trips["lease"]++
	return err
}

// BenchmarkAgentTenSteps runs agent tasks of ten steps (each a model turn asking for
// one runtime HTTP tool call, then a final answer) against a fake model and a tool that
// answer at once, on an in-process control plane on its defaults, one task at a time.
// It reports the control plane's overhead on the step's path as the runtime sees it:
// per tool call, the gate (CheckToolCall, which logs the allowed call) plus the wait
// for its result's report, which travels while the model is asked again
// (result-p50-ms is that report's own round trip); per model turn, the assistant
// message's report and its deltas; round trips of each. With tracing on,
// the control plane and the runtime export every span over OTLP/HTTP to a receiver
// that decodes and drops them.
//
//	go test -run '^$' -bench AgentTenSteps -benchtime 50x ./cmd/runtime/
func BenchmarkAgentTenSteps(b *testing.B) {
	b.Run("tracing=off", func(b *testing.B) { benchAgent(b, false) })
	b.Run("tracing=on", func(b *testing.B) { benchAgent(b, true) })
}

func benchAgent(b *testing.B, traced bool) {
	tp := tracing.Off()
	var mutate func(*config.Config)
	if traced {
		rcv := startOTLPReceiver(b)
		rcv.mu.Lock()
		rcv.drop = true
		rcv.mu.Unlock()
		var err error
		if tp, err = tracing.New(context.Background(), config.Tracing{OTLPEndpoint: rcv.URL}, "bench-runtime", func(string) (string, bool) { return "", false }); err != nil {
			b.Fatal(err)
		}
		defer tp.Shutdown(context.Background())
		mutate = func(c *config.Config) { c.Tracing.OTLPEndpoint = rcv.URL }
	}
	in := servertest.Start(b, mutate)
	var turns []fakemodel.Turn
	for range b.N {
		for i := range benchSteps {
			turns = append(turns, fakemodel.Turn{Text: "step", Chunks: 1, PromptTokens: 100, CompletionTokens: 10,
				Calls: []fakemodel.Call{{ID: fmt.Sprintf("call_%d", i), Name: "lookup", Arguments: fmt.Sprintf(`{"step":%d}`, i)}}})
		}
		turns = append(turns, fakemodel.Turn{Text: "done", Chunks: 1})
	}
	model := fakemodel.Start(b, turns...)
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"ok":true}`) }))
	defer tool.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := &overhead{tool: map[string]*cost{}, trips: map[string]int{}}
	c, err := client.Dial(ctx, in.GRPCAddr, client.WithDialOptions(grpc.WithChainUnaryInterceptor(tracing.UnaryClientInterceptor(), o.interceptor)))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := &agent.Runner{
		Routes:    []agent.Route{{Pattern: "*", BaseURL: model.URL}},
		Tools:     []*agent.HTTPTool{{Name: "lookup", URL: tool.URL}},
		Logger:    logger,
		Telemetry: telemetry.New(telemetry.NewMetrics(), tp),
	}
	// Tasks run one at a time, so a wait for a result's report belongs to the call
	// gated last.
	r.ObserveSettle = o.settle
	ended := make(chan error, 1)
	h := r.Telemetry.Handler(r)
	w, err := worker.New(c.Runtime, worker.HandlerFunc(func(ctx context.Context, t *worker.Task) error {
		err := h.Run(ctx, t)
		ended <- err
		return err
	}), worker.Options{RuntimeID: "bench", Queues: []string{"bench"}, Capacity: 1, PollWait: time.Second, Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = w.Run(ctx) }()
	doc := []byte("apiVersion: qar/v1\nkind: AgentSpec\nname: bench\ninstructions: Look things up.\nmodel: fake-1\n")

	b.ResetTimer()
	for range b.N {
		resp, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
			Source: &agentplanev1.StartTaskRequest_Document{Document: doc},
			Format: agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML, Input: client.UserText("go"), Queue: "bench",
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := <-ended; err != nil {
			b.Fatalf("task %s: %v", resp.GetTask().GetTaskId(), err)
		}
	}
	b.StopTimer()

	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.tool) != b.N*benchSteps {
		b.Fatalf("%d tool calls seen, want %d", len(o.tool), b.N*benchSteps)
	}
	var calls []time.Duration
	for _, c := range o.tool {
		calls = append(calls, c.d)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(pct(calls, 50)), "tool-p50-ms")
	b.ReportMetric(ms(pct(calls, 99)), "tool-p99-ms")
	b.ReportMetric(float64(o.trips["tool"])/float64(len(calls)), "tool-rt")
	b.ReportMetric(ms(pct(o.gate, 50)), "gate-p50-ms")
	b.ReportMetric(ms(pct(o.results, 50)), "result-p50-ms")
	b.ReportMetric(ms(pct(o.settled, 50)), "settle-p50-ms")
	b.ReportMetric(ms(pct(o.settled, 99)), "settle-p99-ms")
	b.ReportMetric(ms(pct(o.turn, 50)), "turn-p50-ms")
	b.ReportMetric(ms(pct(o.turn, 99)), "turn-p99-ms")
	b.ReportMetric(float64(o.trips["turn"])/float64(len(o.turn)), "turn-rt")
	b.ReportMetric(ms(o.lease)/float64(b.N), "lease-ms/task")
	b.ReportMetric(float64(o.trips["lease"])/float64(b.N), "lease-rt/task")
}

// pct is the p-th percentile of ds (nearest rank).
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}
