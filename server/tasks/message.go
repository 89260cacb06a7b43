package tasks

import (
	"math"
	"strings"

	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

// maxMessageIDBytes bounds a message id.
const maxMessageIDBytes = 128

// CheckUserMessage checks a user message from a caller (StartTask's input,
// ContinueTask's message) without changing it: role USER or unset, at least one part,
// every part of one kind, an id of at most 128 bytes, and an encoded size within
// maxBytes (RESOURCE_EXHAUSTED over it). field names it in errors.
func CheckUserMessage(field string, m *agentplanev1.Message, maxBytes int64) error {
	switch {
	case m == nil || len(m.GetParts()) == 0:
		return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "%s is required: a message with at least one part (for example {\"parts\":[{\"text\":\"...\"}]})", field)
	case m.GetRole() != agentplanev1.MessageRole_MESSAGE_ROLE_USER && m.GetRole() != agentplanev1.MessageRole_MESSAGE_ROLE_UNSPECIFIED:
		return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "%s.role is %s; a caller's message is the user's (MESSAGE_ROLE_USER)", field, m.GetRole())
	}
	if err := checkMessage(field, m); err != nil {
		return err
	}
	if size := int64(proto.Size(m)); size > maxBytes {
		return apierr.ResourceExhausted("%s of %d bytes exceeds the %d-byte limit (limits.max_input_bytes)", field, size, maxBytes)
	}
	return nil
}

// checkMessage checks what every logged message must satisfy (INVALID_ARGUMENT).
func checkMessage(field string, m *agentplanev1.Message) error {
	if len(m.GetMessageId()) > maxMessageIDBytes {
		return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "%s.message_id is longer than %d bytes", field, maxMessageIDBytes)
	}
	for i, p := range m.GetParts() {
		if p.GetKind() == nil {
			return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "%s.parts[%d] has no content: set text, data or file", field, i)
		}
		if f := p.GetFile(); f != nil && f.GetSource() == nil {
			return apierr.InvalidArgument(apierr.ReasonInvalidArgument, "%s.parts[%d].file needs bytes or a uri", field, i)
		}
	}
	return nil
}

// userMessage is a copy of a checked caller message as it is logged: role USER and an
// id assigned when it has none.
func userMessage(m *agentplanev1.Message) *agentplanev1.Message {
	out := proto.CloneOf(m)
	out.Role = agentplanev1.MessageRole_MESSAGE_ROLE_USER
	withID(out)
	return out
}

// withID assigns m an id when it has none.
func withID(m *agentplanev1.Message) {
	if m.GetMessageId() == "" {
		m.MessageId = "msg-" + newID()
	}
}

// MessageText is the text parts of m joined by newlines: what a text-only reader (an
// approval request's original_input, a CLI) shows of it.
func MessageText(m *agentplanev1.Message) string {
	var texts []string
	for _, p := range m.GetParts() {
		if t, ok := p.GetKind().(*agentplanev1.Part_Text); ok {
			texts = append(texts, t.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// addUsage adds u to the task's running total, saturating at the int32 maximum.
func addUsage(total **agentplanev1.TokenUsage, u *agentplanev1.TokenUsage) {
	if u == nil {
		return
	}
	if *total == nil {
		*total = &agentplanev1.TokenUsage{}
	}
	t := *total
	t.InputTokens = satAdd(t.InputTokens, u.GetInputTokens())
	t.OutputTokens = satAdd(t.OutputTokens, u.GetOutputTokens())
	t.TotalTokens = satAdd(t.TotalTokens, u.GetTotalTokens())
}

func satAdd(a, b int32) int32 {
	if b < 0 {
		b = 0
	}
	if s := int64(a) + int64(b); s <= math.MaxInt32 {
		return int32(s)
	}
	return math.MaxInt32
}

// eventMessage is the message an event carries, if any.
func eventMessage(ev *agentplanev1.TaskEvent) *agentplanev1.Message {
	switch p := ev.GetPayload().(type) {
	case *agentplanev1.TaskEvent_Message:
		return p.Message
	case *agentplanev1.TaskEvent_Output:
		return p.Output.GetMessage()
	}
	return nil
}
