package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

var funcs = template.FuncMap{
	"ts": func(t *timestamppb.Timestamp) string {
		if t == nil || !t.IsValid() || t.AsTime().IsZero() {
			return ""
		}
		return t.AsTime().UTC().Format(time.RFC3339)
	},
	"short": func(t *timestamppb.Timestamp) string {
		if t == nil || !t.IsValid() || t.AsTime().IsZero() {
			return ""
		}
		return t.AsTime().UTC().Format("2006-01-02 15:04:05Z")
	},
	"age": func(t *timestamppb.Timestamp, now time.Time) string {
		if t == nil {
			return ""
		}
		return now.Sub(t.AsTime()).Round(time.Second).String()
	},
	"state":    stateName,
	"terminal": terminal,
	"path":     url.PathEscape,
	"join":     strings.Join,
	"decision": decisionText,
	"has": func(roles []string, role string) bool {
		for _, r := range roles {
			if r == role {
				return true
			}
		}
		return false
	},
	"labels": func(m map[string]string) []string {
		out := make([]string, 0, len(m))
		for k, v := range m {
			out = append(out, k+"="+v)
		}
		sort.Strings(out)
		return out
	},
	"pretty": prettyJSON,
}

func stateName(s agentplanev1.TaskState) string {
	return strings.TrimPrefix(s.String(), "TASK_STATE_")
}

func terminal(s agentplanev1.TaskState) bool {
	switch s {
	case agentplanev1.TaskState_TASK_STATE_COMPLETED, agentplanev1.TaskState_TASK_STATE_FAILED, agentplanev1.TaskState_TASK_STATE_CANCELED:
		return true
	}
	return false
}

func parseInt(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }

func decisionText(d *agentplanev1.Decision) string {
	if d == nil {
		return ""
	}
	out := strings.ToLower(strings.TrimPrefix(d.GetType().String(), "DECISION_TYPE_"))
	out += " by " + d.GetDecidedBy()
	if src := d.GetSource(); src != agentplanev1.DecisionSource_DECISION_SOURCE_HUMAN {
		out += " (" + strings.ToLower(strings.TrimPrefix(src.String(), "DECISION_SOURCE_")) + ")"
	}
	return out
}

// prettyJSON indents JSON text; text that is not JSON is returned as it is.
func prettyJSON(text string) string {
	var buf bytes.Buffer
	if json.Indent(&buf, []byte(text), "", "  ") != nil {
		return text
	}
	return buf.String()
}

// argsView lays a call's arguments out: one row per top-level key when they are a
// JSON object, and the exact text.
type argsView struct {
	Valid bool
	Rows  []argRow
	Text  string
}

type argRow struct{ Key, Value string }

func viewArgs(text string) argsView {
	v := argsView{Text: prettyJSON(text)}
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(text), &m) != nil {
		return v
	}
	v.Valid = true
	for k, raw := range m {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			s = prettyJSON(string(raw))
		}
		v.Rows = append(v.Rows, argRow{k, s})
	}
	sort.Slice(v.Rows, func(i, j int) bool { return v.Rows[i].Key < v.Rows[j].Key })
	return v
}

// toolSchema finds the parameter schema of tool in the agent that runs node, in the
// task's submitted spec (an inline agent, or an agent of an inline graph). Tools the
// spec does not declare have none: the edit form is then a JSON text box.
func toolSchema(t *agentplanev1.Task, node, tool string) *structpb.Struct {
	find := func(a *agentplanev1.AgentSpec) *structpb.Struct {
		for _, f := range a.GetTools() {
			if f.GetFunction().GetName() == tool {
				return f.GetFunction().GetParameters()
			}
		}
		return nil
	}
	if a := t.GetAgent(); a != nil {
		return find(a)
	}
	var inGraph func(g *agentplanev1.GraphSpec, depth int) *structpb.Struct
	inGraph = func(g *agentplanev1.GraphSpec, depth int) *structpb.Struct {
		if g == nil || depth > 16 {
			return nil
		}
		if n, ok := g.GetAgents()[node]; ok && n.GetSpec().GetAgent() != nil {
			return find(n.GetSpec().GetAgent())
		}
		for _, n := range g.GetAgents() {
			if s := inGraph(n.GetSpec().GetGraph(), depth+1); s != nil {
				return s
			}
		}
		return nil
	}
	return inGraph(t.GetGraph(), 0)
}

// editForm is the edit decision's form, one input per property of the tool's
// parameter schema; without a usable schema, one JSON text box.
type editForm struct {
	Fields  []*formField
	Raw     bool
	RawText string
	Errors  []string
	base    map[string]any
}

type formField struct {
	Name, Label, Input, Value, Description string
	Checked, Required                      bool
	Enum                                   []string
	Min, Max, Step                         string
	Errors                                 []string
	kind                                   string
}

// ID is the field's element id.
func (f *formField) ID() string { return "arg-" + f.Name }

func newEditForm(schema *structpb.Struct, argsJSON string) *editForm {
	form := &editForm{}
	var base map[string]any
	props := schema.GetFields()["properties"].GetStructValue().GetFields()
	if json.Unmarshal([]byte(argsJSON), &base) != nil || len(props) == 0 {
		form.Raw, form.RawText = true, prettyJSON(argsJSON)
		return form
	}
	form.base = base
	required := map[string]bool{}
	for _, v := range schema.GetFields()["required"].GetListValue().GetValues() {
		required[v.GetStringValue()] = true
	}
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := props[n].GetStructValue().GetFields()
		f := &formField{Name: n, Label: n, Required: required[n], Description: p["description"].GetStringValue(), kind: schemaType(p["type"])}
		if t := p["title"].GetStringValue(); t != "" {
			f.Label = t
		}
		cur, present := base[n]
		switch {
		case len(p["enum"].GetListValue().GetValues()) > 0:
			f.Input = "select"
			for _, e := range p["enum"].GetListValue().GetValues() {
				f.Enum = append(f.Enum, scalarText(e.AsInterface()))
			}
		case f.kind == "boolean":
			f.Input = "checkbox"
			f.Checked, _ = cur.(bool)
		case f.kind == "integer" || f.kind == "number":
			f.Input, f.Step = "number", "any"
			if f.kind == "integer" {
				f.Step = "1"
			}
			if v, ok := p["minimum"]; ok {
				f.Min = scalarText(v.AsInterface())
			}
			if v, ok := p["maximum"]; ok {
				f.Max = scalarText(v.AsInterface())
			}
		case f.kind == "string":
			f.Input = "text"
		default:
			f.Input = "json"
		}
		if present && f.Input != "checkbox" {
			if f.Input == "json" {
				b, _ := json.MarshalIndent(cur, "", "  ")
				f.Value = string(b)
			} else {
				f.Value = scalarText(cur)
			}
		}
		form.Fields = append(form.Fields, f)
	}
	return form
}

func schemaType(v *structpb.Value) string {
	if s := v.GetStringValue(); s != "" {
		return s
	}
	for _, t := range v.GetListValue().GetValues() {
		if t.GetStringValue() != "null" {
			return t.GetStringValue()
		}
	}
	return ""
}

func scalarText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// fill reads the posted form into the arguments' JSON text, keeping what was typed
// for a re-render. Values are typed by the schema where they parse; where they do
// not, they are sent as typed and the server's schema check names the field.
func (f *editForm) fill(form url.Values) string {
	if f.Raw {
		f.RawText = form.Get("arguments_json")
		return f.RawText
	}
	args := map[string]any{}
	for k, v := range f.base {
		args[k] = v
	}
	for _, fd := range f.Fields {
		key := "arg:" + fd.Name
		if fd.Input == "checkbox" {
			fd.Checked = form.Get(key) != ""
			args[fd.Name] = fd.Checked
			continue
		}
		fd.Value = form.Get(key)
		v := strings.TrimSpace(fd.Value)
		if v == "" && fd.kind != "string" {
			delete(args, fd.Name)
			continue
		}
		switch {
		case fd.kind == "string":
			args[fd.Name] = fd.Value
		case json.Valid([]byte(v)):
			args[fd.Name] = json.RawMessage(v)
		default:
			args[fd.Name] = fd.Value
		}
	}
	b, err := json.Marshal(args)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// attach places one of the server's violations ("/pointer: message") beside the
// field it names; one about the whole object names a field by 'name' when it can.
func (f *editForm) attach(desc string) {
	ptr, msg, ok := strings.Cut(desc, ": ")
	if f.Raw || !ok || !strings.HasPrefix(ptr, "/") {
		f.Errors = append(f.Errors, desc)
		return
	}
	seg := strings.SplitN(strings.TrimPrefix(ptr, "/"), "/", 2)[0]
	seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
	for _, fd := range f.Fields {
		if seg != "" && fd.Name == seg {
			fd.Errors = append(fd.Errors, msg)
			return
		}
	}
	if seg == "" {
		for _, fd := range f.Fields {
			if strings.Contains(msg, "'"+fd.Name+"'") || strings.Contains(msg, `"`+fd.Name+`"`) {
				fd.Errors = append(fd.Errors, msg)
				return
			}
		}
	}
	f.Errors = append(f.Errors, desc)
}

// eventView is one line of a task's timeline.
type eventView struct {
	Seq       int64
	Time      string
	Kind      string
	Summary   string
	Detail    string
	Untrusted bool
	Link      string
}

func viewEvent(ev *agentplanev1.TaskEvent) eventView {
	v := eventView{Seq: ev.GetSequence()}
	if t := ev.GetTime(); t != nil {
		v.Time = t.AsTime().UTC().Format(time.RFC3339)
	}
	switch p := ev.GetPayload().(type) {
	case *agentplanev1.TaskEvent_Submitted:
		v.Kind, v.Summary = "submitted", "task submitted ("+p.Submitted.GetKind()+")"
	case *agentplanev1.TaskEvent_StateChanged:
		v.Kind = "state"
		v.Summary = "state " + stateName(p.StateChanged.GetFromState()) + " → " + stateName(p.StateChanged.GetToState())
		if r := p.StateChanged.GetReason(); r != "" {
			v.Summary += ": " + r
		}
		if p.StateChanged.GetToState() == agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED {
			v.Kind = "pause"
		}
	case *agentplanev1.TaskEvent_Message:
		m := p.Message
		v.Kind = "message"
		v.Summary = strings.ToLower(strings.TrimPrefix(m.GetRole().String(), "MESSAGE_ROLE_")) + " message"
		if m.GetNode() != "" {
			v.Summary += " from " + m.GetNode()
		}
		v.Detail, v.Untrusted = messageText(m), true
	case *agentplanev1.TaskEvent_ToolCall:
		v.Kind, v.Summary = "tool-call", "tool call "+p.ToolCall.GetToolName()+" ("+p.ToolCall.GetCallId()+")"
		v.Detail, v.Untrusted = prettyJSON(p.ToolCall.GetArgumentsJson()), true
	case *agentplanev1.TaskEvent_ToolResult:
		v.Kind, v.Summary = "tool-result", "tool result "+p.ToolResult.GetToolName()+" ("+p.ToolResult.GetCallId()+")"
		if p.ToolResult.GetIsError() {
			v.Summary += ", error"
		}
		b, _ := protojson.Marshal(p.ToolResult.GetResult())
		v.Detail, v.Untrusted = prettyJSON(string(b)), true
	case *agentplanev1.TaskEvent_ToolGated:
		g := p.ToolGated
		v.Kind = "gate"
		v.Summary = "gate " + strings.ToLower(strings.TrimPrefix(g.GetOutcome().String(), "GATE_OUTCOME_")) + " " + g.GetToolName()
		if g.GetReason() != "" {
			v.Summary += " (" + g.GetReason() + ")"
		}
		if id := g.GetInterruptId(); id != "" {
			v.Link = "/ui/interrupts/" + url.PathEscape(id)
		}
	case *agentplanev1.TaskEvent_InterruptRaised:
		in := p.InterruptRaised.GetInterrupt()
		v.Kind = "approval"
		v.Summary = "interrupt raised: " + strings.ToLower(strings.TrimPrefix(in.GetKind().String(), "INTERRUPT_KIND_"))
		if a := in.GetApproval(); a != nil {
			v.Summary += " for " + a.GetToolName()
		}
		if in.GetKind() == agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE {
			v.Kind = "pause"
		}
		v.Link = "/ui/interrupts/" + url.PathEscape(in.GetInterruptId())
	case *agentplanev1.TaskEvent_InterruptResolved:
		d := p.InterruptResolved.GetDecision()
		v.Kind, v.Summary = "approval", "interrupt resolved: "+decisionText(d)
		if d.GetReason() != "" {
			v.Detail, v.Untrusted = "reason: "+d.GetReason(), true
		}
		if d.GetType() == agentplanev1.DecisionType_DECISION_TYPE_EDIT {
			v.Detail = strings.TrimPrefix(v.Detail+"\nedited arguments: "+d.GetArgumentsJson(), "\n")
			v.Untrusted = true
		}
		v.Link = "/ui/interrupts/" + url.PathEscape(p.InterruptResolved.GetInterruptId())
	case *agentplanev1.TaskEvent_VerdictRecorded:
		vd := p.VerdictRecorded.GetVerdict()
		v.Kind = "verdict"
		v.Summary = fmt.Sprintf("verdict %s by %s", strings.ToLower(strings.TrimPrefix(vd.GetResult().String(), "VERDICT_RESULT_")), vd.GetNode())
		var lines []string
		for _, o := range vd.GetRaised() {
			lines = append(lines, "obligation raised: "+o.GetText())
		}
		for _, o := range vd.GetResolved() {
			lines = append(lines, "obligation "+strings.ToLower(strings.TrimPrefix(o.GetHow().String(), "RESOLUTION_HOW_"))+": "+o.GetObligationId())
		}
		v.Detail, v.Untrusted = strings.Join(lines, "\n"), true
	case *agentplanev1.TaskEvent_Output:
		v.Kind, v.Summary = "output", "output"
		v.Detail, v.Untrusted = messageText(p.Output.GetMessage()), true
		if p.Output.GetStructured() != nil {
			b, _ := protojson.Marshal(p.Output.GetStructured())
			v.Detail = strings.TrimPrefix(v.Detail+"\n"+prettyJSON(string(b)), "\n")
		}
	case *agentplanev1.TaskEvent_Note:
		v.Kind, v.Summary, v.Detail, v.Untrusted = "note", "runtime note", p.Note.GetText(), true
	case *agentplanev1.TaskEvent_Lease:
		v.Kind, v.Summary = "lease", "lease "+strings.ToLower(strings.TrimPrefix(p.Lease.GetKind().String(), "LEASE_CHANGE_KIND_"))
		if id := p.Lease.GetRuntimeId(); id != "" {
			v.Summary += " (" + id + ")"
		}
	case *agentplanev1.TaskEvent_CancelRequested:
		v.Kind, v.Summary = "cancel", "cancel requested by "+p.CancelRequested.GetRequestedBy()
		v.Detail, v.Untrusted = p.CancelRequested.GetReason(), true
	default:
		v.Kind = "event"
		c := proto.Clone(ev).(*agentplanev1.TaskEvent)
		c.TaskId, c.Sequence, c.Time = "", 0, nil
		b, _ := protojson.Marshal(c)
		v.Summary, v.Detail = "event", prettyJSON(string(b))
	}
	return v
}

// messageText is a message's parts as text: text as it is, data as JSON, files by name.
func messageText(m *agentplanev1.Message) string {
	var parts []string
	for _, part := range m.GetParts() {
		switch k := part.GetKind().(type) {
		case *agentplanev1.Part_Text:
			parts = append(parts, k.Text)
		case *agentplanev1.Part_Data:
			b, _ := protojson.Marshal(k.Data.GetData())
			parts = append(parts, prettyJSON(string(b)))
		case *agentplanev1.Part_File:
			parts = append(parts, "[file "+k.File.GetName()+"]")
		}
	}
	return strings.Join(parts, "\n")
}
