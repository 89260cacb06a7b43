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
	"github.com/openai/openai-go/v3/shared"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	"github.com/agentplane/agentplane/cmd/runtime/internal/telemetry"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Failure reasons this runtime ends tasks with.
const (
	ReasonUnsupportedSpec = "runtime.unsupported_spec"
	ReasonNoModelRoute    = "runtime.no_model_route"
	ReasonModelError      = "runtime.model_error"
	ReasonMaxTurns        = "runtime.max_turns"
	// ReasonOutputSchema: the final answer did not match output_schema after one
	// repair turn.
	ReasonOutputSchema = "runtime.output_schema_mismatch"
	// ReasonOutputTruncated: the final answer was cut off (finish_reason "length").
	ReasonOutputTruncated = "runtime.output_truncated"
	// ReasonInvalidToolCall: the model's tool call arguments were refused (not JSON,
	// or not matching the tool's schema) on two model turns in a row.
	ReasonInvalidToolCall = "runtime.invalid_tool_call"
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
	// Telemetry records metrics and spans (nil: none).
	Telemetry *telemetry.T
	// ObserveSettle, when set, is told how long each wait for a tool result's report
	// took (the report travels while the model is asked again; the wait is what of
	// it stayed on the step's path). For the benchmark.
	ObserveSettle func(time.Duration)
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
	// ModelID is the model's own id for the call: the conversation sent back to the
	// model keeps it. Servers that number calls per response repeat it across turns.
	ModelID string `json:"id"`
	// ID is the runtime's: the gate's call id and the call's id in the task's log,
	// unique in the task (callID). Calls recorded before the runtime chose its own
	// ids have none, and use the model's.
	ID        string `json:"call_id,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	// MessageID is the assistant message that made the call (not stored in it).
	MessageID string `json:"-"`
	// Tool is the name the gate knows a remote tool by ("crm.refund"), recorded so
	// that a later lease gates and reports the call under the same name even if the
	// tool is no longer mounted.
	Tool string `json:"tool,omitempty"`
	// Refused is set when the runtime did not hand the call to the gate (arguments
	// that are not a JSON object, or do not match the tool's schema): the tool error
	// the model was given instead of a result.
	Refused string `json:"refused,omitempty"`
	// refusedReason is Refused's label (refusedJSON, ...), for the note and metric.
	refusedReason string
}

// callID is the runtime's id for call n of the assistant message msgID: unique in the
// task since message ids are, and stable across leases since the message, with its
// calls, is in the log before any of them is gated.
func callID(msgID string, n int) string { return fmt.Sprintf("%s.%d", msgID, n) }

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
	// reporting is the last tool result's report while it travels (result, settle).
	reporting *resultReport
	// modelIDs are the model's ids of the session's calls, by the runtime's id.
	modelIDs map[string]string
	// refusedTurns counts the model turns in a row whose calls the runtime refused.
	refusedTurns int
	log          *slog.Logger
	// completion is the last model call's accumulated answer; toolSpans the spans of
	// the calls running (observe.go).
	completion *openai.ChatCompletion
	usageKnown bool // the server reported the last model call's usage
	toolSpans  map[string]*telemetry.ToolCall
	s          *Session
	// reportedArgs are the arguments of the calls reported in the history, by call id.
	reportedArgs map[string]string
	// repairs counts the output_schema repair turns asked for.
	repairs int
	// last is the last assistant message of the session.
	last *agentplanev1.Message
	// resultErr says which calls in the history have an error result, by call id.
	resultErr map[string]bool
	// ended: the history shows a session tool that ends the turn ran to a result.
	ended bool
	// answered: the session's history ends with its answer (a session that is not a
	// chat, resumed after the answer was reported).
	answered bool
	// remote are the tools the Providers mounted for this lease, by model name.
	remote      map[string]*RemoteTool
	remoteOrder []*RemoteTool
}

// Run runs the agent for one lease.
func (r *Runner) Run(ctx context.Context, t *worker.Task) error {
	spec := t.Spec().GetAgent()
	if spec == nil {
		return t.Fail(ctx, ReasonUnsupportedSpec, "this runner runs agents; run graphs with the graph package", false)
	}
	node := spec.GetName()
	if node == "" {
		node = "agent"
	}
	res, err := (&Session{Runner: r, Task: t, Spec: spec, Node: node, Chat: true}).Run(ctx)
	if err != nil || res.Ended {
		return err
	}
	if spec.GetAutoPauseOnTurnEnd() {
		_, err := t.Pause(ctx, "", node)
		return err
	}
	return t.Complete(ctx, &agentplanev1.TaskOutput{Message: res.Message, Structured: res.Structured})
}

func (tu *turn) loop(ctx context.Context) (Result, error) {
	maxTurns := tu.r.MaxTurns
	if maxTurns <= 0 {
		maxTurns = 32
	}
	switch {
	case tu.ended && len(tu.pending) == 0:
		return Result{Message: tu.last}, nil // a session tool ended it before this lease
	case tu.answered:
		// An earlier lease got the answer; check it rather than ask again.
		if err := tu.checkTruncated(tu.last); err != nil {
			return Result{}, err
		}
		structured, repair, err := tu.checkOutput(ctx, tu.last)
		if err != nil || !repair {
			return Result{Message: tu.last, Structured: structured}, err
		}
	}
	for {
		if tu.refusedTurns > 1 {
			return Result{}, &worker.Failure{Reason: ReasonInvalidToolCall,
				Message: fmt.Sprintf("node %s: the model's tool calls were refused on two turns in a row: %s", tu.node, refusals(tu.last))}
		}
		if len(tu.pending) > 0 {
			end, err := tu.runCalls(ctx, tu.pending)
			tu.pending = nil
			if err != nil || end.Ended || end.Message != nil {
				return end, err
			}
		}
		if int(tu.trips) >= maxTurns {
			return Result{}, &worker.Failure{Reason: ReasonMaxTurns, Message: fmt.Sprintf("node %s made %d model calls without finishing", tu.node, tu.trips)}
		}
		if tu.s.BeforeModel != nil {
			if err := tu.s.BeforeModel(ctx); err != nil {
				return Result{}, err
			}
		}
		if err := tu.askModelCall(ctx); err != nil {
			return Result{}, err
		}
		msg, calls, err := tu.callModel(ctx)
		if err != nil {
			return Result{}, err
		}
		if tu.s.AfterModel != nil {
			tu.s.AfterModel(msg)
		}
		if len(calls) > 0 {
			tu.pending = runnable(calls)
			tu.refusedTurns = nextRefusedTurns(tu.refusedTurns, calls)
			continue
		}
		tu.refusedTurns = 0
		if err := tu.checkTruncated(msg); err != nil {
			return Result{}, err
		}
		structured, repair, err := tu.checkOutput(ctx, msg)
		if err != nil {
			return Result{}, err
		}
		if !repair {
			return Result{Message: msg, Structured: structured}, nil
		}
	}
}

// runCalls gates and runs the calls of one assistant message. end.Ended is set when
// the task now waits for the client's function tool outputs (or a session tool ended
// the turn of the task); end.Message when a session tool ended this session.
func (tu *turn) runCalls(ctx context.Context, calls []call) (end Result, err error) {
	var clientCalls []*worker.Gate
	var endsTurn bool
	for _, c := range calls {
		st := tu.sessionTool(c.Name)
		fn := tu.functionTool(c.Name)
		ht := tu.httpTool(c.Name)
		rt := tu.remoteTool(c.Name)
		wc := worker.Call{ID: c.ID, Name: c.Name, ArgumentsJSON: c.Arguments, Node: tu.node, Trip: tu.trips - 1, MessageID: c.MessageID}
		switch {
		case st != nil:
			wc.Description = st.Def.GetDescription()
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
		g, err := tu.gate(ctx, wc)
		if err != nil {
			return Result{}, err
		}
		switch {
		case g.Reported && g.ResultReported:
			// An earlier lease ran it; its result was in the history we rebuilt from.
			endsTurn = endsTurn || (st != nil && st.EndsTurn && !tu.resultErr[c.ID])
		case g.Reported && st != nil:
			// An earlier lease started it; the session tool resumes from the history.
			res, isErr, err := st.Run(ctx, wc, tu.reportedArgs[c.ID], true)
			if err != nil {
				return tu.toolStopped(err)
			}
			endsTurn = endsTurn || (st.EndsTurn && !isErr)
			if err := tu.result(ctx, wc, res, isErr); err != nil {
				return Result{}, err
			}
		case g.Reported:
			// An earlier lease reported the call: never run it again.
			const lost = "the runtime stopped while this tool call was running; its result was lost"
			if err := tu.result(ctx, wc, lost, true); err != nil {
				return Result{}, err
			}
		case !g.Allowed:
			tu.conv = append(tu.conv, tu.toolMessage(g.Reason, c.ID))
		case st != nil:
			res, isErr, err := st.Run(ctx, wc, g.ArgumentsJSON, false)
			if err != nil {
				return tu.toolStopped(err)
			}
			endsTurn = endsTurn || (st.EndsTurn && !isErr)
			if err := tu.result(ctx, wc, res, isErr); err != nil {
				return Result{}, err
			}
		case fn != nil:
			clientCalls = append(clientCalls, g)
		case ht != nil || rt != nil:
			var res string
			var isErr bool
			// Under the call's execute_tool span: its trace context goes with the request.
			tctx := tu.callContext(ctx, wc.ID)
			if ht != nil {
				res, isErr = ht.Run(tctx, g.ArgumentsJSON)
			} else {
				res, isErr = rt.Run(tctx, g.ArgumentsJSON)
			}
			if ctx.Err() != nil {
				return Result{}, context.Cause(ctx)
			}
			if err := tu.result(ctx, wc, res, isErr); err != nil {
				return Result{}, err
			}
		default:
			msg := fmt.Sprintf("no tool named %q", c.Name)
			if c.Tool != "" {
				msg = fmt.Sprintf("tool %s is unavailable: its MCP server or A2A peer could not be reached", c.Tool)
			}
			if err := tu.result(ctx, wc, msg, true); err != nil {
				return Result{}, err
			}
		}
	}
	if len(clientCalls) > 0 || endsTurn {
		if err := tu.settle(); err != nil {
			return Result{}, err
		}
	}
	if len(clientCalls) > 0 {
		_, err := tu.t.WaitForToolOutputs(ctx, tu.node, clientCalls...)
		return Result{Ended: true}, err
	}
	if endsTurn {
		return Result{Message: tu.last}, nil
	}
	// The last result's report may still travel: the model is asked meanwhile.
	return Result{}, nil
}

// toolStopped turns a session tool's error into the session's end: ErrEnded means
// the task's turn ended inside the tool (a nested node paused the task).
func (tu *turn) toolStopped(err error) (Result, error) {
	if errors.Is(err, ErrEnded) {
		return Result{Ended: true}, nil
	}
	return Result{}, err
}

func (tu *turn) sessionTool(name string) *Tool {
	for i := range tu.s.Tools {
		if tu.s.Tools[i].Def.GetName() == name {
			return &tu.s.Tools[i]
		}
	}
	return nil
}

func (tu *turn) functionTool(name string) *agentplanev1.FunctionTool {
	if tu.sessionTool(name) != nil {
		return nil // the session's tool of that name (the granted verdict tool) runs instead
	}
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
	for _, st := range tu.s.Tools {
		out = append(out, openai.ChatCompletionFunctionTool(functionDef(st.Def)))
	}
	for _, ft := range tu.spec.GetTools() {
		if tu.functionTool(ft.GetFunction().GetName()) == nil {
			continue
		}
		out = append(out, openai.ChatCompletionFunctionTool(functionDef(ft.GetFunction())))
	}
	for _, ht := range tu.r.Tools {
		if tu.functionTool(ht.Name) != nil || tu.sessionTool(ht.Name) != nil {
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

// functionDef is a declared function tool as the model is offered it.
func functionDef(f *agentplanev1.FunctionDef) shared.FunctionDefinitionParam {
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
	return def
}

// streamModel makes one streamed model call, publishes its text as deltas, and reports
// the whole assistant message once (with the model, the usage and the tool calls).
// Calls whose arguments cannot go to the gate come back Refused, already answered in
// the conversation with the tool error the model reads.
func (tu *turn) streamModel(ctx context.Context) (*agentplanev1.Message, []call, error) {
	params := openai.ChatCompletionNewParams{
		Model:         shared.ChatModel(tu.model),
		Messages:      tu.conv,
		Tools:         tu.tools(),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	if js := tu.schema().GetJsonSchema(); js != nil {
		params.ResponseFormat = responseFormat(js)
	}
	msgID := "msg-" + client.NewRequestID()
	// The last tool result's report travels while the model is asked (result).
	sctx, stop := tu.cancelOnReportFailure(ctx)
	defer stop()
	stream := tu.oai.Chat.Completions.NewStreaming(sctx, params)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	usageKnown := false
	deltas := &deltaBatcher{t: tu.t, id: msgID, node: tu.node, every: tu.r.DeltaInterval, log: tu.log}
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		usageKnown = usageKnown || chunk.JSON.Usage.Valid()
		if len(chunk.Choices) > 0 {
			deltas.add(sctx, chunk.Choices[0].Delta.Content)
		}
	}
	deltas.flush(sctx)
	tu.completion, tu.usageKnown = &acc.ChatCompletion, usageKnown
	// The answer follows the results in the log: nothing of it is reported, and it
	// is not even judged, until the last result's report is durable. A failed report
	// ends the session with its own error, whatever the model answered.
	if err := tu.settle(); err != nil {
		return nil, nil, err
	}
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
	var text, finish string
	var calls []call
	if len(acc.Choices) > 0 {
		m := acc.Choices[0].Message
		text, finish = m.Content, acc.Choices[0].FinishReason
		for i, tc := range m.ToolCalls {
			c := call{ModelID: tc.ID, ID: callID(msgID, i), Name: tc.Function.Name, Arguments: tc.Function.Arguments, MessageID: msgID}
			if c.ModelID == "" {
				c.ModelID = c.ID
			}
			if rt := tu.remoteTool(c.Name); rt != nil {
				c.Tool = rt.GateName
			}
			calls = append(calls, tu.checkArguments(c, finish == finishLength))
		}
	}
	msg := client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, text)
	msg.MessageId = msgID
	msg.Node = tu.node
	msg.Model = tu.model
	if acc.Model != "" {
		msg.Model = acc.Model
	}
	// Usage the server did not send is unknown, not zero: the message carries none,
	// and the runtime's estimate is recorded apart from it, for budgets (Usage).
	var estimate *usageEstimate
	if usageKnown {
		msg.Usage = &agentplanev1.TokenUsage{
			InputTokens: int32(acc.Usage.PromptTokens), OutputTokens: int32(acc.Usage.CompletionTokens), TotalTokens: int32(acc.Usage.TotalTokens),
		}
	} else {
		estimate = estimateUsage(params, text, calls)
	}
	if part, err := modelPart(calls, finish, estimate); err != nil {
		return nil, nil, err
	} else if part != nil {
		msg.Parts = append(msg.Parts, part)
	}
	events := []*agentplanev1.RuntimeEvent{{Payload: &agentplanev1.RuntimeEvent_Message{Message: msg}}}
	if note := refusedNote(calls); note != nil {
		events = append(events, &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_Note{Note: note}})
	}
	if _, err := tu.t.Report(ctx, events...); err != nil {
		return nil, nil, err
	}
	tu.addAssistant(msg, calls)
	return msg, calls, nil
}

// addAssistant adds an assistant message and its calls to the conversation, with the
// tool errors of the calls the runtime refused right after it.
func (tu *turn) addAssistant(msg *agentplanev1.Message, calls []call) {
	tu.conv = append(tu.conv, assistantParam(client.MessageText(msg), calls))
	for _, c := range calls {
		tu.modelIDs[c.ID] = c.ModelID
		if c.Refused != "" {
			tu.conv = append(tu.conv, openai.ToolMessage(refusedResult(c), c.ModelID))
		}
	}
	tu.last = msg
}

// toolMessage is a tool's result as the model reads it, under the model's id of the
// call the runtime knows as id.
func (tu *turn) toolMessage(text, id string) openai.ChatCompletionMessageParamUnion {
	if mid := tu.modelIDs[id]; mid != "" {
		id = mid
	}
	return openai.ToolMessage(text, id)
}

// Data part keys of an assistant message, beside toolCallsKey.
const (
	// finishKey records a finish reason other than stop and tool_calls ("length").
	finishKey = "finish_reason"
	// estimateKey records the runtime's token estimate of a call whose server sent
	// no usage.
	estimateKey = "usage_estimate"
)

// finishLength is the finish_reason of an answer cut off at the token limit.
const finishLength = "length"

// modelPart is the data part an assistant message records what the runtime knows
// of its model call in: the tool calls, an unusual finish reason, the usage
// estimate. Nil when there is nothing to record.
func modelPart(calls []call, finish string, estimate *usageEstimate) (*agentplanev1.Part, error) {
	fields := map[string]any{}
	if len(calls) > 0 {
		list := make([]any, len(calls))
		for i, c := range calls {
			m := map[string]any{"id": c.ModelID, "call_id": c.ID, "name": c.Name, "arguments": c.Arguments}
			if c.Tool != "" {
				m["tool"] = c.Tool
			}
			if c.Refused != "" {
				m["refused"] = c.Refused
			}
			list[i] = m
		}
		fields[toolCallsKey] = list
	}
	if finish != "" && finish != "stop" && finish != "tool_calls" {
		fields[finishKey] = finish
	}
	if estimate != nil {
		fields[estimateKey] = map[string]any{"input_tokens": estimate.Input, "output_tokens": estimate.Output}
	}
	if len(fields) == 0 {
		return nil, nil
	}
	s, err := structpb.NewStruct(fields)
	if err != nil {
		return nil, err
	}
	return &agentplanev1.Part{Kind: &agentplanev1.Part_Data{Data: &agentplanev1.DataPart{Data: s}}}, nil
}

// dataField returns the value recorded under key in one of m's data parts.
func dataField(m *agentplanev1.Message, key string) *structpb.Value {
	for _, p := range m.GetParts() {
		if v, ok := p.GetData().GetData().GetFields()[key]; ok {
			return v
		}
	}
	return nil
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
			for i := range cs {
				cs[i].MessageID = m.GetMessageId()
				if cs[i].ID == "" {
					cs[i].ID = cs[i].ModelID
				}
			}
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
				ID:       c.ModelID,
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
