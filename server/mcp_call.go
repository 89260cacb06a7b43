package server

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/api/reasons"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/spec"
	"github.com/agentplane/agentplane/server/tasks"
)

// maxMCPText bounds one text a person or model reads from the face: a progress
// message, an elicitation message. The whole text stays in the task's log.
const maxMCPText = 4 << 10

// mcpCancelTimeout bounds the CancelTask a client's notifications/cancelled triggers.
const mcpCancelTimeout = 10 * time.Second

// mcpInterruptPolicy is the interrupt policy of the tasks the face starts: it lists
// no tool, so the calls the deployment always gates (A2A skills, MCP tools marked
// destructive, tools whose axes the caller tightened) wait for a reviewer, and the
// others run. Without a policy those would be rejected outright (hitl.disabled): no
// one would be there to approve them.
var mcpInterruptPolicy = &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Allowlist{Allowlist: &agentplanev1.ToolListPolicy{}}}

// callTool is the handler of one agent's tool: start the task (idempotently when the
// call names a request id), follow its log until it ends, and return its output.
func (f *mcpFace) callTool(t *mcpTool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c := callerOf(ctx, req)
		if c == nil { // ServeHTTP sets it on every request
			return nil, errors.New("no caller")
		}
		call := &mcpCall{f: f, t: t, req: req, c: c, pending: map[string]*agentplanev1.Interrupt{}}
		res, outcome := call.run(ctx)
		f.m.calls.WithLabelValues(outcome).Inc()
		f.s.log.Info("mcp tool call", "tenant", c.p.Tenant, "principal", c.p.Subject, "tool", t.tool.Name,
			"task", call.taskID, "outcome", outcome)
		if res == nil {
			// The client canceled, or its session closed (or is closing, as the
			// server shuts down): no one reads a response.
			return nil, cmp.Or(context.Cause(ctx), errMCPSessionClosed)
		}
		return res, nil
	}
}

// callerOf is the caller of the session, with the authorization the call's own
// request carried (a client may present a fresh token for the same principal; another
// principal's was refused before the SDK saw the request).
func callerOf(ctx context.Context, req *mcp.CallToolRequest) *mcpCaller {
	c, _ := ctx.Value(mcpCallerCtx{}).(*mcpCaller)
	if c == nil {
		return nil
	}
	if extra := req.GetExtra(); extra != nil && len(extra.Header.Values("Authorization")) > 0 {
		cc := *c
		cc.authorization = extra.Header.Values("Authorization")
		return &cc
	}
	return c
}

// mcpCall is one tools/call in progress.
type mcpCall struct {
	f   *mcpFace
	t   *mcpTool
	req *mcp.CallToolRequest
	c   *mcpCaller

	taskID string
	// state is the task's state as the log has it so far.
	state agentplanev1.TaskState
	// pending are the task's open interrupts, from the log.
	pending map[string]*agentplanev1.Interrupt
	// lastSaid is the text of the newest assistant message.
	lastSaid string
	// progress is the sequence of the newest event reported as progress.
	progress int64
}

// run returns the result and the outcome label; a nil result means no one reads one:
// the client canceled the call (and the task was canceled), or its session closed.
func (x *mcpCall) run(ctx context.Context) (*mcp.CallToolResult, string) {
	f := x.f
	input, errRes := x.input()
	if errRes != nil {
		return errRes, "error"
	}
	requestID, _ := x.req.Params.GetMeta()[mcpMetaRequestID].(string)
	tc := f.s.taskClient()
	// StartTask runs to its end even if the client cancels meanwhile: a task it
	// commits is then canceled, rather than left running with no one told its id.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mcpCancelTimeout)
	started, err := tc.StartTask(f.outgoing(sctx, x.c), &agentplanev1.StartTaskRequest{
		RequestId: requestID, Source: &agentplanev1.StartTaskRequest_AgentId{AgentId: x.t.agentID}, Input: input,
		InterruptPolicy: mcpInterruptPolicy,
	})
	cancel()
	if err != nil {
		if x.clientCanceled(ctx) {
			return nil, "client_canceled"
		}
		return toolError("the task could not start: %s", mcpAPIError(err)), "error"
	}
	x.taskID = started.GetTask().GetTaskId()
	x.state = started.GetTask().GetState()
	if x.clientCanceled(ctx) {
		x.cancelTask()
		return nil, "client_canceled"
	}
	if started.GetCreated() {
		f.s.log.Debug("mcp task started", "tenant", x.c.p.Tenant, "task", x.taskID, "tool", x.t.tool.Name)
	}
	return x.follow(ctx)
}

// input checks the arguments against the tool's schema and builds the task's input.
// Invalid arguments are a tool error the model can read and correct.
func (x *mcpCall) input() (*agentplanev1.Message, *mcp.CallToolResult) {
	raw := x.req.Params.Arguments
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	var v structpb.Value
	if err := protojson.Unmarshal(raw, &v); err != nil {
		return nil, toolError("the arguments are not JSON: %s", bounded(err.Error()))
	}
	if problems := spec.ValidateArgs(x.t.input, &v); len(problems) > 0 {
		if len(problems) > 8 {
			problems = append(problems[:8], fmt.Sprintf("(and %d more)", len(problems)-8))
		}
		return nil, toolError("the arguments do not match the tool's input schema: %s", bounded(strings.Join(problems, "; ")))
	}
	args := v.GetStructValue().GetFields()
	msg := &agentplanev1.Message{Role: agentplanev1.MessageRole_MESSAGE_ROLE_USER,
		Parts: []*agentplanev1.Part{{Kind: &agentplanev1.Part_Text{Text: args["input"].GetStringValue()}}}}
	if d := args["data"].GetStructValue(); d != nil {
		msg.Parts = append(msg.Parts, &agentplanev1.Part{Kind: &agentplanev1.Part_Data{Data: &agentplanev1.DataPart{Data: d}}})
	}
	return msg, nil
}

// follow watches the task's log from its start until the task ends or needs input
// the client cannot give. Replayed events are reported as progress like live ones;
// the task's state is acted on once the replay has caught up.
func (x *mcpCall) follow(ctx context.Context) (*mcp.CallToolResult, string) {
	f := x.f
	tc := f.s.taskClient()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := tc.WatchTask(f.outgoing(wctx, x.c), &agentplanev1.WatchTaskRequest{TaskId: x.taskID})
	caughtUp := false
	for err == nil {
		var resp *agentplanev1.WatchTaskResponse
		if resp, err = stream.Recv(); err != nil {
			break
		}
		switch k := resp.GetKind().(type) {
		case *agentplanev1.WatchTaskResponse_Event:
			x.observe(ctx, k.Event)
			if to := k.Event.GetStateChanged().GetToState(); to != agentplanev1.TaskState_TASK_STATE_UNSPECIFIED && caughtUp {
				if res, outcome, done := x.act(ctx); done {
					return res, outcome
				}
			}
		case *agentplanev1.WatchTaskResponse_CaughtUp:
			if !caughtUp {
				caughtUp = true
				if res, outcome, done := x.act(ctx); done {
					return res, outcome
				}
			}
		}
	}
	if x.clientCanceled(ctx) {
		x.cancelTask()
		return nil, "client_canceled"
	}
	if errors.Is(context.Cause(ctx), errMCPSessionClosed) || x.stopping() {
		// No one reads the response; the task goes on. A shutdown ends the watch
		// (UNAVAILABLE) before closeAll closes the session, so the call would
		// otherwise race it and answer with a tool error.
		return nil, "session_closed"
	}
	if errors.Is(err, io.EOF) {
		// The stream ends OK after the event that makes the task terminal (also when
		// it replays a task that had already ended, before any caught_up).
		return x.final(ctx)
	}
	return x.withTask(toolError("the call lost its task's stream (%s); the task goes on: call the tool again with the same _meta %q to attach to it, or watch task %s through the API",
		mcpAPIError(err), mcpMetaRequestID, x.taskID)), "error"
}

// observe updates what the call knows of the task and reports the event as progress.
func (x *mcpCall) observe(ctx context.Context, ev *agentplanev1.TaskEvent) {
	var say string
	switch p := ev.GetPayload().(type) {
	case *agentplanev1.TaskEvent_StateChanged:
		x.state = p.StateChanged.GetToState()
	case *agentplanev1.TaskEvent_Message:
		if p.Message.GetRole() == agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT {
			if text := tasks.MessageText(p.Message); text != "" {
				x.lastSaid = text
				say = text
			}
		}
	case *agentplanev1.TaskEvent_ToolCall:
		say = "calling tool " + strings.ToValidUTF8(p.ToolCall.GetToolName(), "?")
	case *agentplanev1.TaskEvent_InterruptRaised:
		in := p.InterruptRaised.GetInterrupt()
		x.pending[in.GetInterruptId()] = in
		if in.GetKind() == agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL {
			say = fmt.Sprintf("waiting for a person to approve the call of %s (interrupt %s): a reviewer decides in the agentplane inbox, not through MCP",
				strings.ToValidUTF8(in.GetApproval().GetToolName(), "?"), in.GetInterruptId())
		}
	case *agentplanev1.TaskEvent_InterruptResolved:
		if in := x.pending[p.InterruptResolved.GetInterruptId()]; in != nil && in.GetKind() == agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL {
			say = fmt.Sprintf("the reviewer decided on interrupt %s: %s", in.GetInterruptId(),
				strings.ToLower(strings.TrimPrefix(p.InterruptResolved.GetDecision().GetType().String(), "DECISION_TYPE_")))
		}
		delete(x.pending, p.InterruptResolved.GetInterruptId())
	case *agentplanev1.TaskEvent_CancelRequested:
		say = "cancellation requested"
	}
	if say != "" {
		x.notify(ctx, ev.GetSequence(), say)
	}
}

// notify sends a progress notification when the client asked for them.
func (x *mcpCall) notify(ctx context.Context, seq int64, text string) {
	token := x.req.Params.GetProgressToken()
	if token == nil || seq <= x.progress {
		return
	}
	x.progress = seq
	err := x.req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(seq), Message: bounded(text)})
	if err != nil && ctx.Err() == nil {
		x.f.s.log.Debug("mcp progress not sent", "task", x.taskID, "err", err)
	}
}

// act decides on the task's current state: a result when it has ended, an answer to
// the input it needs (elicitation) or a result saying it waits for it, or nothing
// (done false) while it runs or waits for a reviewer.
func (x *mcpCall) act(ctx context.Context) (res *mcp.CallToolResult, outcome string, done bool) {
	if tasks.IsTerminal(x.state) {
		res, outcome := x.final(ctx)
		return res, outcome, true
	}
	if x.state != agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED {
		return nil, "", false
	}
	var turn *agentplanev1.Interrupt
	var outputs []*agentplanev1.Interrupt
	for _, in := range x.pending {
		switch in.GetKind() {
		case agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE:
			turn = in
		case agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED:
			outputs = append(outputs, in)
		}
	}
	if turn == nil && len(outputs) == 0 {
		return nil, "", false // a reviewer's decision: keep waiting
	}
	if !x.canElicit() {
		return x.waiting(turn, outputs), "input_required", true
	}
	cont, res, outcome := x.elicit(ctx, turn, outputs)
	if res != nil || outcome != "" {
		return res, outcome, true
	}
	_, err := x.f.s.taskClient().ContinueTask(x.f.outgoing(ctx, x.c), cont)
	if err != nil {
		if x.clientCanceled(ctx) {
			x.cancelTask()
			return nil, "client_canceled", true
		}
		return x.withTask(toolError("the task could not continue: %s", mcpAPIError(err))), "error", true
	}
	return nil, "", false
}

func (x *mcpCall) canElicit() bool {
	ip := x.req.Session.InitializeParams()
	return ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil
}

// elicit asks the client's user for what the task waits for: the next message of a
// chat turn, or the output of each client tool call. It returns the ContinueTask to
// make, or the call's result when the user declined (the task keeps waiting).
func (x *mcpCall) elicit(ctx context.Context, turn *agentplanev1.Interrupt, outputs []*agentplanev1.Interrupt) (*agentplanev1.ContinueTaskRequest, *mcp.CallToolResult, string) {
	ask := func(p *mcp.ElicitParams) (map[string]any, *mcp.CallToolResult, string) {
		r, err := x.req.Session.Elicit(ctx, p)
		if err != nil {
			if x.clientCanceled(ctx) {
				x.cancelTask()
				return nil, nil, "client_canceled"
			}
			return nil, x.withTask(toolError("asking the user failed (%s); the task %s still waits for input", bounded(err.Error()), x.taskID)), "error"
		}
		if r.Action != "accept" {
			return nil, x.waiting(turn, outputs), "input_required"
		}
		return r.Content, nil, ""
	}
	if turn != nil {
		msg := x.lastSaid
		if msg == "" {
			msg = "The agent ended its turn."
		}
		content, res, outcome := ask(&mcp.ElicitParams{Mode: "form", Message: bounded(msg),
			RequestedSchema: map[string]any{"type": "object", "required": []any{"message"}, "properties": map[string]any{
				"message": map[string]any{"type": "string", "title": "Reply", "description": "Your next message to the agent"}}}})
		if content == nil {
			return nil, res, outcome
		}
		text, _ := content["message"].(string)
		if text == "" {
			return nil, x.waiting(turn, outputs), "input_required"
		}
		return &agentplanev1.ContinueTaskRequest{TaskId: x.taskID, RequestId: mcpContinueID(turn.GetInterruptId()),
			Input: &agentplanev1.ContinueTaskRequest_Message{Message: &agentplanev1.Message{Role: agentplanev1.MessageRole_MESSAGE_ROLE_USER,
				Parts: []*agentplanev1.Part{{Kind: &agentplanev1.Part_Text{Text: text}}}}}}, nil, ""
	}
	var outs []*agentplanev1.ToolOutput
	ids := make([]string, 0, len(outputs))
	for _, in := range outputs {
		ids = append(ids, in.GetInterruptId())
		req := in.GetToolOutput()
		content, res, outcome := ask(&mcp.ElicitParams{Mode: "form",
			Message: bounded(fmt.Sprintf("The agent calls the tool %s, which this client runs, with the arguments %s. What did it return?",
				strings.ToValidUTF8(req.GetToolName(), "?"), strings.ToValidUTF8(req.GetArgumentsJson(), "?"))),
			RequestedSchema: map[string]any{"type": "object", "required": []any{"result"}, "properties": map[string]any{
				"result":   map[string]any{"type": "string", "title": "Result", "description": "What the tool returned (JSON, or text)"},
				"is_error": map[string]any{"type": "boolean", "title": "Failed", "description": "The tool failed"}}}})
		if content == nil {
			return nil, res, outcome
		}
		text, _ := content["result"].(string)
		failed, _ := content["is_error"].(bool)
		var v structpb.Value
		if json.Valid([]byte(text)) && protojson.Unmarshal([]byte(text), &v) == nil {
			outs = append(outs, &agentplanev1.ToolOutput{CallId: in.GetCallId(), Result: &v, IsError: failed})
		} else {
			outs = append(outs, &agentplanev1.ToolOutput{CallId: in.GetCallId(), Result: structpb.NewStringValue(text), IsError: failed})
		}
	}
	return &agentplanev1.ContinueTaskRequest{TaskId: x.taskID, RequestId: mcpContinueID(strings.Join(ids, ",")),
		Input: &agentplanev1.ContinueTaskRequest_ToolOutputs{ToolOutputs: &agentplanev1.ToolOutputs{Outputs: outs}}}, nil, ""
}

// mcpContinueID is the ContinueTask idempotency key of the answer to the interrupts
// named: the same answer sent twice continues the task once.
func mcpContinueID(interrupts string) string {
	sum := sha256.Sum256([]byte(interrupts))
	return "mcp-continue-" + hex.EncodeToString(sum[:16])
}

// waiting is the result of a call whose task waits for input this client cannot give
// (it has no elicitation) or did not (the user declined). The task stays as it is.
func (x *mcpCall) waiting(turn *agentplanev1.Interrupt, outputs []*agentplanev1.Interrupt) *mcp.CallToolResult {
	var res *mcp.CallToolResult
	if turn != nil {
		// The turn's answer is the agent's message: a result, not an error.
		text := x.lastSaid
		if text == "" {
			text = "(the agent ended its turn without a message)"
		}
		res = &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}, &mcp.TextContent{Text: fmt.Sprintf(
			"The agent waits for your next message (task %s). Continue it through the agentplane API (ContinueTask), or call this tool again with the same _meta %q from a client that supports elicitation.",
			x.taskID, mcpMetaRequestID)}}}
	} else {
		names := make([]string, 0, len(outputs))
		for _, in := range outputs {
			names = append(names, strings.ToValidUTF8(in.GetToolOutput().GetToolName(), "?"))
		}
		res = toolError("the agent waits for the output of client tools (%s) that this client did not give (task %s); give them through the agentplane API (ContinueTask with tool_outputs)",
			bounded(strings.Join(names, ", ")), x.taskID)
	}
	if !x.t.structured {
		res.StructuredContent = map[string]any{"task_id": x.taskID, "state": "input_required"}
	}
	return x.withTask(res)
}

// final is the result of a task that has ended.
func (x *mcpCall) final(ctx context.Context) (*mcp.CallToolResult, string) {
	got, err := x.f.s.taskClient().GetTask(x.f.outgoing(ctx, x.c), &agentplanev1.GetTaskRequest{TaskId: x.taskID, View: agentplanev1.TaskView_TASK_VIEW_BASIC})
	if err != nil {
		return x.withTask(toolError("the task ended but could not be read: %s", mcpAPIError(err))), "error"
	}
	task := got.GetTask()
	x.state = task.GetState()
	switch task.GetState() {
	case agentplanev1.TaskState_TASK_STATE_FAILED:
		return x.withTask(toolError("the task failed (%s): %s", bounded(task.GetFailure().GetReason()), bounded(task.GetFailure().GetMessage()))), "failed"
	case agentplanev1.TaskState_TASK_STATE_CANCELED:
		return x.withTask(toolError("the task was canceled")), "canceled"
	}
	out := task.GetOutput()
	res := &mcp.CallToolResult{}
	if text := tasks.MessageText(out.GetMessage()); text != "" {
		res.Content = append(res.Content, &mcp.TextContent{Text: text})
	}
	var structured any
	if out.GetStructured() != nil {
		structured = out.GetStructured().AsInterface()
	}
	if structured != nil && len(res.Content) == 0 {
		// Clients that read no structuredContent get it as text (the spec's advice).
		b, _ := json.Marshal(structured)
		res.Content = append(res.Content, &mcp.TextContent{Text: string(b)})
	}
	if len(res.Content) == 0 {
		res.Content = []mcp.Content{&mcp.TextContent{Text: ""}}
	}
	if x.t.structured {
		res.StructuredContent = structured
	} else {
		sc := map[string]any{"task_id": x.taskID, "state": "completed"}
		if structured != nil {
			sc["output"] = structured
		}
		res.StructuredContent = sc
	}
	return x.withTask(res), "completed"
}

// withTask names the task and its state in the result's _meta.
func (x *mcpCall) withTask(res *mcp.CallToolResult) *mcp.CallToolResult {
	res.Meta = mcp.Meta{mcpMetaTaskID: x.taskID, mcpMetaState: strings.ToLower(strings.TrimPrefix(x.state.String(), "TASK_STATE_"))}
	return res
}

// clientCanceled reports whether the call's context ended because the client sent
// notifications/cancelled for it. The SDK cancels the handler's context then with no
// cause of its own (context.Canceled); a session that closes (errMCPSessionClosed), a
// connection that fails and a server that shuts down end it otherwise, and none of
// them cancels the task:
// MCP says a disconnection is not a cancellation, and the task is durable.
func (x *mcpCall) clientCanceled(ctx context.Context) bool {
	return ctx.Err() != nil && context.Cause(ctx) == context.Canceled && !x.stopping()
}

// stopping reports whether the server has begun to shut down.
func (x *mcpCall) stopping() bool { return x.f.s.stopping.Err() != nil }

// cancelTask cancels the task for a client that canceled its call.
func (x *mcpCall) cancelTask() {
	if x.taskID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), mcpCancelTimeout)
	defer cancel()
	_, err := x.f.s.taskClient().CancelTask(x.f.outgoing(ctx, x.c), &agentplanev1.CancelTaskRequest{
		TaskId: x.taskID, Reason: "the MCP client canceled the tool call", RequestId: "mcp-cancel",
	})
	if err != nil && status.Code(err) != codes.FailedPrecondition {
		x.f.s.log.Warn("mcp: canceling the task of a canceled call failed", "task", x.taskID, "err", err)
	}
}

// toolError is a tool result that reports an error to the model.
func toolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// mcpAPIError is an API error as a tool result says it: its message and reason.
func mcpAPIError(err error) string {
	msg := bounded(grpcMessage(err))
	if r := reasons.Of(err); r != 0 {
		return msg + " [" + reasons.Wire(r) + "]"
	}
	return msg
}

// grpcMessage is the message of a gRPC status error, or the error's text.
func grpcMessage(err error) string {
	if st, ok := status.FromError(err); ok {
		return st.Message()
	}
	return err.Error()
}

// bounded cuts text to maxMCPText bytes on a rune boundary, valid UTF-8.
func bounded(text string) string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	if len(text) <= maxMCPText {
		return text
	}
	cut := maxMCPText
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + "…"
}
