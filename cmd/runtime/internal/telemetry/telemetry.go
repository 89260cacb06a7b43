package telemetry

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentplane/agentplane/client/worker"
	"github.com/agentplane/agentplane/server/tracing"
)

// scope is the instrumentation scope of the runtime's spans.
const scope = "github.com/agentplane/agentplane/cmd/runtime"

// GenAI semantic convention attributes (https://opentelemetry.io/docs/specs/semconv/gen-ai/).
const (
	attrOperation     = "gen_ai.operation.name"
	attrProvider      = "gen_ai.provider.name"
	attrAgentName     = "gen_ai.agent.name"
	attrRequestModel  = "gen_ai.request.model"
	attrResponseModel = "gen_ai.response.model"
	attrResponseID    = "gen_ai.response.id"
	attrFinishReasons = "gen_ai.response.finish_reasons"
	attrInputTokens   = "gen_ai.usage.input_tokens"
	attrOutputTokens  = "gen_ai.usage.output_tokens"
	attrToolName      = "gen_ai.tool.name"
	attrToolCallID    = "gen_ai.tool.call.id"
	attrToolType      = "gen_ai.tool.type"
	attrErrorType     = "error.type"
)

// T records a runtime's metrics and spans. The zero of each part records nothing;
// a nil *T records nothing at all.
type T struct {
	m      *Metrics
	tracer trace.Tracer
}

// New records into m (nil: no metrics) and traces with tp (nil: no spans).
func New(m *Metrics, tp trace.TracerProvider) *T {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return &T{m: m, tracer: tp.Tracer(scope)}
}

func (o *T) metrics() *Metrics {
	if o == nil {
		return nil
	}
	return o.m
}

func (o *T) start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if o == nil {
		return ctx, trace.SpanFromContext(context.Background()) // a no-op span
	}
	return o.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

type tKey struct{}

// FromContext is the T of the lease ctx runs under (Handler), or nil: what tool
// providers count with, below the agent that holds the T.
func FromContext(ctx context.Context) *T {
	o, _ := ctx.Value(tKey{}).(*T)
	return o
}

// ToolLimit counts a tool server's answer or listing refused or cut for crossing a
// limit: kind is mcp, a2a or http, limit the limit's name (response_bytes, ...).
func (o *T) ToolLimit(kind, limit string) {
	if m := o.metrics(); m != nil {
		m.toolLimits.WithLabelValues(kind, limit).Inc()
	}
}

// Handler wraps h: each lease it runs is counted, and runs under an invoke_agent span
// that is a child of the trace context captured when the task was started
// (Lease.trace_context), so the runtime's spans join the client's trace. The lease's
// context carries o (FromContext).
func (o *T) Handler(h worker.Handler) worker.Handler {
	return worker.HandlerFunc(func(ctx context.Context, t *worker.Task) error {
		ctx = context.WithValue(ctx, tKey{}, o)
		if m := o.metrics(); m != nil {
			m.leases.Inc()
			m.running.Inc()
			defer m.running.Dec()
		}
		if tc := t.Lease().GetTraceContext(); tc != nil {
			ctx = tracing.ContextWithRemoteParent(ctx, tc.GetTraceparent(), tc.GetTracestate())
		}
		name := t.Spec().GetAgent().GetName()
		if name == "" {
			name = t.Spec().GetGraph().GetName()
		}
		ref := t.Ref()
		ctx, span := o.start(ctx, "invoke_agent "+name, trace.SpanKindInternal,
			attribute.String(attrOperation, "invoke_agent"),
			attribute.String(attrAgentName, name),
			attribute.String("agentplane.task.id", ref.GetTaskId()),
			attribute.String("agentplane.lease.id", ref.GetLeaseId()),
			attribute.Int64("agentplane.lease.epoch", ref.GetEpoch()),
			attribute.Int("agentplane.lease.attempt", int(t.Attempt())),
		)
		err := h.Run(ctx, t)
		if err != nil && !errors.Is(err, worker.ErrSuspended) && !errors.Is(err, context.Canceled) {
			if m := o.metrics(); m != nil {
				m.errors.WithLabelValues("task").Inc()
			}
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		return err
	})
}

// LogAttrs are the attributes every log line about t carries: the task, the lease,
// and the trace when ctx has one (the task's trace context is in ctx under Handler
// even when tracing is off: the no-op tracer keeps its parent's span context).
func LogAttrs(ctx context.Context, t *worker.Task) []any {
	ref := t.Ref()
	attrs := []any{"task_id", ref.GetTaskId(), "lease_id", ref.GetLeaseId(), "attempt", t.Attempt()}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		attrs = append(attrs, "trace_id", sc.TraceID().String())
	}
	return attrs
}

// ModelCall is a model call in progress.
type ModelCall struct {
	o     *T
	span  trace.Span
	model string
	start time.Time
}

// ErrorCanceled is the ModelResult.ErrorType of a call stopped by its context (the
// task was canceled or its lease lost): not counted as a model error.
const ErrorCanceled = "canceled"

// ModelResult is what a model call ended with.
type ModelResult struct {
	// ResponseModel and ResponseID are what the provider answered with.
	ResponseModel, ResponseID string
	FinishReasons             []string
	// InputTokens and OutputTokens are the usage the server reported; UsageKnown is
	// false when it reported none (then no tokens are recorded).
	InputTokens, OutputTokens int64
	UsageKnown                bool
	// Err is the call's error; ErrorType classifies it (an HTTP status, "timeout").
	Err       error
	ErrorType string
}

// StartModelCall starts a chat span (the GenAI conventions' inference span) for a
// call to model.
func (o *T) StartModelCall(ctx context.Context, model string) (context.Context, *ModelCall) {
	ctx, span := o.start(ctx, "chat "+model, trace.SpanKindClient,
		attribute.String(attrOperation, "chat"),
		attribute.String(attrProvider, "openai"),
		attribute.String(attrRequestModel, model),
	)
	return ctx, &ModelCall{o: o, span: span, model: model, start: time.Now()}
}

// End records the call's latency and tokens and ends its span.
func (c *ModelCall) End(r ModelResult) {
	outcome := "ok"
	if r.Err != nil {
		outcome = "error"
		c.span.RecordError(r.Err)
		c.span.SetStatus(codes.Error, r.Err.Error())
		if r.ErrorType == "" {
			r.ErrorType = "_OTHER"
		}
		c.span.SetAttributes(attribute.String(attrErrorType, r.ErrorType))
	} else {
		c.span.SetAttributes(attribute.StringSlice(attrFinishReasons, r.FinishReasons))
		if r.UsageKnown {
			c.span.SetAttributes(attribute.Int64(attrInputTokens, r.InputTokens), attribute.Int64(attrOutputTokens, r.OutputTokens))
		}
		if r.ResponseModel != "" {
			c.span.SetAttributes(attribute.String(attrResponseModel, r.ResponseModel))
		}
		if r.ResponseID != "" {
			c.span.SetAttributes(attribute.String(attrResponseID, r.ResponseID))
		}
	}
	c.span.End()
	if m := c.o.metrics(); m != nil {
		model := m.model(c.model)
		m.modelDuration.WithLabelValues(model, outcome).Observe(time.Since(c.start).Seconds())
		if r.Err != nil && r.ErrorType != ErrorCanceled {
			m.errors.WithLabelValues("model").Inc()
		} else if r.UsageKnown {
			m.tokens.WithLabelValues(model, "input").Add(float64(r.InputTokens))
			m.tokens.WithLabelValues(model, "output").Add(float64(r.OutputTokens))
		}
	}
}

// ModelRetry counts a model request repeated after a failure with status (an HTTP
// status code, or "transport").
func (o *T) ModelRetry(model, status string) {
	if m := o.metrics(); m != nil {
		m.retries.WithLabelValues(m.model(model), status).Inc()
	}
}

// ToolCallRefused counts a model's tool call the runtime did not hand to the gate.
func (o *T) ToolCallRefused(reason string) {
	if m := o.metrics(); m != nil {
		m.refused.WithLabelValues(reason).Inc()
	}
}

// ToolCall is a tool call in progress: its gate, then its run.
type ToolCall struct {
	o        *T
	ctx      context.Context
	span     trace.Span
	kind     string
	ran      time.Time
	finished bool
}

// StartToolCall starts an execute_tool span for a call of tool name: callID is the
// runtime's id (the gate's and the log's), modelCallID the model's own (the GenAI
// conventions' gen_ai.tool.call.id); kind is how the runtime runs it (http, function
// for the client's, mcp, a2a).
func (o *T) StartToolCall(ctx context.Context, kind, name, callID, modelCallID string) *ToolCall {
	toolType := "extension"
	if kind == "function" {
		toolType = "function"
	}
	ctx, span := o.start(ctx, "execute_tool "+name, trace.SpanKindInternal,
		attribute.String(attrOperation, "execute_tool"),
		attribute.String(attrToolName, name),
		attribute.String(attrToolCallID, modelCallID),
		attribute.String("agentplane.tool.call_id", callID),
		attribute.String(attrToolType, toolType),
		attribute.String("agentplane.tool.kind", kind),
	)
	return &ToolCall{o: o, ctx: ctx, span: span, kind: kind}
}

// Context is the call's span context, for the calls made on its behalf.
func (c *ToolCall) Context() context.Context { return c.ctx }

// Gate runs ask (the gate: CheckToolCall, a reviewer's wait, the call's report)
// under an agentplane.gate span and records its wait by outcome.
func (c *ToolCall) Gate(ask func(context.Context) (*worker.Gate, error)) (*worker.Gate, error) {
	ctx, span := c.o.start(c.ctx, "agentplane.gate", trace.SpanKindInternal)
	start := time.Now()
	g, err := ask(ctx)
	outcome := "allowed"
	switch {
	case errors.Is(err, worker.ErrSuspended):
		outcome = "suspended"
	case err != nil:
		outcome = "error"
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case g.Reported:
		outcome = "replayed"
	case !g.Allowed:
		outcome = "rejected"
	}
	span.SetAttributes(attribute.String("agentplane.gate.outcome", outcome))
	if g != nil && g.Interrupt != nil {
		span.SetAttributes(attribute.String("agentplane.interrupt.id", g.Interrupt.GetInterruptId()))
	}
	span.End()
	if m := c.o.metrics(); m != nil {
		m.gateWait.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
		if outcome == "error" {
			m.errors.WithLabelValues("gate").Inc()
		}
	}
	c.span.SetAttributes(attribute.String("agentplane.gate.outcome", outcome))
	c.ran = time.Now()
	return g, err
}

// Close ends the span of a call that does not run here (rejected, replayed, or a
// client's function tool now awaited from the client); no run is recorded.
func (c *ToolCall) Close() {
	if c == nil || c.finished {
		return
	}
	c.finished = true
	c.span.End()
}

// End ends the call: isErr when the tool returned an error, err when the run failed.
// Only the first End counts.
func (c *ToolCall) End(isErr bool, err error) {
	if c == nil || c.finished {
		return
	}
	c.finished = true
	outcome := "ok"
	if err != nil {
		c.span.RecordError(err)
	}
	if isErr || err != nil {
		outcome = "error"
		c.span.SetStatus(codes.Error, "tool error")
		c.span.SetAttributes(attribute.String(attrErrorType, "tool_error"))
	}
	c.span.End()
	if m := c.o.metrics(); m != nil && !c.ran.IsZero() {
		m.toolDuration.WithLabelValues(c.kind, outcome).Observe(time.Since(c.ran).Seconds())
		if outcome == "error" {
			m.errors.WithLabelValues("tool").Inc()
		}
	}
}
