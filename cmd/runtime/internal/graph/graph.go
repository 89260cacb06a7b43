package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	"github.com/agentplane/agentplane/cmd/runtime/internal/agent"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/spec"
)

// Failure reasons a graph task ends with, beside the agent package's.
const (
	ReasonBudget     = "runtime.budget_exhausted"
	ReasonMaxSteps   = "runtime.max_steps"
	ReasonMaxDepth   = "runtime.max_depth"
	ReasonIterations = "runtime.iterations_exhausted"
	ReasonNoVerdict  = "runtime.no_verdict"
	ReasonBadNode    = "runtime.unsupported_spec"
)

// Runner is a worker.Handler that runs graph tasks and hands agent tasks to Agent.
type Runner struct {
	Agent *agent.Runner
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

var _ worker.Handler = (*Runner)(nil)

// Run runs the task's graph, or its agent.
func (r *Runner) Run(ctx context.Context, t *worker.Task) error {
	g := t.Spec().GetGraph()
	if g == nil {
		return r.Agent.Run(ctx, t)
	}
	var evs []*agentplanev1.TaskEvent
	if cursor := t.Lease().GetHistoryCursor(); cursor > 0 {
		if err := t.History(ctx, 0, cursor, func(ev *agentplanev1.TaskEvent) bool { evs = append(evs, ev); return true }); err != nil {
			return err
		}
	}
	log := r.Agent.Logger
	if log == nil {
		log = slog.Default()
	}
	x := &run{r: r, t: t, log: log.With("task_id", t.ID()), counts: map[string]int{}, open: map[string]*agentplanev1.Obligation{}}
	root := buildTree(g, evs)
	root.walk(func(in *invocation) {
		if in.parent != nil {
			x.counts[in.node]++
		}
	})
	x.ledger(evs)
	steps, in, out := root.usage()
	start := r.now()
	if ct := t.Lease().GetTask().GetCreateTime(); ct.IsValid() {
		start = ct.AsTime()
	}
	top := x.frame(g, nil, 1, start, nil)
	top.steps, top.in, top.out = steps, in, out

	res, err := x.runGraph(ctx, top, t.Input(), root)
	if err != nil {
		return err
	}
	if res.Ended {
		return nil
	}
	return t.Complete(ctx, &agentplanev1.TaskOutput{Message: res.Message, Structured: res.Structured})
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// run is one lease's run of a graph task.
type run struct {
	r   *Runner
	t   *worker.Task
	log *slog.Logger
	// counts are the invocations of each node so far (per_agent_iterations).
	counts map[string]int
	// open mirrors the task's open obligations, by id.
	open  map[string]*agentplanev1.Obligation
	order []string
	// calls are the edge calls running, outermost first: a graph that terminates
	// early closes the ones above it before it answers.
	calls []worker.Call
}

// frame is one running graph: its limits in effect and what it used.
type frame struct {
	g      *agentplanev1.GraphSpec
	parent *frame
	depth  int
	// Limits in effect; 0 (or zero time) for none.
	maxSteps, maxIn, maxOut int64
	deadline                time.Time
	steps, in, out          int64
	// last is the frame's last assistant message with text, the answer when
	// max_steps_reached ends it.
	last *agentplanev1.Message
}

// frame makes the frame of graph g dispatched at start, within parent's remaining
// budget and with the allocation handed over (nil for none).
func (x *run) frame(g *agentplanev1.GraphSpec, parent *frame, depth int, start time.Time, alloc *agentplanev1.SubgraphAllocation) *frame {
	f := &frame{g: g, parent: parent, depth: depth}
	l := g.GetLimits()
	b := l.GetBudget()
	f.maxSteps = int64(l.GetMaxSteps())
	f.maxIn, f.maxOut = int64(b.GetTotalInputTokens()), int64(b.GetTotalOutputTokens())
	if s := b.GetTotalWallClockS(); s > 0 {
		f.deadline = start.Add(time.Duration(s * float64(time.Second)))
	}
	if parent != nil {
		rem := parent.remaining(x.r.now())
		// A value handed over wins; one left out is min(declared, remaining). 0 is
		// "no limit" here; the parent's own limits still apply through check.
		pick := func(declared int64, given *int32, remaining int64) int64 {
			switch {
			case given != nil:
				return int64(*given)
			case remaining == math.MaxInt64:
				return declared
			case declared == 0 || remaining < declared:
				return remaining
			}
			return declared
		}
		f.maxSteps = pick(f.maxSteps, alloc.MaxSteps, rem.MaxSteps)
		f.maxIn = pick(f.maxIn, alloc.InputTokens, rem.InputTokens)
		f.maxOut = pick(f.maxOut, alloc.OutputTokens, rem.OutputTokens)
		if alloc.WallClockS != nil {
			f.deadline = start.Add(time.Duration(alloc.GetWallClockS() * float64(time.Second)))
		}
		if !parent.deadline.IsZero() && (f.deadline.IsZero() || parent.deadline.Before(f.deadline)) {
			f.deadline = parent.deadline
		}
	}
	return f
}

// remaining is what is left of f's limits; an unlimited field is the maximum value.
func (f *frame) remaining(now time.Time) spec.Budget {
	left := func(limit, used int64) int64 {
		if limit == 0 {
			return math.MaxInt64
		}
		return max(0, limit-used)
	}
	b := spec.Budget{InputTokens: left(f.maxIn, f.in), OutputTokens: left(f.maxOut, f.out), MaxSteps: left(f.maxSteps, f.steps), WallClockS: math.Inf(1)}
	if !f.deadline.IsZero() {
		b.WallClockS = math.Max(0, f.deadline.Sub(now).Seconds())
	}
	return b
}

func (f *frame) terminatesOn(kind, node string) bool {
	for _, c := range f.g.GetTermination() {
		if c.GetKind() == kind && (node == "" || c.GetAgent() == node) {
			return true
		}
	}
	return false
}

// limitError is a graph-wide limit that ran out: it ends the graph (or the task), and
// no edge's on_error catches it.
type limitError struct {
	f   *frame
	err *worker.Failure
}

func (e *limitError) Error() string { return e.err.Error() }
func (e *limitError) Unwrap() error { return e.err }

// terminated ends frame f early with an answer: a node named by agent_returns
// returned, or max_steps_reached.
type terminated struct {
	f      *frame
	answer agent.Result
	why    string
}

func (e *terminated) Error() string { return "graph terminated: " + e.why }

// check is called before every model call: the limits of every graph up the chain.
func (x *run) check(f *frame) error {
	now := x.r.now()
	for ; f != nil; f = f.parent {
		switch {
		case f.maxIn > 0 && f.in >= f.maxIn:
			return x.limit(f, ReasonBudget, fmt.Sprintf("the input token budget of %s ran out: %d of %d used", f.name(), f.in, f.maxIn))
		case f.maxOut > 0 && f.out >= f.maxOut:
			return x.limit(f, ReasonBudget, fmt.Sprintf("the output token budget of %s ran out: %d of %d used", f.name(), f.out, f.maxOut))
		case !f.deadline.IsZero() && !now.Before(f.deadline):
			return x.limit(f, ReasonBudget, fmt.Sprintf("the wall-clock budget of %s ran out at %s", f.name(), f.deadline.UTC().Format(time.RFC3339)))
		case f.maxSteps > 0 && f.steps >= f.maxSteps:
			if f.terminatesOn("max_steps_reached", "") {
				return &terminated{f: f, answer: agent.Result{Message: f.last}, why: "max_steps_reached"}
			}
			return x.limit(f, ReasonMaxSteps, fmt.Sprintf("%s made %d steps (model calls), its max_steps", f.name(), f.steps))
		}
	}
	return nil
}

func (x *run) limit(f *frame, reason, msg string) error {
	return &limitError{f: f, err: &worker.Failure{Reason: reason, Message: msg}}
}

func (f *frame) name() string {
	if n := f.g.GetName(); n != "" {
		return fmt.Sprintf("graph %q", n)
	}
	if f.parent == nil {
		return "the graph"
	}
	return fmt.Sprintf("the nested graph at depth %d", f.depth)
}

// used adds a model call's usage (reported, or else estimated: agent.Usage) to every
// graph up the chain.
func (x *run) used(f *frame, m *agentplanev1.Message) {
	for ; f != nil; f = f.parent {
		in, out, _ := agent.Usage(m)
		f.steps++
		f.in += in
		f.out += out
		if client.MessageText(m) != "" {
			f.last = m
		}
	}
}

// runGraph runs frame f's entry node with input, in invocation in, and returns the
// graph's answer. A node named by agent_returns, or max_steps_reached, may end it
// early; the edge calls still open above are then closed with an error result.
func (x *run) runGraph(ctx context.Context, f *frame, input *agentplanev1.Message, in *invocation) (agent.Result, error) {
	if !f.deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, f.deadline, x.limit(f, ReasonBudget, fmt.Sprintf("the wall-clock budget of %s ran out", f.name())))
		defer cancel()
	}
	mark := len(x.calls)
	res, err := x.runNode(ctx, f, in, input)
	var term *terminated
	if errors.As(err, &term) && term.f == f {
		for i := len(x.calls) - 1; i >= mark; i-- {
			c := x.calls[i]
			if rerr := x.t.ToolResult(ctx, c, structpb.NewStringValue("the graph ended before this call returned: "+term.why), true); rerr != nil {
				return agent.Result{}, rerr
			}
		}
		x.calls = x.calls[:mark]
		if term.answer.Message == nil {
			return agent.Result{}, x.limit(f, ReasonMaxSteps, fmt.Sprintf("%s reached max_steps before any answer", f.name()))
		}
		return term.answer, nil
	}
	if err != nil && ctx.Err() != nil && context.Cause(ctx) != nil {
		var le *limitError
		if errors.As(context.Cause(ctx), &le) && !errors.As(err, &le) {
			return agent.Result{}, context.Cause(ctx)
		}
	}
	return res, err
}

// runNode runs one invocation of the node in.node (an agent) of frame f.
func (x *run) runNode(ctx context.Context, f *frame, in *invocation, input *agentplanev1.Message) (agent.Result, error) {
	n := in.g.GetAgents()[in.node]
	a := n.GetSpec().GetAgent()
	if a == nil {
		return agent.Result{}, &worker.Failure{Reason: ReasonBadNode, Message: fmt.Sprintf("node %q has no agent to run (a static agent the control plane did not resolve?)", in.node)}
	}
	s := &agent.Session{
		Runner: x.r.Agent, Task: x.t, Spec: a, Node: in.node, Input: input, Events: in.events, Key: in.via,
		BeforeModel: func(context.Context) error { return x.check(f) },
		AfterModel:  func(m *agentplanev1.Message) { x.used(f, m) },
	}
	if in.events == nil {
		s.Events = []*agentplanev1.TaskEvent{}
	}
	entry := in.g == f.g && in.node == f.g.GetEntry()
	if (entry || f.terminatesOn("agent_returns", in.node)) && a.GetOutputSchema() == nil {
		s.OutputSchema = f.g.GetOutputSchema()
	}
	var verdict *verdictState
	if n.GetRole() == "evaluator" {
		verdict = &verdictState{}
		s.Tools = append(s.Tools, x.verdictTool(in, verdict))
	}
	for _, e := range in.g.GetEdges() {
		if e.GetFromNode() == in.node {
			s.Tools = append(s.Tools, x.edgeTool(f, in, e))
		}
	}
	res, err := s.Run(ctx)
	if err != nil || res.Ended {
		return res, err
	}
	if verdict != nil {
		if res, err = x.evaluated(in, verdict, res); err != nil {
			return res, err
		}
	}
	if !entry && in.g == f.g && f.terminatesOn("agent_returns", in.node) {
		return res, &terminated{f: f, answer: res, why: fmt.Sprintf("node %s returned", in.node)}
	}
	return res, nil
}

// edgeArgs are an edge tool's arguments.
type edgeArgs struct {
	Input      string          `json:"input"`
	Allocation json.RawMessage `json:"allocation"`
}

// edgeTool offers edge e to its from node: calling it runs the target to its answer.
func (x *run) edgeTool(f *frame, in *invocation, e *agentplanev1.GraphEdge) agent.Tool {
	target := in.g.GetAgents()[e.GetToNode()]
	nested := target.GetSpec().GetGraph()
	var desc string
	switch e.GetKind() {
	case "handoff":
		desc = fmt.Sprintf("Hand the task over to %s (%s) with what it should do; you get its result back when it is done.", e.GetToNode(), target.GetRole())
	case "evaluate":
		desc = fmt.Sprintf("Ask the evaluator %s to review work; you get its verdict (pass, fail or needs_revision) and the open obligations back.", e.GetToNode())
	default:
		desc = fmt.Sprintf("Ask %s (%s) to do something; its answer is the result.", e.GetToNode(), target.GetRole())
	}
	props := map[string]any{"input": map[string]any{"type": "string", "description": "What the node should do, or the work to review, with everything it needs."}}
	required := []any{"input"}
	if nested != nil {
		desc += " It is a graph of agents; you may hand it part of your budget as allocation (null fields take what is left)."
		num := func(t string) map[string]any { return map[string]any{"type": []any{t, "null"}} }
		props["allocation"] = map[string]any{
			"type": []any{"object", "null"},
			"properties": map[string]any{
				"input_tokens": num("integer"), "output_tokens": num("integer"), "wall_clock_s": num("number"), "max_steps": num("integer"),
			},
			"required":             []any{"input_tokens", "output_tokens", "wall_clock_s", "max_steps"},
			"additionalProperties": false,
		}
		required = append(required, "allocation")
	}
	params, _ := structpb.NewStruct(map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false})
	def := &agentplanev1.FunctionDef{Name: edgeToolName(e), Description: &desc, Parameters: params, Strict: ptr(true)}
	return agent.Tool{Def: def, Run: func(ctx context.Context, c worker.Call, argsJSON string, resumed bool) (string, bool, error) {
		var args edgeArgs
		if err := json.Unmarshal([]byte(argsJSON), &args); err != nil {
			return fmt.Sprintf("the arguments are not a JSON object with input: %v", err), true, nil
		}
		x.calls = append(x.calls, c)
		res, err := x.dispatch(ctx, f, in, e, c, args, resumed)
		isErr := false
		if err != nil {
			res, isErr, err = x.onError(ctx, f, in, e, c, args, err)
		}
		var term *terminated
		if !errors.As(err, &term) {
			x.calls = x.calls[:len(x.calls)-1] // else the call stays open; the terminating graph closes it
		}
		return res, isErr, err
	}}
}

// dispatch runs the edge's target (resumed from the log when an earlier lease started
// it) and returns its answer as the tool result.
func (x *run) dispatch(ctx context.Context, f *frame, in *invocation, e *agentplanev1.GraphEdge, c worker.Call, args edgeArgs, resumed bool) (string, error) {
	var child *invocation
	if resumed {
		if cs := in.calls[c.ID]; len(cs) > 0 {
			child = cs[len(cs)-1]
			if len(cs) > 1 {
				// The target failed and the edge routed: the recovery node is running.
				return x.recovery(ctx, f, in, e, args, child)
			}
		}
	}
	to := e.GetToNode()
	target := in.g.GetAgents()[to]
	if child == nil {
		if l := in.g.GetLimits(); l != nil && l.PerAgentIterations != nil && x.counts[to] >= int(l.GetPerAgentIterations()) {
			return "", &worker.Failure{Reason: ReasonIterations, Message: fmt.Sprintf("node %s has run %d times, its graph's per_agent_iterations", to, x.counts[to])}
		}
		x.counts[to]++
		tg, tn := entryOf(in.g, to)
		child = newInvocation(tg, tn, in, c.ID)
		in.calls[c.ID] = append(in.calls[c.ID], child)
	}
	input := x.inputFor(e, args)
	if sub := target.GetSpec().GetGraph(); sub != nil {
		return x.dispatchGraph(ctx, f, sub, child, input, args, c)
	}
	return answer(x.runNode(ctx, f, child, input))
}

// dispatchGraph runs a nested graph under the allocation the call hands over, checked
// against what frame f has left (D13-R3).
func (x *run) dispatchGraph(ctx context.Context, f *frame, sub *agentplanev1.GraphSpec, child *invocation, input *agentplanev1.Message, args edgeArgs, c worker.Call) (string, error) {
	alloc := &agentplanev1.SubgraphAllocation{}
	if len(args.Allocation) > 0 && string(args.Allocation) != "null" {
		if err := protojson.Unmarshal(args.Allocation, alloc); err != nil {
			return "", &badArgs{fmt.Sprintf("allocation is not an object of input_tokens, output_tokens, wall_clock_s and max_steps: %v", err)}
		}
	}
	// The dispatch time is when the call was first reported: a resumed lease keeps
	// the nested graph's wall clock.
	start := x.r.now()
	for _, ev := range child.parent.events {
		if ev.GetToolCall().GetCallId() == c.ID && ev.GetTime().IsValid() {
			start = ev.GetTime().AsTime()
		}
	}
	if vs := spec.CheckAllocation(alloc, f.remaining(x.r.now()), "/allocation"); len(vs) > 0 {
		return "", &badArgs{"the allocation does not fit: " + violations(vs)}
	}
	depth := f.depth + 1
	for a := f; a != nil; a = a.parent {
		if l := a.g.GetLimits(); l != nil && l.MaxDepth != nil && depth-a.depth+1 > int(l.GetMaxDepth()) {
			return "", &worker.Failure{Reason: ReasonMaxDepth, Message: fmt.Sprintf("dispatching the nested graph would make %d levels under %s, over its max_depth %d", depth-a.depth+1, a.name(), l.GetMaxDepth())}
		}
	}
	sf := x.frame(sub, f, depth, start, alloc)
	sf.steps, sf.in, sf.out = child.usage()
	return answer(x.runGraph(ctx, sf, input, child))
}

// answer is a target's result as the edge call's result.
func answer(res agent.Result, err error) (string, error) {
	switch {
	case err != nil:
		return "", err
	case res.Ended:
		return "", agent.ErrEnded
	}
	return client.MessageText(res.Message), nil
}

// violations are spec violations as the model reads them.
func violations(vs []*agentplanev1.SpecViolation) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("%s at %q: %s", v.GetRuleId(), v.GetPath(), v.GetMessage())
	}
	return strings.Join(parts, "; ")
}

// badArgs is a mistake in the model's edge call: told to the model, not an error of
// the edge's target.
type badArgs struct{ msg string }

func (e *badArgs) Error() string { return e.msg }

// inputFor is the message the edge's target starts from.
func (x *run) inputFor(e *agentplanev1.GraphEdge, args edgeArgs) *agentplanev1.Message {
	text := args.Input
	switch e.GetKind() {
	case "handoff":
		text = fmt.Sprintf("%s\n\n%s handed this task over to you: %s", client.MessageText(x.t.Input()), e.GetFromNode(), args.Input)
	case "evaluate":
		if open := x.openObligations(); open != "" {
			text += "\n\nOpen obligations (resolve them by id when the work addresses them):\n" + open
		}
	}
	return client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_USER, text)
}

// onError applies the edge's on_error to its target's failure: abort fails the graph,
// route_to runs the recovery node (whose answer is the tool's result), and otherwise
// the error is the tool's result, unless the graph terminates on error_uncaught.
func (x *run) onError(ctx context.Context, f *frame, in *invocation, e *agentplanev1.GraphEdge, c worker.Call, args edgeArgs, err error) (string, bool, error) {
	var bad *badArgs
	var fail *worker.Failure
	var le *limitError
	var term *terminated
	switch {
	case errors.As(err, &bad):
		return bad.msg, true, nil
	case errors.As(err, &le), errors.As(err, &term), !errors.As(err, &fail):
		return "", false, err // limits, terminations, the lease's own errors
	}
	switch oe := e.GetOnError(); {
	case oe.GetAbort():
		return "", false, &worker.Failure{Reason: fail.Reason, Message: fmt.Sprintf("edge %s -> %s aborted the graph: %s", e.GetFromNode(), e.GetToNode(), fail.Message), Retry: fail.Retry}
	case oe.GetRouteTo() != "":
		note := fmt.Sprintf("%s failed (%s): %s", e.GetToNode(), fail.Reason, fail.Message)
		if err := x.t.Note(ctx, note, map[string]string{noteKey: noteRoute, noteCall: c.ID, noteNode: oe.GetRouteTo()}); err != nil {
			return "", false, err
		}
		rg, rn := entryOf(in.g, oe.GetRouteTo())
		child := newInvocation(rg, rn, in, c.ID)
		child.note = note
		in.calls[c.ID] = append(in.calls[c.ID], child)
		res, err := x.recovery(ctx, f, in, e, args, child)
		if err != nil {
			return "", false, err
		}
		return res, false, nil
	case f.terminatesOn("error_uncaught", ""):
		return "", false, &worker.Failure{Reason: fail.Reason, Message: fmt.Sprintf("node %s failed and nothing caught it: %s", e.GetToNode(), fail.Message), Retry: fail.Retry}
	}
	return fmt.Sprintf("%s failed (%s): %s", e.GetToNode(), fail.Reason, fail.Message), true, nil
}

// recovery runs the edge's route_to node in invocation child. Its input is made from
// the route note, so a resumed lease rebuilds the same conversation.
func (x *run) recovery(ctx context.Context, f *frame, in *invocation, e *agentplanev1.GraphEdge, args edgeArgs, child *invocation) (string, error) {
	input := client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_USER,
		fmt.Sprintf("%s asked %s to do the work below, and %s. Recover from it.\n\n%s", e.GetFromNode(), e.GetToNode(), child.note, args.Input))
	route := e.GetOnError().GetRouteTo()
	if sub := in.g.GetAgents()[route].GetSpec().GetGraph(); sub != nil {
		return x.dispatchGraph(ctx, f, sub, child, input, edgeArgs{Input: args.Input}, worker.Call{ID: child.via})
	}
	return answer(x.runNode(ctx, f, child, input))
}

func ptr[T any](v T) *T { return &v }
