package console

import (
	"bytes"
	"html/template"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// renderEvent renders one timeline line as the task page does.
func renderEvent(t *testing.T, v eventView) string {
	t.Helper()
	tpl := template.Must(template.New("").Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/fragments.html"))
	var b bytes.Buffer
	if err := tpl.ExecuteTemplate(&b, "event", v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestTimelineVerdictAsWritten(t *testing.T) {
	ev := &agentplanev1.TaskEvent{Sequence: 7, Payload: &agentplanev1.TaskEvent_VerdictRecorded{VerdictRecorded: &agentplanev1.VerdictRecorded{
		Verdict: &agentplanev1.Verdict{Node: "critic", Result: &agentplanev1.VerdictResult{
			Verdict: "needs_revision", Confidence: proto.Float64(0.7), Rationale: proto.String("Step 3 <b>skips</b> the Backup"),
			Scores: map[string]*structpb.Value{"style": structpb.NewNumberValue(0.5)}},
			Raised:   []*agentplanev1.Obligation{{Text: "Add a backup step"}},
			Resolved: []*agentplanev1.ObligationResolution{{ObligationId: "ob-1", How: agentplanev1.ResolutionHow_RESOLUTION_HOW_WITHDRAWN, Reason: proto.String("Moot")}},
		}}}}
	v := viewEvent(ev, refusals{})
	if v.Summary != "verdict recorded by critic" || !v.Untrusted {
		t.Errorf("summary %q, untrusted %v", v.Summary, v.Untrusted)
	}
	want := "verdict: needs_revision\nconfidence: 0.7\nrationale: Step 3 <b>skips</b> the Backup\nscore style: 0.5\n" +
		"obligation raised: Add a backup step\nobligation withdrawn: ob-1 (Moot)"
	if v.Detail != want {
		t.Errorf("detail\n%s\nwant\n%s", v.Detail, want)
	}
	html := renderEvent(t, v)
	if !strings.Contains(html, `<pre class="untrusted" aria-label="untrusted content">`) || !strings.Contains(html, "Step 3 &lt;b&gt;skips&lt;/b&gt; the Backup") {
		t.Errorf("rendered:\n%s", html)
	}
}

func TestTimelineRefusedCalls(t *testing.T) {
	call := func(seq int64, id string) *agentplanev1.TaskEvent {
		return &agentplanev1.TaskEvent{Sequence: seq, Payload: &agentplanev1.TaskEvent_ToolCall{ToolCall: &agentplanev1.ToolCall{CallId: id, ToolName: "pay", ArgumentsJson: `{"n":1}`}}}
	}
	result := func(seq int64, id string) *agentplanev1.TaskEvent {
		return &agentplanev1.TaskEvent{Sequence: seq, Payload: &agentplanev1.TaskEvent_ToolResult{ToolResult: &agentplanev1.ToolResult{CallId: id, ToolName: "pay",
			Result: structpb.NewStringValue("refused\n<i>x</i>"), IsError: true}}}
	}
	evs := []*agentplanev1.TaskEvent{
		{Sequence: 1, Payload: &agentplanev1.TaskEvent_InterruptResolved{InterruptResolved: &agentplanev1.InterruptResolved{InterruptId: "i-1",
			Decision: &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_REJECT, CallId: "c1", DecidedBy: "ann",
				Source: agentplanev1.DecisionSource_DECISION_SOURCE_HUMAN, Reason: proto.String("too <b>much</b>")}}}},
		call(2, "c1"), result(3, "c1"),
		{Sequence: 4, Payload: &agentplanev1.TaskEvent_ToolGated{ToolGated: &agentplanev1.ToolGated{CallId: "c2", ToolName: "pay",
			Outcome: agentplanev1.GateOutcome_GATE_OUTCOME_REJECT, Reason: "hitl.disabled"}}},
		call(5, "c2"), result(6, "c2"),
		call(7, "c3"), result(8, "c3"),
	}
	refused := refusals{}
	var got []eventView
	for _, ev := range evs {
		refused.learn(ev)
		got = append(got, viewEvent(ev, refused))
	}
	for i, want := range []struct{ kind, summary string }{
		{"approval", "interrupt resolved: reject by ann"},
		{"refused", "refused: pay (c1) did not run, rejected by ann"},
		{"refused", "the model is told pay (c1) was refused"},
		{"gate", "gate reject pay (hitl.disabled)"},
		{"refused", "refused: pay (c2) did not run, rejected by the gate"},
		{"refused", "the model is told pay (c2) was refused"},
		{"tool-call", "tool call pay (c3)"},
		{"tool-result", "tool result pay (c3), error"},
	} {
		if got[i].Kind != want.kind || got[i].Summary != want.summary {
			t.Errorf("event %d: %s %q, want %s %q", i+1, got[i].Kind, got[i].Summary, want.kind, want.summary)
		}
	}
	if got[1].Detail != "reason: too <b>much</b>\narguments: {\n  \"n\": 1\n}" || got[2].Detail != "refused\n<i>x</i>" {
		t.Errorf("details %q, %q", got[1].Detail, got[2].Detail)
	}
	if html := renderEvent(t, got[1]); !strings.Contains(html, "too &lt;b&gt;much&lt;/b&gt;") || !strings.Contains(html, `class="ev ev-refused"`) {
		t.Errorf("rendered:\n%s", html)
	}
}
