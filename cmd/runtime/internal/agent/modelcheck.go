package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/spec"
)

// What the model sends is data, not truth: its tool calls are checked before they
// reach the gate, its cut-off answers are not answers, and usage it does not report is
// unknown, not zero.

// Reasons a tool call is refused (the reason label of the refused-calls metric).
const (
	refusedTruncated = "truncated"       // not JSON, and the output was cut off
	refusedJSON      = "invalid_json"    // not JSON
	refusedObject    = "not_object"      // JSON, but not an object
	refusedSchema    = "schema_mismatch" // does not match the tool's parameters schema
)

// maxProblems bounds the schema problems named to the model and in the log.
const maxProblems = 5

// checkArguments checks the arguments of a call the model just made. A call whose
// arguments are not one JSON object, or do not match its tool's parameters schema, is
// returned Refused: it never reaches the gate, and the model is told why instead of a
// result. Empty arguments are taken as {} (servers send "" for a tool without
// parameters). cutOff says the model's output was cut off (finish_reason length).
func (tu *turn) checkArguments(c call, cutOff bool) call {
	if strings.TrimSpace(c.Arguments) == "" {
		c.Arguments = "{}"
	}
	reason, why := tu.argumentsProblem(c, cutOff)
	if reason == "" {
		return c
	}
	c.Refused, c.refusedReason = why, reason
	tu.log.Warn("tool call refused", "call_id", c.ID, "model_call_id", c.ModelID, "tool", c.Name, "reason", reason, "why", why)
	tu.r.Telemetry.ToolCallRefused(reason)
	return c
}

// argumentsProblem says what is wrong with c's arguments: a reason label and an
// explanation, both empty when nothing is.
func (tu *turn) argumentsProblem(c call, cutOff bool) (reason, why string) {
	var v any
	if err := json.Unmarshal([]byte(c.Arguments), &v); err != nil {
		if cutOff {
			return refusedTruncated, "its arguments were cut off (the model's output reached its token limit, finish_reason length) and are not valid JSON"
		}
		return refusedJSON, fmt.Sprintf("its arguments are not valid JSON (%v)", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return refusedObject, "its arguments are not a JSON object"
	}
	schema := tu.parametersOf(c.Name)
	if schema == nil || !spec.ArgsSchemaCompiles(schema) {
		return "", "" // an unknown tool is the gate's to answer; a broken schema is not the model's fault
	}
	args, err := structpb.NewValue(v)
	if err != nil {
		return refusedObject, fmt.Sprintf("its arguments cannot be read (%v)", err)
	}
	problems := spec.ValidateArgs(schema, args)
	if len(problems) == 0 {
		return "", ""
	}
	if len(problems) > maxProblems {
		problems = append(problems[:maxProblems], fmt.Sprintf("and %d more", len(problems)-maxProblems))
	}
	return refusedSchema, "its arguments do not match the tool's parameters schema: " + strings.Join(problems, "; ")
}

// parametersOf is the parameters schema of the tool the model calls name, nil when no
// tool has that name or it declares none.
func (tu *turn) parametersOf(name string) *structpb.Struct {
	var m map[string]any
	switch st, fn, ht, rt := tu.sessionTool(name), tu.functionTool(name), tu.httpTool(name), tu.remoteTool(name); {
	case st != nil:
		return st.Def.GetParameters()
	case fn != nil:
		return fn.GetFunction().GetParameters()
	case ht != nil:
		m = ht.Parameters
	case rt != nil:
		m = rt.Parameters
	}
	if m == nil {
		return nil
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil
	}
	return s
}

// refusedResult is what the model reads as the result of a refused call.
func refusedResult(c call) string {
	return fmt.Sprintf("This call was not run: %s. Call %s again with arguments that are one JSON object matching its parameters schema.", c.Refused, c.Name)
}

// runnable are the calls that were not refused.
func runnable(calls []call) []call {
	var out []call
	for _, c := range calls {
		if c.Refused == "" {
			out = append(out, c)
		}
	}
	return out
}

// nextRefusedTurns is the count of model turns in a row with refused calls after a
// turn that made calls: one more if some were refused, else none.
func nextRefusedTurns(before int, calls []call) int {
	if len(runnable(calls)) == len(calls) {
		return 0
	}
	return before + 1
}

// refusals names the refused calls of m, for a failure message.
func refusals(m *agentplanev1.Message) string {
	var out []string
	for _, c := range callsOf(m) {
		if c.Refused != "" {
			out = append(out, fmt.Sprintf("%s: %s", c.Name, c.Refused))
		}
	}
	return strings.Join(out, "; ")
}

// refusedNote is the note that tells a person reading the task's log which calls of a
// model turn were refused and why; nil when none was.
func refusedNote(calls []call) *agentplanev1.RuntimeNote {
	var lines, ids, reasons []string
	for _, c := range calls {
		if c.Refused == "" {
			continue
		}
		lines = append(lines, fmt.Sprintf("tool call %s (%s) was not run: %s", c.ID, c.Name, c.Refused))
		ids = append(ids, c.ID)
		reasons = append(reasons, c.refusedReason)
	}
	if len(lines) == 0 {
		return nil
	}
	return &agentplanev1.RuntimeNote{Text: strings.Join(lines, "\n"), Attributes: map[string]string{
		"refused_tool_calls": strings.Join(ids, ","), "reasons": strings.Join(reasons, ","),
	}}
}

// checkTruncated fails a final answer (a message without tool calls) that the model's
// token limit cut off: the spec vocabulary has no way to accept a partial answer.
func (tu *turn) checkTruncated(m *agentplanev1.Message) error {
	if dataField(m, finishKey).GetStringValue() != finishLength || len(callsOf(m)) > 0 {
		return nil
	}
	tu.log.Warn("the model's answer was cut off", "model", tu.model, "finish_reason", finishLength, "message_id", m.GetMessageId())
	return &worker.Failure{Reason: ReasonOutputTruncated,
		Message: fmt.Sprintf("node %s: the model's answer was cut off at its token limit (finish_reason length) after %d bytes", tu.node, len(client.MessageText(m)))}
}

// usageEstimate is the runtime's estimate of a model call's tokens, when the server
// reported none.
type usageEstimate struct{ Input, Output int64 }

// bytesPerToken is the estimate's ratio: about four bytes of English text or JSON per
// token for GPT-style tokenizers. The input is the request's JSON, syntax included,
// so the estimate errs high, as a budget should.
const bytesPerToken = 4

// estimateUsage estimates a call's tokens from what was sent and what came back.
func estimateUsage(params openai.ChatCompletionNewParams, text string, calls []call) *usageEstimate {
	in, _ := json.Marshal(params)
	out := len(text)
	for _, c := range calls {
		out += len(c.Name) + len(c.Arguments)
	}
	tokens := func(n int) int64 { return int64((n + bytesPerToken - 1) / bytesPerToken) }
	return &usageEstimate{Input: tokens(len(in)), Output: tokens(out)}
}

// Usage is what the model call that made m used, as budgets count it: the usage the
// server reported, or else the runtime's estimate (estimated). A message without
// either (not a model's, or logged before estimates) counts nothing.
func Usage(m *agentplanev1.Message) (input, output int64, estimated bool) {
	if u := m.GetUsage(); u != nil {
		return int64(u.GetInputTokens()), int64(u.GetOutputTokens()), false
	}
	f := dataField(m, estimateKey).GetStructValue().GetFields()
	if f == nil {
		return 0, 0, false
	}
	return int64(f["input_tokens"].GetNumberValue()), int64(f["output_tokens"].GetNumberValue()), true
}
