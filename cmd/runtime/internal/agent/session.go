package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	"github.com/agentplane/agentplane/cmd/runtime/internal/telemetry"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/spec"
)

// ErrEnded is returned by a session Tool whose work ended the task's turn (a nested
// node paused the task for client tool outputs): the lease is gone, and every
// session up the stack returns with Result.Ended.
var ErrEnded = errors.New("agent: the task's turn ended")

// repairKey marks the runtime's output_schema repair request in the log (a data part
// of a system message), so a resumed lease knows the one repair turn was used.
const repairKey = "output_schema_repair"

// Tool is a tool the caller of a Session provides beside the agent's own: a graph's
// edges, or the verdict tool granted to an evaluator. It is gated like every call. A
// session tool wins over a function tool of the same name (the control plane declares
// the verdict tool in the evaluator's spec; the runtime is the one that runs it).
type Tool struct {
	Def *agentplanev1.FunctionDef
	// EndsTurn ends the session once the calls of the message that called it are done.
	EndsTurn bool
	// Run runs an allowed call with the arguments to run with. resumed is set when an
	// earlier lease reported the call but not its result: Run continues from the
	// task's history and must not redo what that lease did. An error ends the
	// session; ErrEnded says the task's turn ended inside Run.
	Run func(ctx context.Context, c worker.Call, argumentsJSON string, resumed bool) (result string, isError bool, err error)
}

// Result is how a session ended.
type Result struct {
	// Message is the session's last assistant message (its answer).
	Message *agentplanev1.Message
	// Structured is the answer parsed as JSON, when an output schema applied.
	Structured *structpb.Value
	// Ended says the task's turn ended (it waits for client tool outputs): the lease
	// is released and nothing more may be written under it.
	Ended bool
}

// Session is one agent's model loop: the conversation rebuilt from the log, model
// calls, gated tool calls, the output schema check. A plain agent task is one session
// (Runner.Run); a graph runs one per node invocation.
type Session struct {
	Runner *Runner
	Task   *worker.Task
	Spec   *agentplanev1.AgentSpec
	// Node names the session's agent in events and gate checks.
	Node string
	// Input, when set, is the user message the conversation starts with. Unset, the
	// task's input is used.
	Input *agentplanev1.Message
	// Events, when set, are the session's own recorded events to rebuild from; unset,
	// the task's whole history is read.
	Events []*agentplanev1.TaskEvent
	// Chat adds the lease's continue messages (a plain agent in chat mode).
	Chat bool
	// Tools are offered before the agent's own.
	Tools []Tool
	// OutputSchema overrides the spec's output_schema.
	OutputSchema *agentplanev1.OutputSchemaSpec
	// BeforeModel is called before every model call; an error ends the session with it.
	BeforeModel func(ctx context.Context) error
	// AfterModel is called with every reported assistant message.
	AfterModel func(*agentplanev1.Message)
	// Key tells this session's model calls apart from those of the task's other
	// sessions of the same node (a graph node invoked more than once: the edge call
	// that started it), in the ids CheckModelCall is asked with; empty for the one
	// session of a plain agent.
	Key string
}

// Run runs the session until its agent answers, a session tool ends it, or the
// task's turn ends. Errors are the task's: a *worker.Failure to fail it with.
func (s *Session) Run(ctx context.Context) (res Result, err error) {
	r := s.Runner
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With(append(telemetry.LogAttrs(ctx, s.Task), "node", s.Node)...)
	rt, ok := r.route(s.Spec.GetModel())
	if !ok {
		return Result{}, &worker.Failure{Reason: ReasonNoModelRoute, Message: fmt.Sprintf("no model route matches model %q (node %s)", s.Spec.GetModel(), s.Node)}
	}
	tu := &turn{r: r, t: s.Task, spec: s.Spec, node: s.Node, model: s.Spec.GetModel(), log: log, s: s}
	// The runtime retries (retrying), so that each retry is logged and counted.
	opts := []option.RequestOption{option.WithBaseURL(rt.BaseURL), option.WithAPIKey(rt.APIKey),
		option.WithMaxRetries(0), option.WithMiddleware(tu.retrying(rt.MaxRetries))}
	if rt.Timeout > 0 {
		opts = append(opts, option.WithRequestTimeout(rt.Timeout))
	}
	tu.oai = openai.NewClient(opts...)
	if err := tu.rebuild(ctx); err != nil {
		return Result{}, err
	}
	defer tu.endSpans()
	// Whatever ends the session, the last tool result's report is done before
	// anything else is written under the lease (a completion, a hand-back).
	defer func() {
		if rerr := tu.settle(); rerr != nil && err == nil {
			res, err = Result{}, rerr
		}
	}()
	release, err := tu.mount(ctx)
	if err != nil {
		return Result{}, err
	}
	defer release()
	return tu.loop(ctx)
}

func (tu *turn) schema() *agentplanev1.OutputSchemaSpec {
	if tu.s.OutputSchema != nil {
		return tu.s.OutputSchema
	}
	return tu.spec.GetOutputSchema()
}

// responseFormat asks the model for JSON matching the schema; strict unless the spec
// says strict: false (the control plane treats absent as true).
func responseFormat(js *agentplanev1.JsonSchemaSpec) openai.ChatCompletionNewParamsResponseFormatUnion {
	p := shared.ResponseFormatJSONSchemaJSONSchemaParam{
		Name:   js.GetName(),
		Schema: js.GetSchema().AsMap(),
		Strict: openai.Bool(js.Strict == nil || js.GetStrict()),
	}
	return openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{JSONSchema: p}}
}

// checkOutput checks a final answer against the output schema. It returns the answer
// as JSON when it matches; repair when it did not and the one repair turn has been
// asked for now (the loop calls the model again); a Failure when the repair did not
// help either.
func (tu *turn) checkOutput(ctx context.Context, msg *agentplanev1.Message) (*structpb.Value, bool, error) {
	js := tu.schema().GetJsonSchema()
	if js == nil {
		return nil, false, nil
	}
	text := client.MessageText(msg)
	v, problems := matchSchema(js, text)
	if len(problems) == 0 {
		return v, false, nil
	}
	what := strings.Join(problems, "; ")
	if tu.repairs > 0 {
		return nil, false, &worker.Failure{Reason: ReasonOutputSchema,
			Message: fmt.Sprintf("node %s: the answer does not match output_schema %q after a repair turn: %s", tu.node, js.GetName(), what)}
	}
	prompt := fmt.Sprintf("Your answer does not match the required JSON schema %q: %s. Answer again with only a JSON value that matches the schema.", js.GetName(), what)
	m := client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_SYSTEM, prompt)
	m.Node = tu.node
	m.Parts = append(m.Parts, &agentplanev1.Part{Kind: &agentplanev1.Part_Data{Data: &agentplanev1.DataPart{Data: &structpb.Struct{Fields: map[string]*structpb.Value{repairKey: structpb.NewBoolValue(true)}}}}})
	if _, err := tu.t.Report(ctx, &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_Message{Message: m}}); err != nil {
		return nil, false, err
	}
	tu.repairs++
	tu.conv = append(tu.conv, openai.UserMessage(prompt))
	return nil, true, nil
}

// matchSchema parses text as JSON and validates it against the schema; problems are
// empty when it matches.
func matchSchema(js *agentplanev1.JsonSchemaSpec, text string) (*structpb.Value, []string) {
	var raw any
	if err := json.Unmarshal([]byte(strings.TrimSpace(text)), &raw); err != nil {
		return nil, []string{"the answer is not JSON (" + err.Error() + ")"}
	}
	v, err := structpb.NewValue(raw)
	if err != nil {
		return nil, []string{err.Error()}
	}
	if problems := spec.ValidateArgs(js.GetSchema(), v); len(problems) > 0 {
		return nil, problems
	}
	return v, nil
}

// isRepair reports whether m is the runtime's output_schema repair request.
func isRepair(m *agentplanev1.Message) bool {
	for _, p := range m.GetParts() {
		if _, ok := p.GetData().GetData().GetFields()[repairKey]; ok {
			return true
		}
	}
	return false
}
