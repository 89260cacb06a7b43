package a2a

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Labels an A2A task carries, so that the A2A face can list an agent's tasks and a
// conversation's (ListTasks by label) and knows the contextId of a task.
const (
	labelAgent   = "a2a.agent"
	labelContext = "a2a.context"
)

// Artifact ids.
const (
	artifactOutput     = "output"
	artifactStructured = "structured-output"
)

func strp(s string) *string { return &s }

// inboundMessage converts an A2A user message to agentplane's.
func inboundMessage(m *message) (*agentplanev1.Message, error) {
	out := &agentplanev1.Message{MessageId: m.MessageID, Role: agentplanev1.MessageRole_MESSAGE_ROLE_USER}
	for i, p := range m.Parts {
		ap, err := inboundPart(p)
		if err != nil {
			return nil, fmt.Errorf("message.parts[%d]: %w", i, err)
		}
		out.Parts = append(out.Parts, ap)
	}
	return out, nil
}

func inboundPart(p part) (*agentplanev1.Part, error) {
	n := 0
	if p.Text != nil {
		n++
	}
	if p.Raw != nil {
		n++
	}
	if p.URL != "" {
		n++
	}
	if p.Data != nil {
		n++
	}
	if n != 1 {
		return nil, fmt.Errorf("a part has exactly one of text, raw, url, data (it has %d)", n)
	}
	switch {
	case p.Text != nil:
		return &agentplanev1.Part{Kind: &agentplanev1.Part_Text{Text: *p.Text}}, nil
	case p.Data != nil:
		s, err := dataStruct(p.Data)
		if err != nil {
			return nil, err
		}
		return &agentplanev1.Part{Kind: &agentplanev1.Part_Data{Data: &agentplanev1.DataPart{Data: s}}}, nil
	case p.Raw != nil:
		return &agentplanev1.Part{Kind: &agentplanev1.Part_File{File: &agentplanev1.FilePart{Name: p.Filename, MediaType: p.MediaType,
			Source: &agentplanev1.FilePart_Bytes{Bytes: p.Raw}}}}, nil
	default:
		return &agentplanev1.Part{Kind: &agentplanev1.Part_File{File: &agentplanev1.FilePart{Name: p.Filename, MediaType: p.MediaType,
			Source: &agentplanev1.FilePart_Uri{Uri: p.URL}}}}, nil
	}
}

// dataStruct reads a data part: an object as it is, any other JSON value as
// {"value": v} (agentplane's data parts are objects).
func dataStruct(raw json.RawMessage) (*structpb.Struct, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		obj = map[string]any{"value": v}
	}
	s, err := structpb.NewStruct(obj)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	return s, nil
}

func outboundParts(parts []*agentplanev1.Part) []part {
	out := make([]part, 0, len(parts))
	for _, p := range parts {
		switch k := p.GetKind().(type) {
		case *agentplanev1.Part_Text:
			out = append(out, part{Text: strp(k.Text)})
		case *agentplanev1.Part_Data:
			b, _ := protojson.Marshal(k.Data.GetData())
			if len(b) == 0 {
				b = []byte("{}")
			}
			out = append(out, part{Data: b})
		case *agentplanev1.Part_File:
			f := k.File
			q := part{Filename: f.GetName(), MediaType: f.GetMediaType()}
			if u := f.GetUri(); u != "" {
				q.URL = u
			} else {
				q.Raw = f.GetBytes()
				if q.Raw == nil {
					q.Raw = []byte{}
				}
			}
			out = append(out, q)
		}
	}
	return out
}

func outboundMessage(m *agentplanev1.Message, taskID, contextID string) *message {
	role := roleAgent
	if m.GetRole() == agentplanev1.MessageRole_MESSAGE_ROLE_USER {
		role = roleUser
	}
	return &message{MessageID: m.GetMessageId(), TaskID: taskID, ContextID: contextID, Role: role, Parts: outboundParts(m.GetParts())}
}

// agentText is a status message the server writes (not the model).
func agentText(taskID, contextID, id, text string, data map[string]any) *message {
	m := &message{MessageID: id, TaskID: taskID, ContextID: contextID, Role: roleAgent, Parts: []part{{Text: strp(text)}}}
	if data != nil {
		b, _ := json.Marshal(data)
		m.Parts = append(m.Parts, part{Data: b})
	}
	return m
}

func timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// contextOf is the A2A contextId of an agentplane task: the label the A2A face set,
// else its session id, else the task id (a task started elsewhere is a conversation
// of its own).
func contextOf(t *agentplanev1.Task) string {
	if c := t.GetLabels()[labelContext]; c != "" {
		return c
	}
	if t.GetSessionId() != "" {
		return t.GetSessionId()
	}
	return t.GetTaskId()
}

// outputArtifacts: the final answer's parts, and the structured output as a data part.
func outputArtifacts(out *agentplanev1.TaskOutput) []artifact {
	if out == nil {
		return nil
	}
	var arts []artifact
	if m := out.GetMessage(); m != nil && len(m.GetParts()) > 0 {
		arts = append(arts, artifact{ArtifactID: artifactOutput, Name: "output", Parts: outboundParts(m.GetParts())})
	}
	if s := out.GetStructured(); s != nil {
		b, _ := protojson.Marshal(s)
		arts = append(arts, artifact{ArtifactID: artifactStructured, Name: "structured output", Parts: []part{{Data: b, MediaType: "application/json"}}})
	}
	return arts
}

// Failure reasons that are a refusal rather than a breakage: A2A's rejected. A
// runtime that fails a task because a person rejected its tool call says tool.rejected
// (the scripted runtime's on_reject: fail does).
var rejectedReasons = map[string]bool{
	"tool.rejected": true,
}

// waitKind is why a paused (INPUT_REQUIRED) task waits, from its pending interrupts.
type waitKind int

const (
	waitNone       waitKind = iota
	waitApproval            // a person decides: A2A working
	waitTurnEnd             // chat mode: the caller's next message
	waitToolOutput          // client function tools: the caller's results
)

// pending is what a paused task waits for.
type pending struct {
	kind       waitKind
	interrupts []*agentplanev1.Interrupt
}

func classify(ints []*agentplanev1.Interrupt) pending {
	p := pending{interrupts: ints}
	for _, in := range ints {
		switch in.GetKind() {
		case agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL, agentplanev1.InterruptKind_INTERRUPT_KIND_MODEL_CALL_APPROVAL:
			if p.kind == waitNone {
				p.kind = waitApproval
			}
		case agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED:
			p.kind = waitToolOutput
		case agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE:
			if p.kind != waitToolOutput {
				p.kind = waitTurnEnd
			}
		}
	}
	return p
}

// status maps an agentplane task (and, when INPUT_REQUIRED, what it waits for) to an
// A2A status.
func status(t *agentplanev1.Task, p pending) taskStatus {
	id, ctx := t.GetTaskId(), contextOf(t)
	st := taskStatus{Timestamp: timestamp(t.GetUpdateTime().AsTime())}
	switch t.GetState() {
	case agentplanev1.TaskState_TASK_STATE_SUBMITTED:
		st.State = stateSubmitted
	case agentplanev1.TaskState_TASK_STATE_WORKING:
		st.State = stateWorking
		if t.GetCancelRequested() {
			st.Message = agentText(id, ctx, "status-"+id+"-cancel", "Cancellation requested; the runtime is stopping the task.", nil)
		}
	case agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED:
		st.State, st.Message = waitStatus(id, ctx, p)
	case agentplanev1.TaskState_TASK_STATE_COMPLETED:
		st.State = stateCompleted
	case agentplanev1.TaskState_TASK_STATE_CANCELED:
		st.State = stateCanceled
		st.Message = agentText(id, ctx, "status-"+id+"-canceled", "The task was canceled.", nil)
	case agentplanev1.TaskState_TASK_STATE_FAILED:
		f := t.GetFailure()
		st.State = stateFailed
		if rejectedReasons[f.GetReason()] {
			st.State = stateRejected
		}
		st.Message = agentText(id, ctx, "status-"+id+"-failed", failureText(f), map[string]any{"reason": f.GetReason()})
	default:
		st.State = stateSubmitted
	}
	return st
}

func failureText(f *agentplanev1.TaskFailure) string {
	msg := f.GetMessage()
	if msg == "" {
		msg = "the task failed"
	}
	if f.GetReason() != "" {
		return f.GetReason() + ": " + msg
	}
	return msg
}

// waitStatus: a call waiting for a person is working (the A2A caller is not the
// approver) with a message that says so; a chat turn end and pending client tool calls
// are input-required.
func waitStatus(id, ctx string, p pending) (string, *message) {
	switch p.kind {
	case waitToolOutput:
		var calls []any
		for _, in := range p.interrupts {
			if in.GetKind() != agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED {
				continue
			}
			to := in.GetToolOutput()
			calls = append(calls, map[string]any{"callId": in.GetCallId(), "tool": to.GetToolName(), "arguments": to.GetArgumentsJson()})
		}
		return stateInputRequired, agentText(id, ctx, "status-"+id+"-tool-output",
			"The agent called tools that you run: send one data part {\"callId\", \"result\", \"isError\"} per call in your next message.",
			map[string]any{"pendingToolCalls": calls})
	case waitTurnEnd:
		return stateInputRequired, agentText(id, ctx, "status-"+id+"-turn-end", "The agent's turn ended; your next message continues the task.", nil)
	case waitApproval:
		var names []string
		var ids []any
		for _, in := range p.interrupts {
			if in.GetApproval() != nil {
				names = append(names, in.GetApproval().GetToolName())
				ids = append(ids, in.GetInterruptId())
			}
		}
		return stateWorking, agentText(id, ctx, "status-"+id+"-approval",
			"Waiting for a person to approve a tool call ("+strings.Join(names, ", ")+"); the task continues when they decide.",
			map[string]any{"waitingForApproval": ids})
	}
	// A pause whose interrupts are not visible (yet): a person decides.
	return stateWorking, agentText(id, ctx, "status-"+id+"-approval", "Waiting for a decision; the task continues when it is made.", nil)
}

// toTask builds the A2A task. history is nil unless the caller asked for it.
func toTask(t *agentplanev1.Task, p pending, history []message, withArtifacts bool) task {
	out := task{ID: t.GetTaskId(), ContextID: contextOf(t), Status: status(t, p), History: history}
	if withArtifacts {
		out.Artifacts = outputArtifacts(t.GetOutput())
	}
	return out
}
