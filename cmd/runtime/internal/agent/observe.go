package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/client/worker"
	"github.com/agentplane/agentplane/cmd/runtime/internal/telemetry"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// toolKind says how this runtime runs the tool name (the agentplane.tool.kind span
// attribute and the kind label of the tool metrics).
func (tu *turn) toolKind(name string) string {
	switch {
	case tu.functionTool(name) != nil:
		return "function"
	case tu.httpTool(name) != nil:
		return "http"
	case tu.sessionTool(name) != nil:
		return "graph"
	case strings.HasPrefix(name, "a2a__"):
		return "a2a"
	case strings.Contains(name, "."): // the gate name of an MCP tool, <server>.<tool>
		return "mcp"
	}
	return "unknown"
}

// gate asks the control plane about wc (worker.Task.ToolCall) under the call's
// execute_tool span. The span stays open for the run when the call runs here, until
// result reports it.
func (tu *turn) gate(ctx context.Context, wc worker.Call) (*worker.Gate, error) {
	if err := tu.settle(); err != nil {
		return nil, err
	}
	tc := tu.r.Telemetry.StartToolCall(ctx, tu.toolKind(wc.Name), wc.Name, wc.ID, tu.modelIDs[wc.ID])
	g, err := tc.Gate(func(ctx context.Context) (*worker.Gate, error) { return tu.t.ToolCall(ctx, wc) })
	if err != nil || !g.Allowed || tu.functionTool(wc.Name) != nil {
		tc.Close()
		return g, err
	}
	if tu.toolSpans == nil {
		tu.toolSpans = map[string]*telemetry.ToolCall{}
	}
	tu.toolSpans[wc.ID] = tc
	return g, nil
}

// callContext is ctx under the execute_tool span of call id, while it is open (ctx
// itself otherwise): what the tool's own requests run in.
func (tu *turn) callContext(ctx context.Context, id string) context.Context {
	if tc := tu.toolSpans[id]; tc != nil {
		return tc.Context()
	}
	return ctx
}

// result hands a tool's result to the model and reports it to the task's log. The
// report travels in the background, while the model is asked again: it has to be in
// the log before the next assistant message, not before the model call, so only the
// gate stays on a call's path. settle waits for it before any other write of the
// session (the next result, gate or assistant message, the session's end); a failed
// report ends the session with its error there, and the model's answer to a result
// the log does not hold is never reported.
func (tu *turn) result(ctx context.Context, wc worker.Call, text string, isErr bool) error {
	if err := tu.settle(); err != nil {
		return err
	}
	tc := tu.toolSpans[wc.ID]
	delete(tu.toolSpans, wc.ID)
	if tc != nil {
		ctx = tc.Context()
	}
	rep := &resultReport{done: make(chan struct{})}
	tu.reporting = rep
	go func() {
		defer close(rep.done)
		rep.err = tu.t.ToolResult(ctx, wc, structpb.NewStringValue(text), isErr)
		tc.End(isErr, rep.err)
	}()
	tu.conv = append(tu.conv, tu.toolMessage(text, wc.ID))
	return nil
}

// resultReport is a tool result's report under way (result).
type resultReport struct {
	done chan struct{}
	err  error // set before done is closed
}

// settle waits for the tool result report under way, if any, and returns its error.
// The report ends with the session's context, so the wait does too.
func (tu *turn) settle() error {
	rep := tu.reporting
	if rep == nil {
		return nil
	}
	start := time.Now()
	<-rep.done
	tu.reporting = nil
	if tu.r.ObserveSettle != nil {
		tu.r.ObserveSettle(time.Since(start))
	}
	return rep.err
}

// cancelOnReportFailure derives the model call's context from ctx: it is canceled
// with the report's error when the tool result report under way fails, so that a
// model call whose answer can no longer be reported stops at once.
func (tu *turn) cancelOnReportFailure(ctx context.Context) (context.Context, func()) {
	rep := tu.reporting
	if rep == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-rep.done:
			if rep.err != nil {
				cancel(rep.err)
			}
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil) }
}

// endSpans ends the spans of calls a lease stopped in the middle of.
func (tu *turn) endSpans() {
	for id, tc := range tu.toolSpans {
		tc.End(false, errors.New("the lease ended before the call's result was reported"))
		delete(tu.toolSpans, id)
	}
}

// askModelCall asks the control plane before a model call whether it may run
// (worker.Task.ModelCall: a spent budget with on_limit approve holds it for a
// person), when the lease says the task's model calls are checked. The last tool
// result's report is settled first, so that a suspension hands back a complete turn.
// The call's id is derived from the session's history (its node, key and the number
// of model calls it made), so a later lease replaying the turn asks about the same
// call and finds its decision.
func (tu *turn) askModelCall(ctx context.Context) error {
	if !tu.t.Lease().GetCheckModelCalls() {
		return nil
	}
	if err := tu.settle(); err != nil {
		return err
	}
	id := fmt.Sprintf("model.%s.%s.%d", tu.node, tu.s.Key, tu.trips)
	return tu.t.ModelCall(ctx, worker.ModelCall{ID: id, Node: tu.node, Trip: tu.trips, Model: tu.model})
}

// callModel makes one model call (streamModel) under a chat span, and records its
// latency and tokens.
func (tu *turn) callModel(ctx context.Context) (*agentplanev1.Message, []call, error) {
	ctx, mc := tu.r.Telemetry.StartModelCall(ctx, tu.model)
	tu.completion = nil
	msg, calls, err := tu.streamModel(ctx)
	res := telemetry.ModelResult{Err: err}
	if c := tu.completion; c != nil {
		res.ResponseModel, res.ResponseID = c.Model, c.ID
		res.InputTokens, res.OutputTokens, res.UsageKnown = c.Usage.PromptTokens, c.Usage.CompletionTokens, tu.usageKnown
		for _, ch := range c.Choices {
			res.FinishReasons = append(res.FinishReasons, ch.FinishReason)
		}
	}
	var f *worker.Failure
	switch {
	case err != nil && ctx.Err() != nil:
		res.ErrorType = telemetry.ErrorCanceled // stopped by the control plane, not the model's fault
	case errors.As(err, &f):
		res.ErrorType = f.Reason
	}
	mc.End(res)
	switch {
	case err == nil && res.UsageKnown:
		tu.log.Debug("model call", "model", tu.model, "input_tokens", res.InputTokens, "output_tokens", res.OutputTokens, "tool_calls", len(calls))
	case err == nil:
		in, out, _ := Usage(msg)
		tu.log.Debug("model call", "model", tu.model, "usage", "unknown", "estimated_input_tokens", in, "estimated_output_tokens", out, "tool_calls", len(calls))
	}
	return msg, calls, err
}
