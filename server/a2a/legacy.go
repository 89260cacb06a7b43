package a2a

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
)

// A2A 0.3 shapes, for the 0.3 JSON-RPC method names (message/send, tasks/get, ...):
// a2a-go v0.3.3's types, which carry 0.3's "kind" discriminators and kebab-case
// states. Everything is converted from and to the 1.0 shapes the face works in.

func legacyState(s string) a2a03.TaskState {
	return a2a03.TaskState(strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s, "TASK_STATE_")), "_", "-"))
}

func legacyParts(ps []part) a2a03.ContentParts {
	out := make(a2a03.ContentParts, 0, len(ps))
	for _, p := range ps {
		switch {
		case p.Text != nil:
			out = append(out, a2a03.TextPart{Text: *p.Text, Metadata: p.Metadata})
		case p.Data != nil:
			var v any
			_ = json.Unmarshal(p.Data, &v)
			obj, ok := v.(map[string]any)
			if !ok {
				obj = map[string]any{"value": v}
			}
			out = append(out, a2a03.DataPart{Data: obj, Metadata: p.Metadata})
		case p.URL != "":
			out = append(out, a2a03.FilePart{File: a2a03.FileURI{URI: p.URL, FileMeta: a2a03.FileMeta{MimeType: p.MediaType, Name: p.Filename}}, Metadata: p.Metadata})
		default:
			out = append(out, a2a03.FilePart{File: a2a03.FileBytes{Bytes: base64.StdEncoding.EncodeToString(p.Raw), FileMeta: a2a03.FileMeta{MimeType: p.MediaType, Name: p.Filename}}, Metadata: p.Metadata})
		}
	}
	return out
}

func legacyMessage(m *message) *a2a03.Message {
	if m == nil {
		return nil
	}
	role := a2a03.MessageRoleAgent
	if m.Role == roleUser {
		role = a2a03.MessageRoleUser
	}
	return &a2a03.Message{ID: m.MessageID, ContextID: m.ContextID, TaskID: a2a03.TaskID(m.TaskID), Role: role, Parts: legacyParts(m.Parts), Metadata: m.Metadata}
}

func legacyStatus(s taskStatus) a2a03.TaskStatus {
	st := a2a03.TaskStatus{State: legacyState(s.State), Message: legacyMessage(s.Message)}
	if s.Timestamp != "" {
		if t, err := parseTime(s.Timestamp); err == nil {
			st.Timestamp = &t
		}
	}
	return st
}

func legacyArtifact(a artifact) *a2a03.Artifact {
	return &a2a03.Artifact{ID: a2a03.ArtifactID(a.ArtifactID), Name: a.Name, Description: a.Description, Parts: legacyParts(a.Parts), Metadata: a.Metadata}
}

func legacyTask(t *task) *a2a03.Task {
	out := &a2a03.Task{ID: a2a03.TaskID(t.ID), ContextID: t.ContextID, Status: legacyStatus(t.Status), Metadata: t.Metadata}
	for _, a := range t.Artifacts {
		out.Artifacts = append(out.Artifacts, legacyArtifact(a))
	}
	for i := range t.History {
		out.History = append(out.History, legacyMessage(&t.History[i]))
	}
	return out
}

// legacyEvent is a 0.3 stream result. final marks the status update that ends the
// stream (0.3's TaskStatusUpdateEvent.final).
func legacyEvent(ev *streamResponse) any {
	switch {
	case ev.Task != nil:
		return legacyTask(ev.Task)
	case ev.Message != nil:
		return legacyMessage(ev.Message)
	case ev.StatusUpdate != nil:
		s := ev.StatusUpdate.Status.State
		return &a2a03.TaskStatusUpdateEvent{TaskID: a2a03.TaskID(ev.StatusUpdate.TaskID), ContextID: ev.StatusUpdate.ContextID,
			Status: legacyStatus(ev.StatusUpdate.Status), Final: terminalState(s) || interruptedState(s), Metadata: ev.StatusUpdate.Metadata}
	case ev.ArtifactUpdate != nil:
		u := ev.ArtifactUpdate
		return &a2a03.TaskArtifactUpdateEvent{TaskID: a2a03.TaskID(u.TaskID), ContextID: u.ContextID, Artifact: legacyArtifact(u.Artifact),
			Append: u.Append, LastChunk: u.LastChunk}
	}
	return nil
}

// fromLegacyMessage converts a 0.3 message to the 1.0 shape.
func fromLegacyMessage(m *a2a03.Message) (*message, *rpcError) {
	if m == nil {
		return nil, nil
	}
	out := &message{MessageID: m.ID, ContextID: m.ContextID, TaskID: string(m.TaskID), Metadata: m.Metadata}
	switch m.Role {
	case a2a03.MessageRoleUser:
		out.Role = roleUser
	case a2a03.MessageRoleAgent:
		out.Role = roleAgent
	}
	for _, p := range m.Parts {
		switch p := p.(type) {
		case a2a03.TextPart:
			out.Parts = append(out.Parts, part{Text: strp(p.Text), Metadata: p.Metadata})
		case a2a03.DataPart:
			b, _ := json.Marshal(p.Data)
			out.Parts = append(out.Parts, part{Data: b, Metadata: p.Metadata})
		case a2a03.FilePart:
			switch f := p.File.(type) {
			case a2a03.FileURI:
				out.Parts = append(out.Parts, part{URL: f.URI, MediaType: f.MimeType, Filename: f.Name, Metadata: p.Metadata})
			case a2a03.FileBytes:
				raw, err := base64.StdEncoding.DecodeString(f.Bytes)
				if err != nil {
					return nil, invalidParams("message.parts: file bytes are not base64")
				}
				out.Parts = append(out.Parts, part{Raw: raw, MediaType: f.MimeType, Filename: f.Name, Metadata: p.Metadata})
			}
		}
	}
	return out, nil
}

// fromLegacySend converts 0.3 MessageSendParams. An absent blocking is blocking, as
// 0.3 servers (a2a-go's) take it and 0.3 clients (a2a-go's, the JS SDK's) mean it.
func fromLegacySend(raw json.RawMessage) (*sendRequest, *rpcError) {
	var p a2a03.MessageSendParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, invalidParams("params: " + err.Error())
	}
	m, rerr := fromLegacyMessage(p.Message)
	if rerr != nil {
		return nil, rerr
	}
	req := &sendRequest{Message: m, Metadata: p.Metadata, Configuration: &sendConfig{}}
	if c := p.Config; c != nil {
		req.Configuration.AcceptedOutputModes = c.AcceptedOutputModes
		req.Configuration.ReturnImmediately = c.Blocking != nil && !*c.Blocking
		if c.HistoryLength != nil {
			n := int32(min(max(*c.HistoryLength, -1), 1<<20))
			req.Configuration.HistoryLength = &n
		}
		if c.PushConfig != nil {
			req.Configuration.PushConfig = &pushConfig{URL: c.PushConfig.URL}
		}
	}
	return req, nil
}
