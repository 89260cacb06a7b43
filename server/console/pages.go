package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// signinPage shows the token form (multi-tenant), with an anonymous session whose
// CSRF token the form carries.
func (h *Handler) signinPage(w http.ResponseWriter, r *http.Request) {
	if !h.opt.MultiTenant {
		http.Redirect(w, r, "/ui/inbox", http.StatusSeeOther)
		return
	}
	s := h.sessions.read(r)
	if s == nil {
		s = h.sessions.fresh()
		h.sessions.write(w, s)
	}
	next := r.URL.Query().Get("next")
	if !safeNext(next) {
		next = ""
	}
	h.render(w, r, http.StatusOK, "signin", &page{Title: "Sign in", S: s, Data: next})
}

// signin exchanges a bearer token for a session: the API itself says whether the
// token is good and who it belongs to (GetCapabilities, which any role may call).
// The signed-in session is a new one (new id, new CSRF token).
func (h *Handler) signin(w http.ResponseWriter, r *http.Request) {
	if !h.opt.MultiTenant {
		http.Redirect(w, r, "/ui/inbox", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	anon := h.sessions.read(r)
	if anon == nil || !checkCSRF(r, anon) { // the HTTP guard refused other origins
		h.render(w, r, http.StatusForbidden, "error", &page{Title: "Refused", Err: &apiError{Status: 403, Reason: "console.csrf",
			Message: "The sign-in form expired or came from elsewhere. Open the sign-in page again."}})
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	token = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(token, "Bearer "), "bearer "))
	s := h.sessions.fresh()
	s.Token = token
	var caps *agentplanev1.GetCapabilitiesResponse
	var err error
	if token != "" {
		caps, err = h.caps.GetCapabilities(h.call(r, s), &agentplanev1.GetCapabilitiesRequest{})
	}
	if token == "" || err != nil {
		msg := "This token is not accepted. Check that you pasted all of it (it starts with apt_)."
		code := http.StatusUnauthorized
		if err != nil && status.Code(err) != codes.Unauthenticated {
			e := fromAPI(err)
			msg, code = e.Message, e.Status
		}
		h.opt.Log.Info("console: sign-in refused", "remote", r.RemoteAddr)
		h.render(w, r, code, "signin", &page{Title: "Sign in", S: anon, Err: &apiError{Status: code, Message: msg}, Data: r.PostFormValue("next")})
		return
	}
	p := caps.GetCapabilities().GetPrincipal()
	s.Subject, s.Tenant, s.Roles = p.GetSubject(), p.GetTenant(), p.GetRoles()
	h.sessions.write(w, s)
	h.opt.Log.Info("console: signed in", "subject", s.Subject, "tenant", s.Tenant)
	to := "/ui/inbox"
	if next := r.PostFormValue("next"); safeNext(next) {
		to = next
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

func (h *Handler) signout(w http.ResponseWriter, r *http.Request, s *session) {
	h.sessions.revoke(w, s)
	if !h.opt.MultiTenant {
		http.Redirect(w, r, "/ui/inbox", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/ui/signin", http.StatusSeeOther)
}

// inboxFilter is the inbox's query: tool, tag, minimum age, page token.
type inboxFilter struct {
	Tool, Tag, Age, Page string
	Ages                 []string
}

var inboxAges = []string{"", "1m", "5m", "15m", "1h", "24h"}

func readInboxFilter(q url.Values) inboxFilter {
	return inboxFilter{Tool: q.Get("tool"), Tag: q.Get("tag"), Age: q.Get("age"), Page: q.Get("page"), Ages: inboxAges}
}

func (f inboxFilter) request() *agentplanev1.ListInterruptsRequest {
	req := &agentplanev1.ListInterruptsRequest{PageSize: 50, PageToken: f.Page, ToolName: f.Tool, Tag: f.Tag}
	if d, err := time.ParseDuration(f.Age); err == nil && d > 0 {
		req.MinAge = durationpb.New(d)
	}
	return req
}

// Query is the filter as a query string (for the live updates and paging links).
func (f inboxFilter) Query(page string) string {
	v := url.Values{}
	for k, x := range map[string]string{"tool": f.Tool, "tag": f.Tag, "age": f.Age, "page": page} {
		if x != "" {
			v.Set(k, x)
		}
	}
	return v.Encode()
}

type inboxData struct {
	Filter inboxFilter
	Rows   []*agentplanev1.Interrupt
	Next   string
	Now    time.Time
}

func (h *Handler) listInbox(r *http.Request, s *session) (*inboxData, error) {
	f := readInboxFilter(r.URL.Query())
	resp, err := h.hitl.ListInterrupts(h.call(r, s), f.request())
	if err != nil {
		return nil, err
	}
	return &inboxData{Filter: f, Rows: resp.GetInterrupts(), Next: resp.GetNextPageToken(), Now: time.Now()}, nil
}

func (h *Handler) inbox(w http.ResponseWriter, r *http.Request, s *session) {
	d, err := h.listInbox(r, s)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	h.render(w, r, http.StatusOK, "inbox", &page{Title: "Inbox", Nav: "inbox", S: s, Data: d})
}

// inboxRows answers the inbox page's live updates: the rows as HTML and their count.
func (h *Handler) inboxRows(w http.ResponseWriter, r *http.Request, s *session) {
	d, err := h.listInbox(r, s)
	if err != nil {
		h.jsonError(w, err)
		return
	}
	html, err := h.fragment("inbox-rows", d)
	if err != nil {
		h.jsonError(w, err)
		return
	}
	writeJSON(w, map[string]any{"html": html, "count": len(d.Rows), "more": d.Next != ""})
}

func (h *Handler) jsonError(w http.ResponseWriter, err error) {
	e := fromAPI(err)
	if e.Status >= 500 {
		h.opt.Log.Warn("console: live update failed", "err", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": e.Message, "reason": e.Reason})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

type interruptData struct {
	In        *agentplanev1.Interrupt
	Task      *agentplanev1.Task
	Args      argsView
	Form      *editForm
	Reason    string
	ReasonErr []string
	Decision  string
	CanDecide bool
	RequestID string
	Decided   *decisionView
	// Digest is the digest of the arguments shown, which a decision is bound to: the
	// interrupt's, or under an approval rule the arguments under review (an edit's).
	Digest string
	// Edited says the arguments shown are an edit under review, not the model's.
	Edited bool
}

// decisionView is a resolved interrupt's decision as its page shows it: who, when,
// how, why, and for an edit the arguments the call runs with beside the model's.
type decisionView struct {
	D         *agentplanev1.Decision
	What      string // approved, rejected, edited
	Changes   []argChange
	Unchanged []string // the arguments the edit kept as written
	Diffable  bool
}

func viewDecision(in *agentplanev1.Interrupt) *decisionView {
	d := in.GetDecision()
	if d == nil || in.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED {
		return nil
	}
	v := &decisionView{D: d, What: map[agentplanev1.DecisionType]string{
		agentplanev1.DecisionType_DECISION_TYPE_APPROVE: "approved",
		agentplanev1.DecisionType_DECISION_TYPE_REJECT:  "rejected",
		agentplanev1.DecisionType_DECISION_TYPE_EDIT:    "edited",
	}[d.GetType()]}
	if d.GetType() == agentplanev1.DecisionType_DECISION_TYPE_EDIT {
		v.Changes, v.Diffable = diffArgs(in.GetApproval().GetArgumentsJson(), d.GetArgumentsJson())
		for _, c := range v.Changes {
			if !c.Changed {
				v.Unchanged = append(v.Unchanged, c.Key)
			}
		}
	}
	return v
}

// interruptView loads an interrupt and its task (for the tool's parameter schema).
func (h *Handler) interruptView(r *http.Request, s *session) (*interruptData, error) {
	ctx := h.call(r, s)
	resp, err := h.hitl.GetInterrupt(ctx, &agentplanev1.GetInterruptRequest{InterruptId: r.PathValue("id")})
	if err != nil {
		return nil, err
	}
	in := resp.GetInterrupt()
	d := &interruptData{In: in, Args: viewArgs(in.GetApproval().GetArgumentsJson()), CanDecide: s.hasRole("approver"), RequestID: randomID(12),
		Decided: viewDecision(in)}
	if t, err := h.tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: in.GetTaskId()}); err == nil {
		d.Task = t.GetTask()
	}
	text := in.GetApproval().GetArgumentsJson()
	d.Digest = in.GetArgsDigest()
	if rq := in.GetRequirement(); rq != nil && rq.EditedArgumentsJson != nil && d.Decided == nil {
		text, d.Digest, d.Edited = rq.GetEditedArgumentsJson(), rq.GetReviewArgsDigest(), true
		d.Args = viewArgs(text)
	}
	schema := toolSchema(d.Task, in.GetNode(), in.GetApproval().GetToolName())
	d.Form = newEditForm(schema, text)
	return d, nil
}

func (h *Handler) interrupt(w http.ResponseWriter, r *http.Request, s *session) {
	d, err := h.interruptView(r, s)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	notice := ""
	if r.URL.Query().Get("done") != "" {
		notice = "Your decision is recorded."
	}
	h.render(w, r, http.StatusOK, "interrupt", &page{Title: "Interrupt " + d.In.GetInterruptId(), Nav: "inbox", S: s, Notice: notice, Data: d})
}

// resolve applies approve, reject (with a reason) or edit (arguments from the
// schema-driven form) through ResolveInterrupt, bound to the digest of the arguments
// the page showed. Refusals come back on the same page, field errors beside their field.
func (h *Handler) resolve(w http.ResponseWriter, r *http.Request, s *session) {
	d, err := h.interruptView(r, s)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	req := &agentplanev1.ResolveInterruptRequest{InterruptId: d.In.GetInterruptId(),
		ArgsDigest: r.PostFormValue("args_digest"), RequestId: r.PostFormValue("request_id")}
	d.Reason = r.PostFormValue("reason")
	var reason *string
	if d.Reason != "" {
		reason = &d.Reason
	}
	switch r.PostFormValue("decision") {
	case "approve":
		req.Decision = &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{Reason: reason}}
	case "reject":
		req.Decision = &agentplanev1.ResolveInterruptRequest_Reject{Reject: &agentplanev1.RejectDecision{Reason: d.Reason}}
	case "edit":
		text := d.Form.fill(r.PostForm)
		req.Decision = &agentplanev1.ResolveInterruptRequest_Edit{Edit: &agentplanev1.EditDecision{Reason: reason, ArgumentsJson: text}}
	default:
		h.render(w, r, http.StatusBadRequest, "error", &page{Title: "Error", S: s, Err: &apiError{Status: 400, Message: "Choose approve, reject or edit."}})
		return
	}
	d.Decision = r.PostFormValue("decision")
	if _, err := h.hitl.ResolveInterrupt(h.call(r, s), req); err != nil {
		if h.opt.MultiTenant && status.Code(err) == codes.Unauthenticated {
			h.fail(w, r, s, err)
			return
		}
		e := fromAPI(err)
		for _, v := range e.Violations {
			switch {
			case strings.Contains(v.Field, "reason"):
				d.ReasonErr = append(d.ReasonErr, v.Description)
			case d.Decision == "edit":
				d.Form.attach(v.Description)
			}
		}
		d.RequestID = randomID(12) // a different ruling is a different request
		h.render(w, r, e.Status, "interrupt", &page{Title: "Interrupt " + d.In.GetInterruptId(), Nav: "inbox", S: s, Err: e, Data: d})
		return
	}
	http.Redirect(w, r, "/ui/interrupts/"+url.PathEscape(d.In.GetInterruptId())+"?done=1", http.StatusSeeOther)
}

var taskStates = []string{"SUBMITTED", "WORKING", "INPUT_REQUIRED", "COMPLETED", "FAILED", "CANCELED"}

type tasksData struct {
	State, Label, Page string
	States             []string
	Tasks              []*agentplanev1.Task
	Next               string
}

// Query is the filter as a query string with page.
func (d *tasksData) Query(page string) string {
	v := url.Values{}
	for k, x := range map[string]string{"state": d.State, "label": d.Label, "page": page} {
		if x != "" {
			v.Set(k, x)
		}
	}
	return v.Encode()
}

func (h *Handler) taskList(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	d := &tasksData{State: q.Get("state"), Label: q.Get("label"), Page: q.Get("page"), States: taskStates}
	// The full view: the list names each task's agent (a basic view leaves inline specs out).
	req := &agentplanev1.ListTasksRequest{PageSize: 25, PageToken: d.Page, LabelSelector: strings.Fields(d.Label), View: agentplanev1.TaskView_TASK_VIEW_FULL}
	if v, ok := agentplanev1.TaskState_value["TASK_STATE_"+d.State]; ok && d.State != "" {
		req.States = []agentplanev1.TaskState{agentplanev1.TaskState(v)}
	}
	resp, err := h.tasks.ListTasks(h.call(r, s), req)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	d.Tasks, d.Next = resp.GetTasks(), resp.GetNextPageToken()
	h.render(w, r, http.StatusOK, "tasks", &page{Title: "Tasks", Nav: "tasks", S: s, Data: d})
}

// maxTimelineEvents bounds the events one page load reads; the rest follow live.
const maxTimelineEvents = 2000

type taskData struct {
	Task        *agentplanev1.Task
	Events      []eventView
	Last        int64
	Obligations []*agentplanev1.Obligation
	Pending     []*agentplanev1.Interrupt
	Truncated   bool
	RequestID   string
	ContinueErr *apiError
	Message     string
}

// events reads the log after seq, page by page, up to limit events.
func (h *Handler) events(r *http.Request, s *session, id string, after int64, limit int) ([]*agentplanev1.TaskEvent, int64, bool, error) {
	var out []*agentplanev1.TaskEvent
	last := after
	token := ""
	for {
		resp, err := h.tasks.ListTaskEvents(h.call(r, s), &agentplanev1.ListTaskEventsRequest{TaskId: id, AfterSequence: after, PageToken: token, PageSize: 500})
		if err != nil {
			return nil, 0, false, err
		}
		out = append(out, resp.GetEvents()...)
		if n := len(out); n > 0 {
			last = out[n-1].GetSequence()
		}
		token = resp.GetNextPageToken()
		if token == "" {
			return out, last, false, nil
		}
		if len(out) >= limit {
			return out, last, true, nil
		}
	}
}

// viewEvents lays events out for the timeline; refused holds what is known of the
// task's refused calls and learns from them.
func viewEvents(evs []*agentplanev1.TaskEvent, refused refusals) []eventView {
	out := make([]eventView, 0, len(evs))
	for _, ev := range evs {
		refused.learn(ev)
		out = append(out, viewEvent(ev, refused))
	}
	return out
}

// reportsCalls says whether evs hold a runtime's report of a call or its result (the
// lines a refusal changes).
func reportsCalls(evs []*agentplanev1.TaskEvent) bool {
	for _, ev := range evs {
		if ev.GetToolCall() != nil || ev.GetToolResult() != nil {
			return true
		}
	}
	return false
}

func (h *Handler) taskView(r *http.Request, s *session) (*taskData, error) {
	ctx := h.call(r, s)
	id := r.PathValue("id")
	t, err := h.tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: id, View: agentplanev1.TaskView_TASK_VIEW_FULL})
	if err != nil {
		return nil, err
	}
	d := &taskData{Task: t.GetTask(), RequestID: randomID(12)}
	evs, last, truncated, err := h.events(r, s, id, 0, maxTimelineEvents)
	if err != nil {
		return nil, err
	}
	d.Events, d.Last, d.Truncated = viewEvents(evs, refusals{}), last, truncated
	if ob, err := h.tasks.ListObligations(ctx, &agentplanev1.ListObligationsRequest{TaskId: id}); err == nil {
		d.Obligations = ob.GetObligations()
	}
	if in, err := h.hitl.ListInterrupts(ctx, &agentplanev1.ListInterruptsRequest{TaskId: id,
		Kinds: []agentplanev1.InterruptKind{agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL, agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE,
			agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED, agentplanev1.InterruptKind_INTERRUPT_KIND_MODEL_CALL_APPROVAL}}); err == nil {
		d.Pending = in.GetInterrupts()
	}
	return d, nil
}

func (h *Handler) task(w http.ResponseWriter, r *http.Request, s *session) {
	d, err := h.taskView(r, s)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	h.render(w, r, http.StatusOK, "task", &page{Title: "Task " + d.Task.GetTaskId(), Nav: "tasks", S: s, Data: d})
}

// taskEvents answers the task page's live updates: the events after ?after= as HTML,
// the newest sequence and the task's state.
func (h *Handler) taskEvents(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	after, _ := parseInt(r.URL.Query().Get("after"))
	t, err := h.tasks.GetTask(h.call(r, s), &agentplanev1.GetTaskRequest{TaskId: id, View: agentplanev1.TaskView_TASK_VIEW_BASIC})
	if err != nil {
		h.jsonError(w, err)
		return
	}
	evs, last, _, err := h.events(r, s, id, after, 500)
	if err != nil {
		h.jsonError(w, err)
		return
	}
	refused := refusals{}
	if reportsCalls(evs) {
		refused = h.refusalsBefore(r, s, id, after)
	}
	html, err := h.fragment("events", viewEvents(evs, refused))
	if err != nil {
		h.jsonError(w, err)
		return
	}
	writeJSON(w, map[string]any{"html": html, "last": last, "state": stateName(t.GetTask().GetState()), "terminal": terminal(t.GetTask().GetState())})
}

// refusalLookback is how many events before a live update's first the console reads
// again to learn gate refusals: the gate's event comes just before the refused call's
// report (other nodes of a graph may write in between).
const refusalLookback = 64

// refusalsBefore learns the refusals of task id that a live update after the event
// after may need: the rejections among its resolved interrupts (a decision can be
// long before the call is reported, as with a durable wait) and the gate's refusals
// in the events just before. What it cannot read, it does without: the line then
// reads as a call, as the event itself says.
func (h *Handler) refusalsBefore(r *http.Request, s *session, id string, after int64) refusals {
	refused := refusals{}
	if after <= 0 {
		return refused
	}
	ctx := h.call(r, s)
	req := &agentplanev1.ListInterruptsRequest{TaskId: id, PageSize: 500,
		States: []agentplanev1.InterruptState{agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED},
		Kinds:  []agentplanev1.InterruptKind{agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL}}
	for range 4 { // a few pages: a task with more rejected calls than that is not a person's to read live
		resp, err := h.hitl.ListInterrupts(ctx, req)
		if err != nil {
			break
		}
		for _, in := range resp.GetInterrupts() {
			refused.decided(in.GetDecision())
		}
		if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
			break
		}
	}
	from := max(after-refusalLookback, 0)
	if resp, err := h.tasks.ListTaskEvents(ctx, &agentplanev1.ListTaskEventsRequest{TaskId: id, AfterSequence: from, PageSize: int32(after - from)}); err == nil {
		for _, ev := range resp.GetEvents() {
			refused.learn(ev)
		}
	}
	return refused
}

// continueTask sends the user's next message to a task waiting at the end of a turn.
func (h *Handler) continueTask(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	text := r.PostFormValue("message")
	_, err := h.tasks.ContinueTask(h.call(r, s), &agentplanev1.ContinueTaskRequest{TaskId: id, RequestId: r.PostFormValue("request_id"),
		Input: &agentplanev1.ContinueTaskRequest_Message{Message: &agentplanev1.Message{Role: agentplanev1.MessageRole_MESSAGE_ROLE_USER,
			Parts: []*agentplanev1.Part{{Kind: &agentplanev1.Part_Text{Text: text}}}}}})
	if err != nil {
		if st := status.Code(err); st == codes.NotFound || st == codes.Unauthenticated {
			h.fail(w, r, s, err)
			return
		}
		d, verr := h.taskView(r, s)
		if verr != nil {
			h.fail(w, r, s, verr)
			return
		}
		d.ContinueErr, d.Message = fromAPI(err), text
		h.render(w, r, d.ContinueErr.Status, "task", &page{Title: "Task " + id, Nav: "tasks", S: s, Err: d.ContinueErr, Data: d})
		return
	}
	http.Redirect(w, r, "/ui/tasks/"+url.PathEscape(id), http.StatusSeeOther)
}

type capsData struct {
	Caps    *agentplanev1.Capabilities
	JSON    string
	Budgets []budgetRow
}

// budgetRow is one budget of the caller's tenant as the capabilities page shows it;
// html/template escapes every field.
type budgetRow struct {
	Name, Agent, Period, Tokens, Cost, State, Resets string
}

func budgetRows(bs []*agentplanev1.BudgetStatus) []budgetRow {
	rows := make([]budgetRow, 0, len(bs))
	for _, b := range bs {
		row := budgetRow{Name: b.GetBudget(), Agent: b.GetAgentId(), Period: b.GetPeriod(),
			Resets: b.GetResetsAt().AsTime().UTC().Format(time.RFC3339), State: "ok"}
		row.Tokens = strconv.FormatInt(b.GetUsedTokens(), 10)
		if b.GetLimitTokens() > 0 {
			row.Tokens += " of " + strconv.FormatInt(b.GetLimitTokens(), 10)
		}
		if b.GetLimitCostMicros() > 0 {
			row.Cost = fmt.Sprintf("%d.%06d of %d.%06d USD", b.GetUsedCostMicros()/1e6, b.GetUsedCostMicros()%1e6,
				b.GetLimitCostMicros()/1e6, b.GetLimitCostMicros()%1e6)
		}
		switch {
		case b.GetExceeded() && b.GetOnLimit() == "approve":
			row.State = "spent: model calls need approval"
		case b.GetExceeded():
			row.State = "spent: new tasks refused"
		case b.GetWarned():
			row.State = fmt.Sprintf("over %d%%", b.GetWarnPercent())
		}
		rows = append(rows, row)
	}
	return rows
}

func (h *Handler) capabilities(w http.ResponseWriter, r *http.Request, s *session) {
	resp, err := h.caps.GetCapabilities(h.call(r, s), &agentplanev1.GetCapabilitiesRequest{})
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	js := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Format(resp.GetCapabilities())
	h.render(w, r, http.StatusOK, "capabilities", &page{Title: "Capabilities", Nav: "capabilities", S: s, Data: &capsData{Caps: resp.GetCapabilities(), JSON: js, Budgets: budgetRows(resp.GetBudgets())}})
}
