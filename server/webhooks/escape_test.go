package webhooks_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/storetest"
	"github.com/agentplane/agentplane/server/webhooks"
	"github.com/agentplane/agentplane/server/webhooks/webhookstest"
)

// hostileSequences are what Slack's mrkdwn turns into mentions, links and formatting,
// and what a value could use to break out of its quoting or mislead a reader.
var hostileSequences = []string{
	"<!channel>",
	"<!here>",
	"<!everyone>",
	"<@U123>",
	"<#C123>",
	"<!subteam^S123>",
	"<https://x|y>",
	"<!channel> <https://evil.example/approve|Click to approve>",
	"&",
	"<",
	">",
	"&lt;!channel&gt;", // already escaped: must not decode into a live sequence
	"*bold* _italic_ ~strike~ `code` ```block```",
	"line one\n> quoted <!here>\r\nline three",
	"\u202eevorppa\u202c zero\u200bwidth",
	"https://evil.example/approve", // a bare URL Slack would link and unfurl
}

// notified is a field a caller, a model, a runtime or a reviewer fills, and where it
// lands: set puts v into the records of one case; standard reads it back from the
// standard message (nil: the field is not sent); inSlack says whether Slack's text
// shows it.
type notified struct {
	name     string
	set      func(task *storagev1.TaskRecord, in *storagev1.InterruptRecord, v string)
	standard func(webhooks.Data) (string, bool)
	inSlack  bool
}

var notifiedFields = []notified{
	{"agent name", func(_ *storagev1.TaskRecord, in *storagev1.InterruptRecord, v string) {
		in.Interrupt.GetApproval().Context.AgentName = v
	}, func(d webhooks.Data) (string, bool) { return d.Agent, d.InterruptID != "" }, true},
	{"tool name", func(_ *storagev1.TaskRecord, in *storagev1.InterruptRecord, v string) {
		in.Interrupt.GetApproval().ToolName = v
	}, func(d webhooks.Data) (string, bool) { return d.Tool, d.InterruptID != "" }, true},
	{"tool description", func(_ *storagev1.TaskRecord, in *storagev1.InterruptRecord, v string) {
		in.Interrupt.GetApproval().ToolDescription = &v
	}, func(d webhooks.Data) (string, bool) { return d.Description, d.InterruptID != "" }, false},
	{"node", func(_ *storagev1.TaskRecord, in *storagev1.InterruptRecord, v string) {
		in.Interrupt.Node = v
	}, func(d webhooks.Data) (string, bool) { return d.Node, d.InterruptID != "" }, false},
	{"policy tag", func(_ *storagev1.TaskRecord, in *storagev1.InterruptRecord, v string) {
		in.Interrupt.GetApproval().Context.Tags = []string{v}
	}, func(d webhooks.Data) (string, bool) { return strings.Join(d.Tags, ""), d.InterruptID != "" }, false},
	{"decided by", func(_ *storagev1.TaskRecord, in *storagev1.InterruptRecord, v string) {
		in.Interrupt.Decision.DecidedBy = v
	}, func(d webhooks.Data) (string, bool) { return decision(d).DecidedBy, d.Decision != nil }, true},
	{"reject reason", func(_ *storagev1.TaskRecord, in *storagev1.InterruptRecord, v string) {
		in.Interrupt.Decision.Reason = &v
	}, func(d webhooks.Data) (string, bool) { return decision(d).Reason, d.Decision != nil }, true},
	{"label value", func(task *storagev1.TaskRecord, _ *storagev1.InterruptRecord, v string) {
		task.Labels = map[string]string{"team": v}
	}, func(d webhooks.Data) (string, bool) { return d.Labels["team"], d.State != "" }, false},
	{"failure message", func(task *storagev1.TaskRecord, _ *storagev1.InterruptRecord, v string) {
		task.Failure.Message = v
	}, func(d webhooks.Data) (string, bool) { return failure(d).Message, d.Failure != nil }, true},
	{"failure reason", func(task *storagev1.TaskRecord, _ *storagev1.InterruptRecord, v string) {
		task.Failure.Reason = v
	}, func(d webhooks.Data) (string, bool) { return failure(d).Reason, d.Failure != nil }, false},
	// Never sent: read from the API behind its authorization.
	{"tool arguments", func(_ *storagev1.TaskRecord, in *storagev1.InterruptRecord, v string) {
		in.Interrupt.GetApproval().ArgumentsJson = v
	}, nil, false},
	{"task input", func(_ *storagev1.TaskRecord, in *storagev1.InterruptRecord, v string) {
		in.Interrupt.GetApproval().Context.OriginalInput = &v
	}, nil, false},
}

func decision(d webhooks.Data) webhooks.Decision {
	if d.Decision == nil {
		return webhooks.Decision{}
	}
	return *d.Decision
}

func failure(d webhooks.Data) webhooks.Failure {
	if d.Failure == nil {
		return webhooks.Failure{}
	}
	return *d.Failure
}

// slackMessage is a Slack incoming-webhook body, read strictly.
type slackMessage struct {
	Text   string `json:"text"`
	Blocks []struct {
		Type string `json:"type"`
		Text struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Verbatim bool   `json:"verbatim"`
		} `json:"text"`
	} `json:"blocks"`
	UnfurlLinks *bool `json:"unfurl_links"`
	UnfurlMedia *bool `json:"unfurl_media"`
}

func decodeSlack(t *testing.T, body []byte) slackMessage {
	t.Helper()
	var m slackMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("slack body %s: %v", body, err)
	}
	if len(m.Blocks) != 1 || m.Blocks[0].Type != "section" || m.Blocks[0].Text.Type != "mrkdwn" {
		t.Fatalf("slack body %s: want one mrkdwn section", body)
	}
	return m
}

var (
	consoleLink = regexp.MustCompile(`\n<https://console\.example\.com/ui/(interrupts|tasks)/([a-z0-9]+)\|Open in the console>$`)
	// entity is what a & may begin in Slack text: one of the three escapes.
	entity = regexp.MustCompile(`&(amp|lt|gt);`)
)

// liveMarkup says what in a piece of Slack text (text, or the section without our
// console link) Slack would act on: any < or > (every control sequence is <...>), a &
// that is not one of the three escapes, a line break, a format character, or a
// formatting character outside a code span. "" when there is none.
func liveMarkup(s string) string {
	if strings.ContainsAny(s, "<>") {
		return "a < or > (a control sequence)"
	}
	if strings.Count(s, "&") != len(entity.FindAllString(s, -1)) {
		return "a & that is not &amp;, &lt; or &gt;"
	}
	if strings.ContainsAny(s, "\r\n\u202e\u202c\u200b") {
		return "a line break or format character"
	}
	parts := strings.Split(s, "`")
	if len(parts)%2 == 0 {
		return "an unbalanced backtick"
	}
	for i := 0; i < len(parts); i += 2 { // outside code spans
		if strings.ContainsAny(parts[i], "*_~") {
			return fmt.Sprintf("formatting outside a code span in %q", parts[i])
		}
		if strings.Contains(parts[i], "://") {
			return fmt.Sprintf("a bare URL outside a code span in %q", parts[i])
		}
	}
	return ""
}

// TestNotificationsCarryNoMarkup sets each field a caller, a model, a runtime or a
// reviewer fills to each hostile sequence, raises, rejects and ends the task, and
// reads every notification both formats sent: the standard JSON carries the value
// exactly, with none of <, > and & in its bytes; Slack's top-level text and section
// contain no live sequence, the value shows escaped in a code span, and Slack is
// told not to unfurl.
func TestNotificationsCarryNoMarkup(t *testing.T) {
	secret := secretOf(9)
	std, slack := webhookstest.New(t, secret), webhookstest.New(t, "")
	f := start(t, fastConfig(
		config.Webhook{Name: "std", URL: std.URL, Secret: secret, Events: config.WebhookEvents},
		config.Webhook{Name: "slack", URL: slack.URL, Format: config.FormatSlack, Events: config.WebhookEvents},
	))
	type kase struct {
		field notified
		value string
	}
	var cases []kase
	for _, fl := range notifiedFields {
		for _, seq := range hostileSequences {
			cases = append(cases, kase{fl, seq})
		}
	}
	tasks := make([]*storagev1.TaskRecord, len(cases))
	ins := make([]*storagev1.InterruptRecord, len(cases))
	decisions := make([]*agentplanev1.Decision, len(cases))
	failures := make([]*agentplanev1.TaskFailure, len(cases))
	for i, c := range cases {
		taskID, inID := fmt.Sprintf("c%d", i), fmt.Sprintf("i%d", i)
		tasks[i] = storetest.Task("default", taskID, time.Now())
		ins[i] = storetest.Interrupt("default", taskID, inID, time.Now())
		ins[i].Interrupt.Request = &agentplanev1.Interrupt_Approval{Approval: &agentplanev1.ApprovalRequest{
			InterruptId: inID, ToolName: "refund", ArgumentsJson: `{"n": 1}`, Context: &agentplanev1.ApprovalContext{AgentName: "billing"},
		}}
		decisions[i] = &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_REJECT,
			Source: agentplanev1.DecisionSource_DECISION_SOURCE_HUMAN, DecidedBy: "alice", Reason: new("no")}
		failures[i] = &agentplanev1.TaskFailure{Reason: "model.error", Message: "it failed"}
		// The decision and the failure exist when set runs so that it can fill them;
		// they are written only with the change they belong to.
		ins[i].Interrupt.Decision, tasks[i].Failure = decisions[i], failures[i]
		c.field.set(tasks[i], ins[i], c.value)
		ins[i].Interrupt.Decision, tasks[i].Failure = nil, nil
	}
	// Four transactions: tasks started, approvals raised, rejected, tasks failed.
	for _, step := range []func(i int, w store.Writer) error{
		func(i int, w store.Writer) error { return w.PutTask(tasks[i]) },
		func(i int, w store.Writer) error { return w.PutInterrupt(ins[i]) },
		func(i int, w store.Writer) error {
			ins[i].Interrupt.State, ins[i].Interrupt.Decision = agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED, decisions[i]
			return w.PutInterrupt(ins[i])
		},
		func(i int, w store.Writer) error {
			tasks[i].State, tasks[i].EndTime, tasks[i].Failure = agentplanev1.TaskState_TASK_STATE_FAILED, timestamppb.Now(), failures[i]
			return w.PutTask(tasks[i])
		},
	} {
		f.update(t, func(w store.Writer) error {
			for i := range cases {
				if err := step(i, w); err != nil {
					return err
				}
			}
			return nil
		})
	}
	want := 3 * len(cases)
	stdDs := std.WaitFor(t, testutil.WaitLimit, "the standard notifications", func(ds []webhookstest.Delivery) bool { return len(ds) >= want })
	slackDs := slack.WaitFor(t, testutil.WaitLimit, "the slack notifications", func(ds []webhookstest.Delivery) bool { return len(ds) >= want })

	caseOf := func(id string) int {
		var n int
		if _, err := fmt.Sscanf(id[1:], "%d", &n); err != nil || n >= len(cases) {
			t.Fatalf("notification for %q, which no case made", id)
		}
		return n
	}
	seen := map[int]int{} // case -> notifications in which Slack showed the value
	for _, d := range slackDs {
		m := decodeSlack(t, d.Body)
		section := m.Blocks[0].Text.Text
		link := consoleLink.FindStringSubmatch(section)
		if link == nil {
			t.Fatalf("slack section %q: want it to end with the console link", section)
		}
		n := caseOf(link[2])
		c := cases[n]
		if m.UnfurlLinks == nil || *m.UnfurlLinks || m.UnfurlMedia == nil || *m.UnfurlMedia || !m.Blocks[0].Text.Verbatim {
			t.Errorf("%s %q: want unfurl_links and unfurl_media false and a verbatim section: %s", c.field.name, c.value, d.Body)
		}
		if section[:len(section)-len(link[0])] != m.Text {
			t.Errorf("%s %q: the section %q is not the text %q and the link", c.field.name, c.value, section, m.Text)
		}
		if live := liveMarkup(m.Text); live != "" {
			t.Errorf("%s %q: slack text %q has %s", c.field.name, c.value, m.Text, live)
		}
		if shown := "`" + strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(c.value) + "`"; strings.Contains(m.Text, shown) {
			seen[n]++
		}
		if !c.field.inSlack && strings.Contains(m.Text, strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(c.value)) && len(c.value) > 1 {
			t.Errorf("%s %q: slack text %q shows a field it does not carry", c.field.name, c.value, m.Text)
		}
	}
	for n, c := range cases {
		// A value quote has to alter (line breaks, backticks, format characters)
		// cannot show as written; the checks above cover it.
		if c.field.inSlack && !strings.ContainsAny(c.value, "`\n\u202e\u200b") && seen[n] == 0 {
			t.Errorf("%s %q: no slack notification shows the value escaped in a code span", c.field.name, c.value)
		}
	}

	got := map[int]int{} // case -> standard notifications that carried the value
	for _, d := range stdDs {
		if d.Verified != nil {
			t.Errorf("standard notification %s: %v", d.ID, d.Verified)
		}
		if bytes.ContainsAny(d.Body, "<>&") {
			t.Errorf("standard body %s: has <, > or & unescaped", d.Body)
		}
		var m webhooks.Message
		if err := json.Unmarshal(d.Body, &m); err != nil {
			t.Fatal(err)
		}
		n := caseOf(m.Data.TaskID)
		c := cases[n]
		if c.field.standard == nil {
			if bytes.Contains(d.Body, []byte(strings.TrimSuffix(strings.TrimPrefix(string(must(json.Marshal(c.value))), `"`), `"`))) && len(c.value) > 1 {
				t.Errorf("%s %q: a field that is never sent is in %s", c.field.name, c.value, d.Body)
			}
			continue
		}
		if v, ok := c.field.standard(m.Data); ok {
			if v != c.value {
				t.Errorf("%s: standard %s carries %q, want %q exactly", c.field.name, m.Type, v, c.value)
			}
			got[n]++
		}
	}
	for n, c := range cases {
		if c.field.standard != nil && got[n] == 0 {
			t.Errorf("%s %q: no standard notification carries it", c.field.name, c.value)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestSlackBodyBounded: values far longer than Slack takes (a section's text is at
// most 3000 characters, or Slack refuses the whole message) are cut, never inside an
// escape, so the longest notification is still accepted.
func TestSlackBodyBounded(t *testing.T) {
	recv := webhookstest.New(t, "")
	f := start(t, fastConfig(config.Webhook{Name: "slack", URL: recv.URL, Format: config.FormatSlack, Events: config.WebhookEvents}))
	long := strings.Repeat("<&>😀", 5000)
	in := storetest.Interrupt("default", "t1", "i1", time.Now())
	in.Interrupt.Request = &agentplanev1.Interrupt_Approval{Approval: &agentplanev1.ApprovalRequest{
		InterruptId: "i1", ToolName: long, Context: &agentplanev1.ApprovalContext{AgentName: long},
	}}
	task := storetest.Task("default", "t1", time.Now())
	f.update(t, func(w store.Writer) error { return w.PutTask(task) })
	f.update(t, func(w store.Writer) error { return w.PutInterrupt(in) })
	in.Interrupt.State = agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED
	in.Interrupt.Decision = &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_REJECT,
		Source: agentplanev1.DecisionSource_DECISION_SOURCE_HUMAN, DecidedBy: long, Reason: &long}
	f.update(t, func(w store.Writer) error { return w.PutInterrupt(in) })
	task.State, task.EndTime = agentplanev1.TaskState_TASK_STATE_FAILED, timestamppb.Now()
	task.Failure = &agentplanev1.TaskFailure{Reason: "model.error", Message: long}
	f.update(t, func(w store.Writer) error { return w.PutTask(task) })
	ds := recv.WaitFor(t, testutil.WaitLimit, "3 notifications", func(ds []webhookstest.Delivery) bool { return len(ds) >= 3 })
	for _, d := range ds {
		m := decodeSlack(t, d.Body)
		section := m.Blocks[0].Text.Text
		if n := len(utf16.Encode([]rune(section))); n > 3000 {
			t.Errorf("section of %d characters, Slack takes at most 3000: %.200s...", n, section)
		}
		if live := liveMarkup(m.Text); live != "" {
			t.Errorf("cut text %q has %s", m.Text, live)
		}
		if !strings.Contains(m.Text, "…`") {
			t.Errorf("text %.200s...: want the long values cut with …", m.Text)
		}
	}
}
