// Package agent runs an AgentSpec on an OpenAI-compatible model: a worker.Handler that
// streams Chat Completions, gates every tool call with the control plane, runs the
// runtime's HTTP tools, pauses for the client's function tools, and rebuilds the
// conversation from the task's history when a lease resumes.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Failure reasons this runtime ends tasks with.
const (
	ReasonUnsupportedSpec = "runtime.unsupported_spec"
	ReasonNoModelRoute    = "runtime.no_model_route"
	ReasonModelError      = "runtime.model_error"
	ReasonMaxTurns        = "runtime.max_turns"
)

// toolCallsKey is the data part key of an assistant message under which the runtime
// records the tool calls the model asked for, so that a resumed lease knows every
// call of the turn, including those not yet checked with the gate.
const toolCallsKey = "tool_calls"

// Route sends the models whose name matches Pattern (path.Match glob) to an
// OpenAI-compatible endpoint.
type Route struct {
	Pattern    string
	BaseURL    string
	APIKey     string
	Timeout    time.Duration // per model call, 0 for none
	MaxRetries int           // on 429, 5xx and connection errors, honouring Retry-After
}

// Runner is a worker.Handler that runs AgentSpec tasks.
type Runner struct {
	Routes []Route
	// Tools are the runtime's own tools, offered to every agent beside its function tools.
	Tools []*HTTPTool
	// Providers mount remote tools (MCP servers, A2A peers) for each lease.
	Providers []ToolProvider
	// MaxTurns bounds the model calls of one lease (default 32).
	MaxTurns int
	// DeltaInterval batches streamed text before PublishDeltas (default 100ms).
	DeltaInterval time.Duration
	Logger        *slog.Logger
}

var _ worker.Handler = (*Runner)(nil)

// route returns the first route matching model.
func (r *Runner) route(model string) (Route, bool) {
	for _, rt := range r.Routes {
		if ok, _ := path.Match(rt.Pattern, model); ok {
			return rt, true
		}
	}
	return Route{}, false
}

// call is a tool call the model asked for.
type call struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	// Tool is the name the gate knows a remote tool by ("crm.refund"), recorded so
	// that a later lease gates and reports the call under the same name even if the
	// tool is no longer mounted.
	Tool string `json:"tool,omitempty"`
}

// turn is the state of one lease's run.
type turn struct {
	r     *Runner
	t     *worker.Task
	spec  *agentplanev1.AgentSpec
	node  string
	model string
	oai   openai.Client
	conv  []openai.ChatCompletionMessageParamUnion
	trips int32
	// pending are the calls of the last assistant message without a result.
	pending []call
	log     *slog.Logger
	// remote are the tools the Providers mounted for this lease, by model name.
	remote      map[string]*RemoteTool
	remoteOrder []*RemoteTool
}

// Run runs the agent for one lease.
func (r *Runner) Run(ctx context.Context, t *worker.Task) error {
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("task_id", t.ID())
	spec := t.Spec().GetAgent()
	if spec == nil {
		return t.Fail(ctx, ReasonUnsupportedSpec, "this runtime runs agents; graphs are not supported yet", false)
	}
	rt, ok := r.route(spec.GetModel())
	if !ok {
		return t.Fail(ctx, ReasonNoModelRoute, fmt.Sprintf("no model route matches model %q", spec.GetModel()), false)
	}
	opts := []option.RequestOption{option.WithBaseURL(rt.BaseURL), option.WithAPIKey(rt.APIKey), option.WithMaxRetries(rt.MaxRetries)}
	if rt.Timeout > 0 {
		opts = append(opts, option.WithRequestTimeout(rt.Timeout))
	}
	node := spec.GetName()
	if node == "" {
		node = "agent"
	}
	tu := &turn{r: r, t: t, spec: spec, node: node, model: spec.GetModel(), oai: openai.NewClient(opts...), log: log}
	if err := tu.rebuild(ctx); err != nil {
		return err
	}
	release, err := tu.mount(ctx)
	if err != nil {
		return err
	}
	defer release()
	return tu.loop(ctx)
}

func (tu *turn) loop(ctx context.Context) error {
	maxTurns := tu.r.MaxTurns
	if maxTurns <= 0 {
		maxTurns = 32
	}
	for {
		if len(tu.pending) > 0 {
			paused, err := tu.runCalls(ctx, tu.pending)
			tu.pending = nil
			if err != nil || paused {
				return err
			}
		}
		if int(tu.trips) >= maxTurns {
			return tu.t.Fail(ctx, ReasonMaxTurns, fmt.Sprintf("the agent made %d model calls without finishing", tu.trips), false)
		}
		msg, calls, err := tu.callModel(ctx)
		if err != nil {
			return err
		}
		if len(calls) == 0 {
			if tu.spec.GetAutoPauseOnTurnEnd() {
				_, err := tu.t.Pause(ctx, "", tu.node)
				return err
			}
			return tu.t.Complete(ctx, &agentplanev1.TaskOutput{Message: msg})
		}
		tu.pending = calls
	}
}

// runCalls gates and runs the calls of one assistant message. paused is true when
// the task now waits for the client's function tool outputs.
func (tu *turn) runCalls(ctx context.Context, calls []call) (paused bool, err error) {
	var clientCalls []*worker.Gate
	for _, c := range calls {
		fn := tu.functionTool(c.Name)
		ht := tu.httpTool(c.Name)
		rt := tu.remoteTool(c.Name)
		wc := worker.Call{ID: c.ID, Name: c.Name, ArgumentsJSON: c.Arguments, Node: tu.node, Trip: tu.trips - 1}
		switch {
		case fn != nil:
			wc.Description = fn.GetFunction().GetDescription()
			wc.Annotations = fn.GetFunction().GetAnnotations()
		case ht != nil:
			wc.Description = ht.Description
		case rt != nil:
			// The gate, the policies and the events know the tool by its own name.
			wc.Name, wc.Description, wc.Annotations = rt.GateName, rt.Description, rt.Annotations
		case c.Tool != "":
			wc.Name = c.Tool // a remote tool this lease could not mount
		}
		g, err := tu.t.ToolCall(ctx, wc)
		if err != nil {
			return false, err
		}
		switch {
		case g.Reported:
			// An earlier lease reported the call: never run it again.
			if g.ResultReported {
				continue // its result was in the history we rebuilt from
			}
			const lost = "the runtime stopped while this tool call was running; its result was lost"
			if err := tu.t.ToolResult(ctx, wc, structpb.NewStringValue(lost), true); err != nil {
				return false, err
			}
			tu.conv = append(tu.conv, openai.ToolMessage(lost, c.ID))
		case !g.Allowed:
			tu.conv = append(tu.conv, openai.ToolMessage(g.Reason, c.ID))
		case fn != nil:
			clientCalls = append(clientCalls, g)
		case ht != nil || rt != nil:
			var res string
			var isErr bool
			if ht != nil {
				res, isErr = ht.Run(ctx, g.ArgumentsJSON)
			} else {
				res, isErr = rt.Run(ctx, g.ArgumentsJSON)
			}
			if ctx.Err() != nil {
				return false, context.Cause(ctx)
			}
			if err := tu.t.ToolResult(ctx, wc, structpb.NewStringValue(res), isErr); err != nil {
				return false, err
			}
			tu.conv = append(tu.conv, openai.ToolMessage(res, c.ID))
		default:
			msg := fmt.Sprintf("no tool named %q", c.Name)
			if c.Tool != "" {
				msg = fmt.Sprintf("tool %s is unavailable: its MCP server or A2A peer could not be reached", c.Tool)
			}
			if err := tu.t.ToolResult(ctx, wc, structpb.NewStringValue(msg), true); err != nil {
				return false, err
			}
			tu.conv = append(tu.conv, openai.ToolMessage(msg, c.ID))
		}
	}
	if len(clientCalls) > 0 {
		_, err := tu.t.WaitForToolOutputs(ctx, tu.node, clientCalls...)
		return true, err
	}
	return false, nil
}

func (tu *turn) functionTool(name string) *agentplanev1.FunctionTool {
	for _, ft := range tu.spec.GetTools() {
		if ft.GetFunction().GetName() == name {
			return ft
		}
	}
	return nil
}

func (tu *turn) httpTool(name string) *HTTPTool {
	if tu.functionTool(name) != nil {
		return nil // the agent's own declaration wins
	}
	for _, ht := range tu.r.Tools {
		if ht.Name == name {
			return ht
		}
	}
	return nil
}

// tools returns the tools offered to the model.
func (tu *turn) tools() []openai.ChatCompletionToolUnionParam {
	var out []openai.ChatCompletionToolUnionParam
	for _, ft := range tu.spec.GetTools() {
		f := ft.GetFunction()
		def := shared.FunctionDefinitionParam{Name: f.GetName()}
		if f.Description != nil {
			def.Description = openai.String(f.GetDescription())
		}
		if f.GetParameters() != nil {
			def.Parameters = shared.FunctionParameters(f.GetParameters().AsMap())
		}
		if f.Strict != nil {
			def.Strict = openai.Bool(f.GetStrict())
		}
		out = append(out, openai.ChatCompletionFunctionTool(def))
	}
	for _, ht := range tu.r.Tools {
		if tu.functionTool(ht.Name) != nil {
			continue
		}
		def := shared.FunctionDefinitionParam{Name: ht.Name}
		if ht.Description != "" {
			def.Description = openai.String(ht.Description)
		}
		if ht.Parameters != nil {
			def.Parameters = shared.FunctionParameters(ht.Parameters)
		}
		out = append(out, openai.ChatCompletionFunctionTool(def))
	}
	for _, rt := range tu.remoteOrder {
		if tu.remoteTool(rt.ModelName) != rt {
			continue
		}
		def := shared.FunctionDefinitionParam{Name: rt.ModelName, Parameters: shared.FunctionParameters(rt.Parameters)}
		if rt.Description != "" {
			def.Description = openai.String(rt.Description)
		}
		out = append(out, openai.ChatCompletionFunctionTool(def))
	}
	return out
}

// callModel makes one streamed model call, publishes its text as deltas, and reports
// the whole assistant message once (with the model, the usage and the tool calls).
func (tu *turn) callModel(ctx context.Context) (*agentplanev1.Message, []call, error) {
	params := openai.ChatCompletionNewParams{
		Model:         shared.ChatModel(tu.model),
		Messages:      tu.conv,
		Tools:         tu.tools(),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	msgID := "msg-" + client.NewRequestID()
	stream := tu.oai.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	deltas := &deltaBatcher{t: tu.t, id: msgID, node: tu.node, every: tu.r.DeltaInterval, log: tu.log}
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		if len(chunk.Choices) > 0 {
			deltas.add(ctx, chunk.Choices[0].Delta.Content)
		}
	}
	deltas.flush(ctx)
	if err := stream.Err(); err != nil {
		if ctx.Err() != nil {
			return nil, nil, context.Cause(ctx)
		}
		retry := true
		var apiErr *openai.Error
		if errors.As(err, &apiErr) && apiErr.StatusCode < 500 && apiErr.StatusCode != 429 {
			retry = false
		}
		tu.log.Warn("model call failed", "model", tu.model, "err", err)
		return nil, nil, &worker.Failure{Reason: ReasonModelError, Message: fmt.Sprintf("model %s: %v", tu.model, err), Retry: retry}
	}
	tu.trips++
	var text string
	var calls []call
	if len(acc.Choices) > 0 {
		m := acc.Choices[0].Message
		text = m.Content
		for i, tc := range m.ToolCalls {
			id := tc.ID
			if id == "" {
				id = fmt.Sprintf("%s-%d", msgID, i)
			}
			c := call{ID: id, Name: tc.Function.Name, Arguments: tc.Function.Arguments}
			if rt := tu.remoteTool(c.Name); rt != nil {
				c.Tool = rt.GateName
			}
			calls = append(calls, c)
		}
	}
	msg := client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, text)
	msg.MessageId = msgID
	msg.Node = tu.node
	msg.Model = tu.model
	if acc.Model != "" {
		msg.Model = acc.Model
	}
	msg.Usage = &agentplanev1.TokenUsage{
		InputTokens: int32(acc.Usage.PromptTokens), OutputTokens: int32(acc.Usage.CompletionTokens), TotalTokens: int32(acc.Usage.TotalTokens),
	}
	if len(calls) > 0 {
		part, err := callsPart(calls)
		if err != nil {
			return nil, nil, err
		}
		msg.Parts = append(msg.Parts, part)
	}
	if _, err := tu.t.Report(ctx, &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_Message{Message: msg}}); err != nil {
		return nil, nil, err
	}
	tu.conv = append(tu.conv, assistantParam(text, calls))
	return msg, calls, nil
}

func callsPart(calls []call) (*agentplanev1.Part, error) {
	list := make([]any, len(calls))
	for i, c := range calls {
		m := map[string]any{"id": c.ID, "name": c.Name, "arguments": c.Arguments}
		if c.Tool != "" {
			m["tool"] = c.Tool
		}
		list[i] = m
	}
	s, err := structpb.NewStruct(map[string]any{toolCallsKey: list})
	if err != nil {
		return nil, err
	}
	return &agentplanev1.Part{Kind: &agentplanev1.Part_Data{Data: &agentplanev1.DataPart{Data: s}}}, nil
}

// callsOf reads the tool calls recorded on an assistant message.
func callsOf(m *agentplanev1.Message) []call {
	var out []call
	for _, p := range m.GetParts() {
		v, ok := p.GetData().GetData().GetFields()[toolCallsKey]
		if !ok {
			continue
		}
		b, err := protojson.Marshal(v)
		if err != nil {
			continue
		}
		var cs []call
		if json.Unmarshal(b, &cs) == nil {
			out = append(out, cs...)
		}
	}
	return out
}

func assistantParam(text string, calls []call) openai.ChatCompletionMessageParamUnion {
	var a openai.ChatCompletionAssistantMessageParam
	if text != "" || len(calls) == 0 {
		a.Content.OfString = openai.String(text)
	}
	for _, c := range calls {
		a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID:       c.ID,
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: c.Arguments},
			},
		})
	}
	return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}
}

// deltaBatcher publishes streamed text to the task's watchers, at most once per
// interval. Deltas are best effort: an error is logged, never fatal.
type deltaBatcher struct {
	t     *worker.Task
	id    string
	node  string
	every time.Duration
	log   *slog.Logger
	buf   []byte
	last  time.Time
}

func (d *deltaBatcher) add(ctx context.Context, s string) {
	if s == "" {
		return
	}
	d.buf = append(d.buf, s...)
	every := d.every
	if every <= 0 {
		every = 100 * time.Millisecond
	}
	if time.Since(d.last) >= every {
		d.flush(ctx)
	}
}

func (d *deltaBatcher) flush(ctx context.Context) {
	if len(d.buf) == 0 {
		return
	}
	_, err := d.t.PublishDeltas(ctx, &agentplanev1.MessageDelta{MessageId: d.id, TextDelta: string(d.buf), Node: d.node})
	if err != nil && ctx.Err() == nil {
		d.log.Debug("publish deltas", "err", err)
	}
	d.buf = d.buf[:0]
	d.last = time.Now()
}
