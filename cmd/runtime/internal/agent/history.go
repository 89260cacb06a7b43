package agent

import (
	"context"

	"github.com/openai/openai-go/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// rebuild makes the conversation from the instructions and the session's events
// (Session.Events, or else the task's log read under the lease up to its history
// cursor), then adds what the lease carries that the log may not show yet (continue
// messages, client tool outputs). The calls of the last assistant message that have
// no result are left in pending: the loop gates them again, and the gate says which
// an earlier lease reported already.
func (tu *turn) rebuild(ctx context.Context) error {
	if s := tu.spec.GetInstructions().GetText(); s != "" {
		tu.conv = append(tu.conv, openai.SystemMessage(s))
	}
	tu.reportedArgs = map[string]string{}
	tu.modelIDs = map[string]string{}
	tu.resultErr = map[string]bool{}
	seenMsg := map[string]bool{}
	results := map[string]bool{}
	var lastCalls []call
	sawInput := false
	addUser := func(m *agentplanev1.Message) {
		if id := m.GetMessageId(); id != "" {
			if seenMsg[id] {
				return
			}
			seenMsg[id] = true
		}
		tu.conv = append(tu.conv, openai.UserMessage(client.MessageText(m)))
	}
	addResult := func(r *agentplanev1.ToolResult) {
		if results[r.GetCallId()] {
			return
		}
		results[r.GetCallId()] = true
		tu.resultErr[r.GetCallId()] = r.GetIsError()
		tu.conv = append(tu.conv, tu.toolMessage(resultText(r.GetResult()), r.GetCallId()))
	}
	if in := tu.s.Input; in != nil {
		addUser(in)
		sawInput = true
	}
	answer := false // the last thing in the history is an answer without calls
	apply := func(ev *agentplanev1.TaskEvent) bool {
		switch ev.GetPayload().(type) {
		case *agentplanev1.TaskEvent_Message, *agentplanev1.TaskEvent_ToolResult:
			answer = false
		}
		switch p := ev.GetPayload().(type) {
		case *agentplanev1.TaskEvent_Submitted:
			if in := p.Submitted.GetInput(); in != nil && !sawInput {
				addUser(in)
				sawInput = true
			}
		case *agentplanev1.TaskEvent_Message:
			m := p.Message
			switch m.GetRole() {
			case agentplanev1.MessageRole_MESSAGE_ROLE_USER:
				addUser(m)
			case agentplanev1.MessageRole_MESSAGE_ROLE_SYSTEM:
				if isRepair(m) {
					tu.repairs++
					addUser(m)
				}
			case agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT:
				seenMsg[m.GetMessageId()] = true
				lastCalls = callsOf(m)
				tu.addAssistant(m, lastCalls)
				for _, c := range lastCalls {
					if c.Refused != "" {
						results[c.ID], tu.resultErr[c.ID] = true, true // answered with its refusal
					}
				}
				if len(lastCalls) > 0 {
					tu.refusedTurns = nextRefusedTurns(tu.refusedTurns, lastCalls)
				} else {
					tu.refusedTurns = 0
				}
				answer = len(lastCalls) == 0
				if m.GetModel() != "" || len(lastCalls) > 0 {
					tu.trips++
				}
			}
		case *agentplanev1.TaskEvent_ToolCall:
			tu.reportedArgs[p.ToolCall.GetCallId()] = p.ToolCall.GetArgumentsJson()
		case *agentplanev1.TaskEvent_ToolResult:
			addResult(p.ToolResult)
		}
		return true
	}
	if tu.s.Events != nil {
		for _, ev := range tu.s.Events {
			apply(ev)
		}
	} else if cursor := tu.t.Lease().GetHistoryCursor(); cursor > 0 {
		if err := tu.t.History(ctx, 0, cursor, apply); err != nil {
			return err
		}
	}
	if !sawInput && tu.t.Input() != nil {
		addUser(tu.t.Input())
	}
	open := map[string]bool{}
	for _, c := range lastCalls {
		open[c.ID] = !results[c.ID]
	}
	for _, r := range tu.t.ContinueToolResults() {
		if open[r.GetCallId()] {
			addResult(r)
		}
	}
	for _, c := range lastCalls {
		if !results[c.ID] {
			tu.pending = append(tu.pending, c)
		} else if st := tu.sessionTool(c.Name); st != nil && st.EndsTurn && !tu.resultErr[c.ID] {
			tu.ended = true
		}
	}
	tu.answered = answer && !tu.s.Chat
	if tu.s.Chat {
		for _, m := range tu.t.ContinueMessages() {
			addUser(m)
		}
	}
	return nil
}

// resultText is a tool result as the model reads it: a string as is, anything else
// as JSON.
func resultText(v *structpb.Value) string {
	if v == nil {
		return ""
	}
	if s, ok := v.GetKind().(*structpb.Value_StringValue); ok {
		return s.StringValue
	}
	b, err := protojson.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
