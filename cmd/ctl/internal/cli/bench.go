package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	"github.com/agentplane/agentplane/cmd/ctl/internal/printer"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// newBenchCommand builds the bench group. It is one of the command areas; root.go
// lists it with the others.
func newBenchCommand(g *globals) *cobra.Command {
	cmd := group("bench", "Measure the control plane: task starts, event appends, the approval round trip, an empty call")
	cmd.Long = "Load generators. Each run prints one summary line:\n" +
		"  NAME clients=N total=M: X req/s p50=... p90=... p99=...\n" +
		"Bench tasks are started on a run queue of their own, bench-RUN_ID, which no other runtime serves,\n" +
		"and carry the label bench=RUN_ID. bench events and bench gate lease them from that queue and\n" +
		"complete them; bench start cancels the tasks it started once it has measured."
	cmd.AddCommand(newBenchStartCommand(g), newBenchEventsCommand(g), newBenchGateCommand(g), newBenchHealthCommand(g))
	return cmd
}

// newBenchHealthCommand measures the gRPC health check: an RPC that does next to
// nothing, so its throughput is what the transport, the interceptors and the machine
// allow any handler; the other benches read against it.
func newBenchHealthCommand(g *globals) *cobra.Command {
	return newCallBench(g, "health", "The floor of any call: the gRPC health check, which does next to nothing",
		func(ctx context.Context, b *benchRun, caller, _ int) error {
			_, err := b.conn(caller).Health.Check(ctx, &healthpb.HealthCheckRequest{})
			return err
		}, false)
}

// newCallBench is a bench that makes one call per iteration from --clients callers;
// labeled says the calls create tasks labeled with the run's id, which it cancels
// once it has measured (benchRun.cancelStarted).
func newCallBench(g *globals, name, short string, call func(ctx context.Context, b *benchRun, caller, i int) error, labeled bool) *cobra.Command {
	o := &benchOptions{}
	cmd := &cobra.Command{
		Use:   name,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check(); err != nil {
				return err
			}
			b, ctx, done, err := newBenchRun(g, cmd, o.conns, o.addrs)
			if err != nil {
				return err
			}
			defer done()
			lat, elapsed, err := load(ctx, o.clients, o.total, func(ctx context.Context, caller, i int) error {
				return call(ctx, b, caller, i)
			})
			if err != nil {
				return grpcCause(err)
			}
			res := summary{name: name, clients: o.clients, total: o.total, elapsed: elapsed, lat: lat}
			if labeled {
				res.extra = [][2]string{{"label", "bench=" + b.id}}
			}
			if err := res.print(g.printer(cmd)); err != nil {
				return err
			}
			if labeled {
				return grpcCause(b.cancelStarted(ctx, o.clients))
			}
			return nil
		},
	}
	o.bind(cmd, true)
	return cmd
}

type benchOptions struct {
	clients int
	total   int
	conns   int
	batch   int
	addrs   []string
}

func (o *benchOptions) bind(cmd *cobra.Command, clients bool) {
	f := cmd.Flags()
	if clients {
		f.IntVar(&o.clients, "clients", 1, "concurrent callers")
		f.IntVar(&o.conns, "conns", 1, "gRPC connections the callers share (round robin)")
		f.StringSliceVar(&o.addrs, "addrs", nil, "control planes sharing one store (comma-separated host:port): the connections are\n"+
			"spread over them in turn, at least one each (default: --addr)")
	}
	f.IntVar(&o.total, "total", 1000, "calls to make in all")
}

func (o *benchOptions) check() error {
	if o.clients < 1 || o.total < 1 || o.conns < 1 {
		return usageErr("--clients, --total and --conns must be at least 1")
	}
	if o.batch < 0 {
		return usageErr("--batch must not be negative")
	}
	if o.clients > o.total {
		o.clients = o.total
	}
	o.conns = max(o.conns, len(o.addrs))
	return nil
}

// benchRun is what every bench command shares: a run id, connections, a context that
// Ctrl-C cancels, and the summary printer.
type benchRun struct {
	g     *globals
	cmd   *cobra.Command
	id    string
	conns []*client.Client

	// specs are the bench agent's spec as the request's Struct, plain and gated
	// (benchAgent), built once per run: every StartTask of the run sends the same one
	// (the calls only read it), so the bench measures the server, not the client
	// building a Struct per call.
	specs [2]*structpb.Struct

	mu      sync.Mutex
	started []started // tasks started by bench start, canceled at its end
}

// started is a task bench start started, and the connection it went through.
type started struct {
	id   string
	conn int
}

// cancelStarted cancels the tasks bench start started, from clients callers, so that
// they leave the run's queue.
func (b *benchRun) cancelStarted(ctx context.Context, clients int) error {
	b.mu.Lock()
	ids := b.started
	b.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	_, _, err := load(ctx, min(clients, len(ids)), len(ids), func(ctx context.Context, _, i int) error {
		_, err := b.conns[ids[i].conn].Tasks.CancelTask(ctx, &agentplanev1.CancelTaskRequest{TaskId: ids[i].id, Reason: "ctl bench cleanup"})
		return err
	})
	if err != nil {
		return fmt.Errorf("canceling the bench's tasks (queue %s): %w", b.queue(), err)
	}
	fmt.Fprintf(b.cmd.ErrOrStderr(), "bench: canceled the %d tasks it started\n", len(ids))
	return nil
}

// newBenchRun dials conns connections, spread over addrs in turn (none: --addr).
func newBenchRun(g *globals, cmd *cobra.Command, conns int, addrs []string) (*benchRun, context.Context, func(), error) {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	b := &benchRun{g: g, cmd: cmd, id: randomID(),
		specs: [2]*structpb.Struct{specwire.MustStruct(benchAgent(false)), specwire.MustStruct(benchAgent(true))}}
	if len(addrs) == 0 {
		addrs = []string{g.addr}
	}
	for i := range conns {
		c, err := g.dialAddr(ctx, addrs[i%len(addrs)])
		if err != nil {
			stop()
			b.close()
			return nil, nil, nil, err
		}
		b.conns = append(b.conns, c)
	}
	return b, ctx, func() { b.close(); stop() }, nil
}

func (b *benchRun) close() {
	for _, c := range b.conns {
		_ = c.Close()
	}
}

// queue is the run's own run queue: no other runtime leases its tasks.
func (b *benchRun) queue() string { return "bench-" + b.id }

// conn is the connection of caller i.
func (b *benchRun) conn(i int) *client.Client { return b.conns[i%len(b.conns)] }

func randomID() string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	return hex.EncodeToString(r[:])
}

// load makes total calls of op from clients goroutines and returns each call's
// latency. The first error stops every caller.
func load(ctx context.Context, clients, total int, op func(ctx context.Context, caller, i int) error) (lat []time.Duration, elapsed time.Duration, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	per := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= total || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				if err := op(ctx, c, i); err != nil {
					cancel(fmt.Errorf("call %d: %w", i+1, err))
					return
				}
				per[c] = append(per[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed = time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return nil, elapsed, err
	}
	for _, p := range per {
		lat = append(lat, p...)
	}
	return lat, elapsed, nil
}

// summary is one run's result.
type summary struct {
	name           string
	clients, total int
	elapsed        time.Duration
	lat            []time.Duration
	extra          [][2]string // more name=value pairs, printed after the percentiles
}

// percentile is the nearest-rank percentile of sorted latencies.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// fmtLatency prints a latency with three significant digits in a readable unit.
func fmtLatency(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.3gµs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.3gms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.3gs", d.Seconds())
}

// print writes the summary line (or, with -o json/yaml, the same figures as a document).
func (s summary) print(p *printer.Printer) error {
	slices.Sort(s.lat)
	rate := float64(len(s.lat)) / s.elapsed.Seconds()
	p50, p90, p99 := percentile(s.lat, 0.50), percentile(s.lat, 0.90), percentile(s.lat, 0.99)
	line := fmt.Sprintf("%s clients=%d total=%d: %.0f req/s p50=%s p90=%s p99=%s", s.name, s.clients, s.total, rate,
		fmtLatency(p50), fmtLatency(p90), fmtLatency(p99))
	doc := map[string]any{
		"bench": s.name, "clients": s.clients, "total": s.total, "seconds": s.elapsed.Seconds(), "req_per_sec": rate,
		"p50_ms": ms(p50), "p90_ms": ms(p90), "p99_ms": ms(p99),
	}
	for _, kv := range s.extra {
		line += " " + kv[0] + "=" + kv[1]
		doc[kv[0]] = kv[1]
	}
	m, err := structpb.NewStruct(doc)
	if err != nil {
		return err
	}
	return p.Message(m, func(t *printer.Tab) { t.Row(line) })
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchAgent is the small inline agent every bench task runs; gated adds the tool
// bench gate asks about.
func benchAgent(gated bool) *agentplanev1.AgentSpec {
	a := &agentplanev1.AgentSpec{
		ApiVersion:   "qar/v1",
		Kind:         "AgentSpec",
		Name:         proto.String("bench"),
		Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "Answer briefly."}},
		Model:        "bench-model",
	}
	if gated {
		params, _ := structpb.NewStruct(map[string]any{
			"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}},
			"required": []any{"n"}, "additionalProperties": false,
		})
		a.Tools = []*agentplanev1.FunctionTool{{Type: "function", Function: &agentplanev1.FunctionDef{
			Name: benchGatedTool, Description: proto.String("A tool every call of which needs approval"), Parameters: params,
		}}}
	}
	return a
}

const benchGatedTool = "bench_gated"

// spec is the run's Struct of benchAgent(gated).
func (b *benchRun) spec(gated bool) *structpb.Struct {
	if gated {
		return b.specs[1]
	}
	return b.specs[0]
}

func (b *benchRun) startRequest(i int, gated bool) *agentplanev1.StartTaskRequest {
	req := &agentplanev1.StartTaskRequest{
		RequestId: fmt.Sprintf("bench-%s-%d", b.id, i),
		Source:    &agentplanev1.StartTaskRequest_Spec{Spec: b.spec(gated)},
		Input:     client.UserText("bench"),
		Labels:    map[string]string{"bench": b.id},
		Queue:     b.queue(),
	}
	if gated {
		req.InterruptPolicy = &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Allowlist{
			Allowlist: &agentplanev1.ToolListPolicy{Tools: []string{benchGatedTool}},
		}}
	}
	return req
}

func newBenchStartCommand(g *globals) *cobra.Command {
	return newCallBench(g, "start", "StartTask throughput and latency: concurrent starts with distinct request ids",
		func(ctx context.Context, b *benchRun, caller, i int) error {
			resp, err := b.conn(caller).Tasks.StartTask(ctx, b.startRequest(i, false))
			if err == nil {
				b.mu.Lock()
				b.started = append(b.started, started{resp.GetTask().GetTaskId(), caller % len(b.conns)})
				b.mu.Unlock()
			}
			return err
		}, true)
}

func newBenchEventsCommand(g *globals) *cobra.Command {
	o := &benchOptions{}
	cmd := &cobra.Command{
		Use:   "events",
		Short: "ReportEvents throughput and latency: each client leases a task and appends events to it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check(); err != nil {
				return err
			}
			b, ctx, done, err := newBenchRun(g, cmd, o.conns, o.addrs)
			if err != nil {
				return err
			}
			defer done()
			tasks, finish, err := b.leaseTasks(ctx, o.clients, false)
			if err != nil {
				return grpcCause(err)
			}
			lat, elapsed, err := load(ctx, o.clients, o.total, func(ctx context.Context, caller, i int) error {
				events := make([]*agentplanev1.RuntimeEvent, max(o.batch, 1))
				for j := range events {
					events[j] = worker.MessageEvent(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, fmt.Sprintf("bench event %d.%d", i, j), "bench")
				}
				_, err := tasks[caller].Report(ctx, events...)
				return err
			})
			if ferr := finish(); err == nil {
				err = ferr
			}
			if err != nil {
				return grpcCause(err)
			}
			return summary{name: "events", clients: o.clients, total: o.total, elapsed: elapsed, lat: lat,
				extra: [][2]string{{"batch", fmt.Sprint(max(o.batch, 1))}, {"label", "bench=" + b.id}}}.print(g.printer(cmd))
		},
	}
	o.bind(cmd, true)
	cmd.Flags().IntVar(&o.batch, "batch", 1, "events per ReportEvents call")
	return cmd
}

func newBenchGateCommand(g *globals) *cobra.Command {
	o := &benchOptions{clients: 1, conns: 1}
	cmd := &cobra.Command{
		Use:   "gate",
		Short: "The approval round trip: a gated tool call until the runtime holds the decision, without the human",
		Long: "One runtime task makes --total gated tool calls in sequence; an approver goroutine approves each\n" +
			"through HitlService. For each call the round trip is\n" +
			"  (CheckToolCall, until it returns the interrupt)\n" +
			"+ (from the moment the approver sends ResolveInterrupt until the runtime, already waiting on\n" +
			"   AwaitDecision, receives the decision).\n" +
			"Left out is the time between the two: handing the interrupt id to the approver stands for a\n" +
			"person noticing and deciding. Also left out: the runtime then reports the call and its result,\n" +
			"as every runtime does. check_* and deliver_* report the two parts.\n" +
			"With --addrs A,B the runtime works on A and the approver on B: the decision crosses replicas.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check(); err != nil {
				return err
			}
			if len(o.addrs) > 2 {
				return usageErr("bench gate takes at most two --addrs: the runtime's and the approver's")
			}
			b, ctx, done, err := newBenchRun(g, cmd, max(1, len(o.addrs)), o.addrs)
			if err != nil {
				return err
			}
			defer done()
			tasks, finish, err := b.leaseTasks(ctx, 1, true)
			if err != nil {
				return grpcCause(err)
			}
			res, err := b.gateRoundTrips(ctx, tasks[0], o.total)
			if ferr := finish(); err == nil {
				err = ferr
			}
			if err != nil {
				return grpcCause(err)
			}
			slices.Sort(res.check)
			slices.Sort(res.deliver)
			return summary{name: "gate", clients: 1, total: o.total, elapsed: res.sum, lat: res.total, extra: [][2]string{
				{"check_p50", fmtLatency(percentile(res.check, 0.5))}, {"check_p99", fmtLatency(percentile(res.check, 0.99))},
				{"deliver_p50", fmtLatency(percentile(res.deliver, 0.5))}, {"deliver_p99", fmtLatency(percentile(res.deliver, 0.99))},
			}}.print(g.printer(cmd))
		},
	}
	o.bind(cmd, false)
	cmd.Flags().StringSliceVar(&o.addrs, "addrs", nil, "two control planes sharing one store (host:port,host:port): the runtime's, then the approver's\n"+
		"(default: --addr for both)")
	return cmd
}

// gateResult holds the measured parts of every round trip.
type gateResult struct {
	check, deliver, total []time.Duration
	sum                   time.Duration // of total, so that req/s is 1/mean round trip
}

func (b *benchRun) gateRoundTrips(ctx context.Context, t *worker.Task, n int) (gateResult, error) {
	c, approver := b.conn(0), b.conn(1)
	type handoff struct {
		id   string
		sent chan time.Time // when the approver sent ResolveInterrupt
	}
	work := make(chan handoff)
	approverErr := make(chan error, 1)
	go func() {
		for h := range work {
			sent := time.Now()
			h.sent <- sent
			_, err := approver.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{
				InterruptId: h.id, Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}},
			})
			if err != nil {
				approverErr <- err
				return
			}
		}
		approverErr <- nil
	}()
	defer func() { close(work); <-approverErr }()

	var r gateResult
	args := `{"n":0}`
	for i := range n {
		call := fmt.Sprintf("bench-%d", i)
		t0 := time.Now()
		resp, err := c.Runtime.CheckToolCall(ctx, &agentplanev1.CheckToolCallRequest{
			Lease: t.Ref(), CallId: call, ToolName: benchGatedTool, ArgumentsJson: args, AgentName: "bench",
		})
		if err != nil {
			return r, err
		}
		check := time.Since(t0)
		if resp.GetOutcome() != agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT {
			return r, fmt.Errorf("the gate answered %s (%s) instead of an interrupt for %s, which the bench task's allowlist gates",
				resp.GetOutcome(), resp.GetReason(), benchGatedTool)
		}
		actx, cancel := context.WithCancel(ctx)
		stream, err := c.Runtime.AwaitDecision(actx, &agentplanev1.AwaitDecisionRequest{Lease: t.Ref(), InterruptId: resp.GetInterrupt().GetInterruptId()})
		if err != nil {
			cancel()
			return r, err
		}
		h := handoff{id: resp.GetInterrupt().GetInterruptId(), sent: make(chan time.Time, 1)}
		select {
		case work <- h:
		case err := <-approverErr:
			cancel()
			return r, fmt.Errorf("approver: %w", err)
		}
		dec, err := stream.Recv()
		for err == nil && dec.GetDecision() == nil { // pending, keepalives
			dec, err = stream.Recv()
		}
		got := time.Now()
		cancel()
		if err != nil {
			return r, fmt.Errorf("awaiting decision on %s: %w", h.id, err)
		}
		if dec.GetDecision().GetType() != agentplanev1.DecisionType_DECISION_TYPE_APPROVE {
			return r, fmt.Errorf("interrupt %s: got %s, want the approval", h.id, dec.GetDecision().GetType())
		}
		deliver := got.Sub(<-h.sent)
		// Run the call, as a runtime would, and report it (untimed): the report
		// spends the decision.
		if _, err := c.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: t.Ref(), Events: []*agentplanev1.RuntimeEvent{
			{Payload: &agentplanev1.RuntimeEvent_ToolCall{ToolCall: &agentplanev1.ToolCall{CallId: call, ToolName: benchGatedTool, ArgumentsJson: args}}},
			{Payload: &agentplanev1.RuntimeEvent_ToolResult{ToolResult: &agentplanev1.ToolResult{CallId: call, ToolName: benchGatedTool, Result: structpb.NewNumberValue(1)}}},
		}}); err != nil {
			return r, fmt.Errorf("reporting call %s: %w", call, err)
		}
		r.check = append(r.check, check)
		r.deliver = append(r.deliver, deliver)
		r.total = append(r.total, check+deliver)
		r.sum += check + deliver
	}
	return r, nil
}

// leaseTasks starts n bench tasks and leases them through the runtime SDK, which
// keeps their leases alive for as long as the bench runs: task i for caller i, through
// caller i's connection (one runtime per connection), so that with several addresses
// each control plane serves its own callers' tasks. finish completes them and stops
// the runtimes.
func (b *benchRun) leaseTasks(ctx context.Context, n int, gated bool) (tasks []*worker.Task, finish func() error, err error) {
	tasks = make([]*worker.Task, n)
	var stops []func() error
	finish = func() error {
		var first error
		for _, stop := range stops {
			if err := stop(); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	for j := range min(n, len(b.conns)) {
		var callers []int
		for i := j; i < n; i += len(b.conns) {
			callers = append(callers, i)
		}
		leased, stop, err := b.leaseOn(ctx, j, callers, gated)
		if err != nil {
			_ = finish()
			return nil, nil, err
		}
		stops = append(stops, stop)
		for k, i := range callers {
			tasks[i] = leased[k]
		}
	}
	return tasks, finish, nil
}

// leaseOn starts the tasks of callers and leases them through connection j.
func (b *benchRun) leaseOn(ctx context.Context, j int, callers []int, gated bool) (tasks []*worker.Task, finish func() error, err error) {
	c, n := b.conns[j], len(callers)
	for _, i := range callers {
		if _, err := c.Tasks.StartTask(ctx, b.startRequest(i, gated)); err != nil {
			return nil, nil, fmt.Errorf("starting bench task %d: %w", i+1, err)
		}
	}
	leased := make(chan *worker.Task)
	release := make(chan struct{})
	w, err := worker.New(c.Runtime, worker.HandlerFunc(func(ctx context.Context, t *worker.Task) error {
		select {
		case leased <- t:
		case <-release: // the bench ended before it needed this task
			return &worker.Failure{Reason: "bench.unused", Message: "not needed by the bench; handed back", Retry: true}
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		select {
		case <-release:
			return t.Complete(context.WithoutCancel(ctx), &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "bench done")})
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}), worker.Options{
		RuntimeID: fmt.Sprintf("ctl-bench-%s-%d", b.id, j),
		Queues:    []string{b.queue()},
		Capacity:  n,
		PollWait:  5 * time.Second,
		Logger:    slog.New(slog.NewTextHandler(b.cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return nil, nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(runCtx) }()
	stop := func() error {
		close(release)
		stopCtx, cancelStop := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancelStop()
		serr := w.Stop(stopCtx)
		cancel()
		if werr := <-runErr; werr != nil {
			return werr
		}
		return serr
	}
	for len(tasks) < n {
		select {
		case t := <-leased:
			tasks = append(tasks, t)
		case err := <-runErr:
			runErr <- err
			cancel()
			if err == nil {
				err = errors.New("the runtime stopped before it leased the bench tasks")
			}
			return nil, nil, fmt.Errorf("leasing bench tasks: %w", err)
		case <-ctx.Done():
			_ = stop()
			return nil, nil, context.Cause(ctx)
		}
	}
	return tasks, stop, nil
}
