package channels

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/hitl/links"
	"github.com/agentplane/agentplane/server/store"
)

// maxLinkForm bounds the confirmation form's body (a rejection's reason).
const maxLinkForm = 16 << 10

// maxShownArgs bounds the arguments the page shows.
const maxShownArgs = 64 << 10

// linkView is what the page shows.
type linkView struct {
	Title   string
	Message string
	// Confirm is set on the confirmation page.
	Confirm   bool
	Reject    bool
	Approver  string
	Tenant    string
	Task      string
	Agent     string
	Tool      string
	Desc      string
	Args      string
	Truncated bool
	Deadline  string
	Expires   string
	Error     string
	Console   string
	// LinkID names the link for revocation (ctl hitl revoke-link).
	LinkID string
}

var linkPage = template.Must(template.New("link").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<meta name="referrer" content="no-referrer"><title>{{.Title}} · agentplane</title></head>
<body>
<h1>{{.Title}}</h1>
{{with .Message}}<p>{{.}}</p>{{end}}
{{if .Confirm}}
<table>
<tr><th scope="row">Tenant</th><td><code>{{.Tenant}}</code></td></tr>
<tr><th scope="row">Task</th><td><code>{{.Task}}</code></td></tr>
<tr><th scope="row">Agent</th><td><code>{{.Agent}}</code></td></tr>
<tr><th scope="row">Tool</th><td><code>{{.Tool}}</code></td></tr>
{{with .Desc}}<tr><th scope="row">Description</th><td>{{.}}</td></tr>{{end}}
{{with .Deadline}}<tr><th scope="row">Decide by</th><td>{{.}}</td></tr>{{end}}
<tr><th scope="row">You decide as</th><td><code>{{.Approver}}</code> (this link works once, until {{.Expires}})</td></tr>
</table>
<h2>Arguments</h2>
<pre>{{.Args}}</pre>{{if .Truncated}}<p>(cut here: open the call in the console to see all of it)</p>{{end}}
{{with .Error}}<p role="alert"><strong>{{.}}</strong></p>{{end}}
<form method="post">
<input type="hidden" name="confirm" value="1">
{{if .Reject}}<p><label for="reason">Why (the agent is told)</label><br>
<textarea id="reason" name="reason" rows="4" cols="60" required maxlength="4000"></textarea></p>
<button type="submit">Reject this call</button>{{else}}<button type="submit">Approve this call</button>{{end}}
</form>
{{end}}
{{with .Console}}<p><a href="{{.}}">Open in the console</a></p>{{end}}
{{with .LinkID}}<p><small>Link id <code>{{.}}</code>: if this link reached someone it should not have, revoke it with <code>ctl hitl revoke-link {{.}}</code>.</small></p>{{end}}
</body></html>
`))

// render writes the page with the headers of the console: nothing loads from
// anywhere, no frame, no referrer (the URL is the capability), no cache.
func (h *Handler) render(w http.ResponseWriter, status int, v linkView) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Type", "text/html; charset=utf-8")
	if h.o.Secure {
		hd.Set("Strict-Transport-Security", "max-age=31536000")
	}
	var b bytes.Buffer
	if err := linkPage.Execute(&b, v); err != nil {
		h.log.Error("link page not rendered", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// consoleLink is the console page of an interrupt, or "".
func (h *Handler) consoleLink(id string) string {
	if h.o.ConsoleURL == "" || id == "" {
		return ""
	}
	return strings.TrimRight(h.o.ConsoleURL, "/") + "/ui/interrupts/" + url.PathEscape(id)
}

// linkChannel is the channel a link's decision comes from.
func linkChannel(c links.Claims) hitl.Channel {
	if c.Channel == string(hitl.ChannelEmail) {
		return hitl.ChannelEmail
	}
	return hitl.ChannelLink
}

// checkLink verifies the token and everything it needs to decide: the approver still
// listed with the right, the interrupt pending with the arguments the link was made
// for. It returns the claims and the interrupt, or writes the refusal page.
func (h *Handler) checkLink(ctx context.Context, w http.ResponseWriter, token string) (links.Claims, *agentplanev1.Interrupt, bool) {
	c, err := links.Parse(h.o.LinkKey, token, h.now())
	ch := string(linkChannel(c))
	switch {
	case errors.Is(err, links.ErrExpired):
		h.count(ch, "refused_expired")
		h.render(w, http.StatusGone, linkView{Title: "This link has expired", Message: "Nothing was decided. Open the call in the console if it still waits.", Console: h.consoleLink(c.Interrupt)})
		return c, nil, false
	case err != nil:
		h.count("link", "refused_invalid")
		h.render(w, http.StatusNotFound, linkView{Title: "This link is not valid", Message: "Nothing was decided."})
		return c, nil, false
	}
	if rb := h.o.RevokedBefore; !rb.IsZero() && time.Unix(c.Issued, 0).Before(rb) {
		h.count(ch, "refused_revoked")
		h.render(w, http.StatusGone, linkView{Title: "This link was revoked", Message: "Nothing was decided.", Console: h.consoleLink(c.Interrupt)})
		return c, nil, false
	}
	if c.ID != "" && h.o.Revoked != nil {
		revoked, err := h.o.Revoked(ctx, c.Tenant, c.ID)
		if err != nil {
			h.count(ch, "error")
			h.log.Error("approval link: reading its revocation failed", "tenant", c.Tenant, "link", c.ID, "err", err)
			h.render(w, http.StatusServiceUnavailable, linkView{Title: "Try again in a moment", Message: "The control plane could not check this link. Nothing was decided."})
			return c, nil, false
		}
		if revoked {
			h.count(ch, "refused_revoked")
			h.log.Info("approval link refused: it was revoked", "tenant", c.Tenant, "link", c.ID, "principal", c.Approver)
			h.render(w, http.StatusGone, linkView{Title: "This link was revoked", Message: "Nothing was decided. Open the call in the console if it still waits.", LinkID: c.ID, Console: h.consoleLink(c.Interrupt)})
			return c, nil, false
		}
	}
	if _, ok := h.approver(c.Tenant, c.Approver); !ok || !h.o.MayApprove(c.Tenant, c.Approver) {
		h.count(ch, "refused_no_right")
		h.log.Warn("approval link refused: its approver is no longer an approver of the tenant", "tenant", c.Tenant, "principal", c.Approver)
		h.render(w, http.StatusForbidden, linkView{Title: "This link no longer works", Message: "It was sent to an approver who no longer may decide here. Nothing was decided."})
		return c, nil, false
	}
	in, err := h.o.Resolver.GetInterrupt(ctx, c.Tenant, c.Interrupt)
	switch {
	case store.IsNotFound(err):
		h.count(ch, "refused_invalid")
		h.render(w, http.StatusNotFound, linkView{Title: "This link is not valid", Message: "Nothing was decided."})
		return c, nil, false
	case err != nil:
		h.count(ch, "error")
		h.log.Error("approval link: reading the interrupt failed", "tenant", c.Tenant, "interrupt", c.Interrupt, "err", err)
		h.render(w, http.StatusServiceUnavailable, linkView{Title: "Try again in a moment", Message: "The control plane could not read this call. Nothing was decided."})
		return c, nil, false
	}
	if in.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_PENDING {
		h.count(ch, "refused_state")
		msg := "Nothing more was decided."
		if d := in.GetDecision(); d != nil {
			msg = "It was decided (" + strings.ToLower(strings.TrimPrefix(d.GetType().String(), "DECISION_TYPE_")) + ") by " + d.GetDecidedBy() + ". Nothing more was decided."
		}
		h.render(w, http.StatusGone, linkView{Title: "This call was already decided", Message: msg, Console: h.consoleLink(in.GetInterruptId())})
		return c, nil, false
	}
	if in.GetArgsDigest() != c.Digest {
		h.count(ch, "refused_state")
		h.render(w, http.StatusGone, linkView{Title: "The call's arguments changed", Message: "They changed after this link was sent, so it no longer works. Nothing was decided; open the call in the console to see it as it is now.", Console: h.consoleLink(in.GetInterruptId())})
		return c, nil, false
	}
	return c, in, true
}

// confirmView is the confirmation page of a link.
func (h *Handler) confirmView(c links.Claims, in *agentplanev1.Interrupt) linkView {
	ap := in.GetApproval()
	v := linkView{Confirm: true, Reject: c.Action == links.Reject, Approver: c.Approver, Tenant: c.Tenant, Task: in.GetTaskId(),
		Agent: ap.GetContext().GetAgentName(), Tool: ap.GetToolName(), Desc: ap.GetToolDescription(),
		Expires: time.Unix(c.Expires, 0).UTC().Format("2006-01-02 15:04 MST"), Console: h.consoleLink(in.GetInterruptId()), LinkID: c.ID}
	v.Title = "Approve this call?"
	if v.Reject {
		v.Title = "Reject this call?"
	}
	if dl := in.GetDeadline(); dl != nil {
		v.Deadline = dl.AsTime().UTC().Format(time.RFC3339)
	}
	args := ap.GetArgumentsJson()
	var pretty bytes.Buffer
	if json.Indent(&pretty, []byte(args), "", "  ") == nil {
		args = pretty.String()
	}
	if len(args) > maxShownArgs {
		args, v.Truncated = hitl.TruncateUTF8(args, maxShownArgs), true
	}
	v.Args = strings.ToValidUTF8(args, "\uFFFD")
	return v
}

// linkPage answers GET: the confirmation page. It decides nothing (mail scanners and
// link previews follow links).
func (h *Handler) linkPage(w http.ResponseWriter, r *http.Request) {
	c, in, ok := h.checkLink(r.Context(), w, r.PathValue("token"))
	if !ok {
		return
	}
	h.count(string(linkChannel(c)), "shown")
	h.render(w, http.StatusOK, h.confirmView(c, in))
}

// linkDecide answers the confirmation page's POST: the decision, through
// ResolveInterrupt, as the link's approver, on the link's digest, under the link's
// request id. The HTTP guard has refused a POST from another origin and a body that
// is not a form before this runs.
func (h *Handler) linkDecide(w http.ResponseWriter, r *http.Request) {
	c, in, ok := h.checkLink(r.Context(), w, r.PathValue("token"))
	if !ok {
		return
	}
	ch := linkChannel(c)
	r.Body = http.MaxBytesReader(w, r.Body, maxLinkForm)
	if err := r.ParseForm(); err != nil || r.PostForm.Get("confirm") != "1" {
		h.count(string(ch), "bad_request")
		v := h.confirmView(c, in)
		v.Error = "Use the button on this page to decide."
		h.render(w, http.StatusBadRequest, v)
		return
	}
	req := &agentplanev1.ResolveInterruptRequest{InterruptId: c.Interrupt, ArgsDigest: c.Digest, RequestId: c.RequestID()}
	if c.Action == links.Reject {
		reason := strings.TrimSpace(r.PostForm.Get("reason"))
		if reason == "" {
			h.count(string(ch), "bad_request")
			v := h.confirmView(c, in)
			v.Error = "A rejection needs a reason."
			h.render(w, http.StatusBadRequest, v)
			return
		}
		req.Decision = &agentplanev1.ResolveInterruptRequest_Reject{Reject: &agentplanev1.RejectDecision{Reason: reason}}
	} else {
		req.Decision = &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}}
	}
	attrs := []any{"tenant", c.Tenant, "interrupt", c.Interrupt, "principal", c.Approver, "action", string(c.Action), "channel", string(ch)}
	out, err := h.o.Resolver.ResolveInterrupt(hitl.WithLinkID(hitl.WithChannel(r.Context(), ch), c.ID), c.Tenant, c.Approver, req)
	if err != nil {
		outcome, text := refusal(err)
		h.count(string(ch), outcome)
		h.log.Info("approval link refused by the decision path", append(attrs, "err", err)...)
		status := http.StatusConflict
		if outcome == "error" {
			status = http.StatusServiceUnavailable
		}
		h.render(w, status, linkView{Title: "Nothing was decided", Message: text, Console: h.consoleLink(c.Interrupt)})
		return
	}
	if out.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED {
		h.count(string(ch), "recorded")
		h.log.Info("approval link decision recorded; the interrupt is still pending", attrs...)
		h.render(w, http.StatusOK, linkView{Title: "Your decision is recorded", Message: "The call still waits for other approvers.", Console: h.consoleLink(c.Interrupt)})
		return
	}
	h.count(string(ch), "decided")
	d := out.GetDecision()
	h.log.Info("approval link decision", append(attrs, "decision", d.GetType().String(), "decided_by", d.GetDecidedBy())...)
	title := "Approved"
	if d.GetType() == agentplanev1.DecisionType_DECISION_TYPE_REJECT {
		title = "Rejected"
	}
	h.render(w, http.StatusOK, linkView{Title: title, Message: "Decided by " + d.GetDecidedBy() + ". You can close this page.", Console: h.consoleLink(c.Interrupt)})
}
