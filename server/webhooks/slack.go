package webhooks

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"

	"github.com/agentplane/agentplane/server/config"
)

// The slack format is rendered from the stored standard message when it is sent.
// Slack reads both the top-level text (push notifications, clients without blocks)
// and the section as mrkdwn, where <...> is a control sequence (<!channel>, <!here>,
// <@U123>, <https://x|label>) and * _ ~ ` > format. The values in a notification
// come from callers (agent and tool names), models and runtimes (failure messages)
// and reviewers (reasons), so none may reach Slack as markup: the wording below is
// ours, and every value goes through quote, the one escaper of this format. The
// standard format needs none: it carries the values as JSON data, exactly, and
// encoding/json writes <, > and & as \u003c, \u003e and \u0026.

// mrkdwn is Slack markup that is safe to send as it is: our wording, or a value
// through quote.
type mrkdwn string

// mrkdwnf formats our wording, a constant, with safe parts.
func mrkdwnf(format string, parts ...mrkdwn) mrkdwn {
	args := make([]any, len(parts))
	for i, p := range parts {
		args[i] = string(p)
	}
	return mrkdwn(fmt.Sprintf(format, args...))
}

// Bounds of a quoted value, in UTF-16 units between its backticks (Slack counts
// characters so, and refuses a section over 3000): names and ids, and prose (a
// reason, a failure message). The longest message stays well under 3000 with the
// console link.
const (
	quoteName = 80
	quoteText = 1000
)

// quote renders a value as inline code, which Slack shows as written, with no
// formatting, mention or link: whitespace and control characters become single
// spaces, format characters (bidirectional overrides, zero-width characters) are
// dropped so that the text reads as it is stored, a backtick (which would end the
// code span) becomes ˋ, and &, <, > are escaped as Slack asks. A value longer than
// limit is cut with …, never inside an escape. An empty value is a dash.
func quote(s string, limit int) mrkdwn {
	s = strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		switch {
		case unicode.IsControl(r):
			return ' '
		case unicode.Is(unicode.Cf, r):
			return -1
		case r == '`':
			return 'ˋ'
		}
		return r
	}, s)), " ")
	if s == "" {
		return "-"
	}
	pieces := make([]string, 0, len(s))
	total := 0
	for _, r := range s {
		p := slackEscape(string(r))
		pieces = append(pieces, p)
		total += width(p)
	}
	var b strings.Builder
	b.WriteByte('`')
	if total <= limit {
		b.WriteString(slackEscape(s))
	} else {
		n := 0
		for _, p := range pieces {
			if n+width(p) > limit-1 {
				break
			}
			b.WriteString(p)
			n += width(p)
		}
		b.WriteString("…")
	}
	b.WriteByte('`')
	return mrkdwn(b.String())
}

// word renders a value of ours (a state, a decision type, a time) bare when it is
// made of ASCII letters, digits, '-' and ':' only, which mrkdwn gives no meaning to,
// and quoted otherwise.
func word(s string) mrkdwn {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == ':')
	}) {
		return quote(s, quoteName)
	}
	return mrkdwn(s)
}

// width is s's length as Slack counts it.
func width(s string) int { return len(utf16.Encode([]rune(s))) }

// slackEscape escapes the three characters Slack's mrkdwn gives meaning to.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// slackLink is a link to u, one of ours (the console's base URL and an escaped id),
// labelled with our wording: what would end the URL (<, >, |) is percent-encoded.
func slackLink(u string, label mrkdwn) mrkdwn {
	u = strings.NewReplacer("&", "&amp;", "<", "%3C", ">", "%3E", "|", "%7C").Replace(u)
	return mrkdwn("<" + u + "|" + string(label) + ">")
}

// slackText is the message's one line.
func slackText(m Message) mrkdwn {
	d := m.Data
	var text mrkdwn
	switch m.Type {
	case config.EventInterruptCreated:
		text = mrkdwnf("Approval needed: %s wants to call %s (task %s)", quote(d.Agent, quoteName), quote(d.Tool, quoteName), quote(d.TaskID, quoteName))
		if d.Deadline != nil {
			text += mrkdwnf(", decide by %s", word(d.Deadline.UTC().Format(time.RFC3339)))
		}
	case config.EventInterruptResolved, config.EventInterruptExpired:
		verb := mrkdwn("resolved")
		if m.Type == config.EventInterruptExpired {
			verb = "expired"
		}
		text = mrkdwnf("Approval %s: %s on task %s", verb, quote(d.Tool, quoteName), quote(d.TaskID, quoteName))
		if dec := d.Decision; dec != nil {
			text += mrkdwnf(": %s by %s", word(dec.Type), quote(dec.DecidedBy, quoteName))
			if dec.Reason != "" {
				text += mrkdwnf(" (%s)", quote(dec.Reason, quoteText))
			}
		}
	case config.EventBudgetWarning:
		if b := d.Budget; b != nil {
			n := func(v int64) mrkdwn { return mrkdwn(strconv.FormatInt(v, 10)) }
			text = mrkdwnf("Budget %s at %s%%: %s tokens used", quote(b.Name, quoteName), n(int64(b.WarnPercent)), n(b.UsedTokens))
			if b.LimitTokens > 0 {
				text += mrkdwnf(" of %s", n(b.LimitTokens))
			}
			if b.LimitUSD != "" {
				text += mrkdwnf(", %s of %s USD", word(b.UsedUSD), word(b.LimitUSD))
			}
			text += mrkdwnf(" this %s, resets %s", word(b.Period), word(b.ResetsAt.Format(time.RFC3339)))
		}
	default:
		text = mrkdwnf("Task %s %s", quote(d.TaskID, quoteName), word(d.State))
		if d.Failure != nil && d.Failure.Message != "" {
			text += mrkdwnf(": %s", quote(d.Failure.Message, quoteText))
		}
	}
	return text + mrkdwnf(" [tenant %s]", quote(d.Tenant, quoteName))
}

// slackBody renders a standard message as a Slack incoming-webhook body: the text
// (for notifications and clients without blocks) and one section block with the
// console link and the approval links the message carries, both the same escaped
// mrkdwn. Verbatim and no unfurling: Slack turns nothing in it into a link or a
// preview but our links. With buttons (a Slack app is configured), a pending approval
// gets Approve and Reject buttons, whose clicks the Slack channel of the control
// plane takes (server/hitl/channels), and Open in console for an edit.
func slackBody(m Message, buttons bool) []byte {
	text := slackText(m)
	section := text
	buttons = buttons && m.Type == config.EventInterruptCreated && m.Data.InterruptID != "" && m.Data.ArgsDigest != ""
	if m.Data.URL != "" && !buttons {
		section += "\n" + slackLink(m.Data.URL, "Open in the console")
	}
	for _, l := range m.Data.Links {
		section += "\n" + mrkdwnf("As %s: ", quote(l.Approver, quoteName)) + slackLink(l.ApproveURL, "Approve") + " · " + slackLink(l.RejectURL, "Reject")
	}
	blocks := []any{slackSection(section)}
	if buttons {
		blocks = append(blocks, slackActions(m.Data))
	}
	b, _ := json.Marshal(struct {
		Text        mrkdwn `json:"text"`
		Blocks      []any  `json:"blocks"`
		UnfurlLinks bool   `json:"unfurl_links"`
		UnfurlMedia bool   `json:"unfurl_media"`
	}{Text: text, Blocks: blocks})
	return b
}

type slackTextObject struct {
	Type     string `json:"type"`
	Text     mrkdwn `json:"text"`
	Verbatim bool   `json:"verbatim,omitempty"`
	Emoji    *bool  `json:"emoji,omitempty"`
}

type slackSectionBlock struct {
	Type string          `json:"type"`
	Text slackTextObject `json:"text"`
}

func slackSection(text mrkdwn) slackSectionBlock {
	return slackSectionBlock{Type: "section", Text: slackTextObject{Type: "mrkdwn", Text: text, Verbatim: true}}
}

// SlackAction is what an Approve or Reject button's value carries back: the
// interrupt and the arguments the message showed. Slack signs the click, not the
// value, so the channel trusts none of it beyond naming what to decide: the tenant
// must be the clicking approver's, and the digest must still be the interrupt's.
type SlackAction struct {
	Tenant    string `json:"t"`
	Interrupt string `json:"i"`
	Digest    string `json:"d"`
}

// Slack action ids of the buttons.
const (
	SlackActionApprove = "agentplane_approve"
	SlackActionReject  = "agentplane_reject"
	SlackActionConsole = "agentplane_console"
)

func slackActions(d Data) any {
	value, _ := json.Marshal(SlackAction{Tenant: d.Tenant, Interrupt: d.InterruptID, Digest: d.ArgsDigest})
	type plain struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type button struct {
		Type     string `json:"type"`
		ActionID string `json:"action_id"`
		Text     plain  `json:"text"`
		Style    string `json:"style,omitempty"`
		Value    string `json:"value,omitempty"`
		URL      string `json:"url,omitempty"`
	}
	elems := []button{
		{Type: "button", ActionID: SlackActionApprove, Text: plain{"plain_text", "Approve"}, Style: "primary", Value: string(value)},
		{Type: "button", ActionID: SlackActionReject, Text: plain{"plain_text", "Reject"}, Style: "danger", Value: string(value)},
	}
	if d.URL != "" {
		elems = append(elems, button{Type: "button", ActionID: SlackActionConsole, Text: plain{"plain_text", "Open in console"}, URL: d.URL})
	}
	return struct {
		Type     string   `json:"type"`
		BlockID  string   `json:"block_id"`
		Elements []button `json:"elements"`
	}{Type: "actions", BlockID: "agentplane_decide", Elements: elems}
}

// SlackOutcome is the body that replaces an approval's Slack message once a click
// decided (through its response_url): what happened and who decided, escaped like
// every value of this format, and no buttons. outcome is "approved" or "rejected".
func SlackOutcome(tenant, tool, taskID, outcome, principal string) []byte {
	verb := mrkdwn("Decided")
	switch outcome {
	case "approved":
		verb = "Approved"
	case "rejected":
		verb = "Rejected"
	}
	text := mrkdwnf("%s by %s: %s on task %s [tenant %s]", verb, quote(principal, quoteName), quote(tool, quoteName),
		quote(taskID, quoteName), quote(tenant, quoteName))
	b, _ := json.Marshal(struct {
		ReplaceOriginal bool   `json:"replace_original"`
		Text            mrkdwn `json:"text"`
		Blocks          []any  `json:"blocks"`
	}{ReplaceOriginal: true, Text: text, Blocks: []any{slackSection(text)}})
	return b
}

// SlackEphemeral is the body of a reply only the clicking user sees (a refusal);
// the message stays as it is.
func SlackEphemeral(text string) []byte {
	b, _ := json.Marshal(struct {
		ResponseType    string `json:"response_type"`
		ReplaceOriginal bool   `json:"replace_original"`
		Text            string `json:"text"`
	}{ResponseType: "ephemeral", Text: slackEscape(text)})
	return b
}
