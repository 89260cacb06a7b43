package client

import (
	"strings"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// TextMessage is a message of one text part from role; the server gives it an id.
func TextMessage(role agentplanev1.MessageRole, text string) *agentplanev1.Message {
	return &agentplanev1.Message{Role: role, Parts: []*agentplanev1.Part{{Kind: &agentplanev1.Part_Text{Text: text}}}}
}

// UserText is the user's message of one text part: what StartTaskRequest.input and
// ContinueTaskRequest.message take for plain text.
func UserText(text string) *agentplanev1.Message {
	return TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_USER, text)
}

// MessageText is the text parts of m joined by newlines (data and file parts are left
// out).
func MessageText(m *agentplanev1.Message) string {
	var texts []string
	for _, p := range m.GetParts() {
		if t, ok := p.GetKind().(*agentplanev1.Part_Text); ok {
			texts = append(texts, t.Text)
		}
	}
	return strings.Join(texts, "\n")
}
