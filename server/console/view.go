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
	"unicode/utf8"

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
	"decider":  decider,
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
	"agent":  agentName,
	"input": func(t *agentplanev1.Task) string {
		return preview(strings.Join(strings.Fields(messageText(t.GetInput())), " "), 80)
	},
	"message": messageText,
	"argsPreview": func(in *agentplanev1.Interrupt) string {
		return preview(compactText(in.GetApproval().GetArgumentsJson()), 80)
	},
}

// agentName names what a task runs: its inline agent's or graph's name, or the
// static agent's id.
func agentName(t *agentplanev1.Task) string {
	switch {
	case t.GetAgent() != nil:
		return t.GetAgent().GetName()
	case t.GetGraph() != nil:
		return t.GetGraph().GetName()
	}
	return t.GetAgentId()
}

// preview shortens s to n runes, marking the cut.
func preview(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
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
	return strings.ToLower(strings.TrimPrefix(d.GetType().String(), "DECISION_TYPE_")) + " by " + decider(d)
}

// decider is who decided, and how when it was not a person ("system (deadline)").
func decider(d *agentplanev1.Decision) string {
	out := d.GetDecidedBy()
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

// argsView lays a call's arguments out: one row per top-level member, in the order
// written, when they are a JSON object, and the exact text the runtime sent.
type argsView struct {
	Valid bool
	Rows  []argRow
	Text  string
}

type argRow struct {
	Key, Value string
	raw        string
}

func viewArgs(text string) argsView {
	v := argsView{Text: text}
	o, ok := parseObject(text)
	if !ok {
		return v
	}
	v.Valid = true
	for _, m := range o.members {
		v.Rows = append(v.Rows, argRow{Key: m.Key, Value: valueText(o.raw(m)), raw: o.raw(m)})
	}
	return v
}

// valueText is a value for reading: a string as it is, anything else as indented JSON.
func valueText(raw string) string {
	if s, ok := decodedString(raw); ok {
		return s
	}
	return prettyJSON(raw)
}

// argChange is one argument of an edited call beside the model's.
type argChange struct {
	Key, Before, After string
	Had, Has, Changed  bool
}

// diffArgs sets the arguments a call ran with beside the ones the model wrote, by
// top-level member, in the model's order then the added ones; ok is false when either
// is not a JSON object.
func diffArgs(before, after string) (rows []argChange, ok bool) {
	a, b := viewArgs(before), viewArgs(after)
	if !a.Valid || !b.Valid {
		return nil, false
	}
	byKey := map[string]argRow{}
	for _, r := range b.Rows {
		byKey[r.Key] = r
	}
	seen := map[string]bool{}
	for _, r := range a.Rows {
		n, has := byKey[r.Key]
		seen[r.Key] = true
		rows = append(rows, argChange{Key: r.Key, Before: r.Value, After: n.Value, Had: true, Has: has, Changed: !has || n.raw != r.raw})
	}
	for _, r := range b.Rows {
		if !seen[r.Key] {
			rows = append(rows, argChange{Key: r.Key, After: r.Value, Has: true, Changed: true})
		}
	}
	return rows, true
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

// editForm is the edit decision's form, one control per property of the tool's
// parameter schema; without a usable schema (or for arguments that are not one JSON
// object with distinct keys), one JSON text box. What the approver leaves as it was
// shown is sent exactly as the model wrote it (see args.go).
type editForm struct {
	Fields  []*formField
	Raw     bool
	RawText string
	Errors  []string
	orig    string
	obj     objectText
}

type formField struct {
	Name, Label, Input, Value, Description string
	Checked, Required                      bool
	Options                                []option
	Min, Max, Step                         string
	Errors                                 []string
	kind                                   string
	present                                bool   // the call has this argument
	raw                                    string // its value text, as written
	shown                                  string // what the control showed (Value, or "true"/"" for a checkbox)
	crlf                                   bool   // the original string's line breaks are CRLF
}

// option is one choice of a select: Value is the choice's JSON text.
type option struct {
	Value, Text string
	Selected    bool
}

// ID is the field's element id.
func (f *formField) ID() string { return "arg-" + f.Name }

func newEditForm(schema *structpb.Struct, argsJSON string) *editForm {
	form := &editForm{orig: argsJSON}
	props := schema.GetFields()["properties"].GetStructValue().GetFields()
	obj, ok := parseObject(argsJSON)
	if !ok || obj.dup || len(props) == 0 {
		form.Raw, form.RawText = true, prettyJSON(argsJSON)
		return form
	}
	form.obj = obj
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
		if m, ok := obj.lookup(n); ok {
			f.present, f.raw = true, obj.raw(m)
		}
		switch {
		case len(p["enum"].GetListValue().GetValues()) > 0:
			f.Input = "select"
			cur := ""
			if f.present {
				cur = compactText(f.raw)
			}
			found := false
			for _, e := range p["enum"].GetListValue().GetValues() {
				o := option{Value: jsonText(e.AsInterface()), Text: scalarText(e.AsInterface())}
				o.Selected = f.present && o.Value == cur
				found = found || o.Selected
				f.Options = append(f.Options, o)
			}
			if f.present && !found { // what the model chose, though the schema does not list it
				f.Options = append([]option{{Value: cur, Text: cur + " (as called; not one of the choices)", Selected: true}}, f.Options...)
			}
			f.Value = cur
		case f.kind == "boolean":
			f.Input = "checkbox"
			f.Checked = f.raw == "true"
			if f.Checked {
				f.Value = "true"
			}
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
			if f.raw != "null" {
				f.Value = f.raw // the number's text as written, digits beyond float64 and all
			}
		case f.kind == "string":
			f.Input = "text"
			if s, ok := decodedString(f.raw); ok {
				f.Value, f.crlf = s, strings.Contains(s, "\r\n")
			} else if f.raw != "null" {
				f.Value = f.raw
			}
			if longText(f.Value) {
				f.Input = "textarea"
			}
		default:
			f.Input = "json"
			if f.present {
				f.Value = prettyJSON(f.raw)
			}
		}
		f.shown = f.Value
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
		return jsonText(v)
	}
}

// compactText is JSON text without insignificant whitespace (escapes and number texts
// as written); text that is not JSON is returned as it is.
func compactText(text string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(text)) != nil {
		return text
	}
	return b.String()
}

// fill reads the posted form into the arguments' JSON text, keeping what was posted
// for a re-render. A field whose control comes back as it was shown is not an edit:
// its value stays the model's text, byte for byte. An edited value is typed by the
// schema where it parses; where it does not, it is sent as a string and the server's
// schema check names the field.
func (f *editForm) fill(form url.Values) string {
	if f.Raw {
		f.RawText = form.Get("arguments_json")
		if formText(f.RawText) == formText(prettyJSON(f.orig)) {
			return f.orig // not edited: the call's own text
		}
		return f.RawText
	}
	changes := map[string]change{}
	var added []string
	for _, fd := range f.Fields {
		key := "arg:" + fd.Name
		if fd.Input == "checkbox" {
			fd.Checked = form.Get(key) != ""
			fd.Value = ""
			if fd.Checked {
				fd.Value = "true"
			}
		} else {
			fd.Value = form.Get(key)
		}
		if formText(fd.Value) == formText(fd.shown) {
			continue // as it was: the model's text stays
		}
		c := fd.edited()
		if c.remove && !fd.present {
			continue
		}
		changes[fd.Name] = c
		if !fd.present {
			added = append(added, fd.Name)
		}
	}
	return f.obj.splice(changes, added)
}

// edited is the change an edited control asks for.
func (fd *formField) edited() change {
	v := strings.TrimSpace(fd.Value)
	switch {
	case fd.Input == "checkbox":
		return change{value: strconv.FormatBool(fd.Checked)}
	case fd.kind == "string" && fd.Input != "select":
		s := formText(fd.Value)
		if fd.crlf {
			s = strings.ReplaceAll(s, "\n", "\r\n")
		}
		return change{value: jsonText(s)}
	case v == "":
		return change{remove: true}
	case json.Valid([]byte(v)):
		return change{value: compactText(v)}
	default:
		return change{value: jsonText(fd.Value)}
	}
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

// refusals are the calls of a task that were refused (rejected by a person or a
// deadline, or by the gate itself) and why, by call id, learnt from the events that
// come before the call's report. A runtime reports a refused call and the refusal it
// gave the model as a tool call and its (error) result; the timeline must not read as
// if it ran.
type refusals map[string]refusal

type refusal struct{ By, Reason string }

func (r refusals) learn(ev *agentplanev1.TaskEvent) {
	switch p := ev.GetPayload().(type) {
	case *agentplanev1.TaskEvent_ToolGated:
		if g := p.ToolGated; g.GetOutcome() == agentplanev1.GateOutcome_GATE_OUTCOME_REJECT {
			r[g.GetCallId()] = refusal{By: "the gate", Reason: g.GetReason()}
		}
	case *agentplanev1.TaskEvent_InterruptResolved:
		r.decided(p.InterruptResolved.GetDecision())
	}
}

// decided learns a decision (from an event, or from the interrupt it resolved).
func (r refusals) decided(d *agentplanev1.Decision) {
	if d.GetType() == agentplanev1.DecisionType_DECISION_TYPE_REJECT && d.GetCallId() != "" {
		r[d.GetCallId()] = refusal{By: decider(d), Reason: d.GetReason()}
	}
}

func viewEvent(ev *agentplanev1.TaskEvent, refused refusals) eventView {
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
		c := p.ToolCall
		v.Kind, v.Summary = "tool-call", "tool call "+c.GetToolName()+" ("+c.GetCallId()+")"
		v.Detail, v.Untrusted = prettyJSON(c.GetArgumentsJson()), true
		if why, ok := refused[c.GetCallId()]; ok {
			v.Kind, v.Summary = "refused", "refused: "+c.GetToolName()+" ("+c.GetCallId()+") did not run, rejected by "+why.By
			v.Detail = "arguments: " + v.Detail
			if why.Reason != "" {
				v.Detail = "reason: " + why.Reason + "\n" + v.Detail
			}
		}
	case *agentplanev1.TaskEvent_ToolResult:
		v.Kind, v.Summary = "tool-result", "tool result "+p.ToolResult.GetToolName()+" ("+p.ToolResult.GetCallId()+")"
		if p.ToolResult.GetIsError() {
			v.Summary += ", error"
		}
		if _, ok := refused[p.ToolResult.GetCallId()]; ok {
			v.Kind, v.Summary = "refused", "the model is told "+p.ToolResult.GetToolName()+" ("+p.ToolResult.GetCallId()+") was refused"
		}
		b, _ := protojson.Marshal(p.ToolResult.GetResult())
		v.Detail, v.Untrusted = prettyJSON(string(b)), true
		if sv, ok := p.ToolResult.GetResult().GetKind().(*structpb.Value_StringValue); ok {
			v.Detail = sv.StringValue // text as the tool (or the runtime's refusal) wrote it
		}
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
		// Every field as the evaluator (a model) wrote it, in the untrusted block.
		vd := p.VerdictRecorded.GetVerdict()
		res := vd.GetResult()
		v.Kind, v.Summary = "verdict", "verdict recorded by "+vd.GetNode()
		if vd.GetApproved() {
			v.Summary += " (approved)"
		}
		lines := []string{"verdict: " + res.GetVerdict()}
		if res.Confidence != nil {
			lines = append(lines, "confidence: "+strconv.FormatFloat(res.GetConfidence(), 'f', -1, 64))
		}
		if res.Rationale != nil {
			lines = append(lines, "rationale: "+res.GetRationale())
		}
		keys := make([]string, 0, len(res.GetScores()))
		for k := range res.GetScores() {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			lines = append(lines, "score "+k+": "+jsonText(res.GetScores()[k].AsInterface()))
		}
		for _, o := range vd.GetRaised() {
			lines = append(lines, "obligation raised: "+o.GetText())
		}
		for _, o := range vd.GetResolved() {
			l := "obligation " + strings.ToLower(strings.TrimPrefix(o.GetHow().String(), "RESOLUTION_HOW_")) + ": " + o.GetObligationId()
			if o.GetReason() != "" {
				l += " (" + o.GetReason() + ")"
			}
			lines = append(lines, l)
		}
		for _, id := range vd.GetDroppedObligationIds() {
			lines = append(lines, "obligation dropped (not open): "+id)
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
	case *agentplanev1.TaskEvent_BudgetWarning:
		b := p.BudgetWarning.GetBudget()
		v.Kind, v.Summary = "budget", fmt.Sprintf("budget %s reached %d%% this %s", b.GetBudget(), b.GetWarnPercent(), b.GetPeriod())
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
