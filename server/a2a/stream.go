package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

// sse writes a server-sent-event stream. Every event that comes from the task's log
// carries the log's sequence number as its SSE id; a client that lost the stream
// passes the last id it saw as Last-Event-ID to SubscribeToTask and gets exactly the
// events after it. Message deltas are ephemeral (not in the log): they carry no id.
type sse struct {
	w      http.ResponseWriter
	f      http.Flusher
	encode func(*streamResponse) any
	fail   func(*rpcError) (event string, v any)
	broken bool
}

func (h *Handler) openSSE(w http.ResponseWriter, encode func(*streamResponse) any, fail func(*rpcError) (string, any)) *sse {
	f, _ := w.(http.Flusher)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, f: f, encode: encode, fail: fail}
	s.flush()
	return s
}

func (s *sse) flush() {
	if s.f != nil {
		s.f.Flush()
	}
}

func (s *sse) write(event string, id int64, v any) {
	if s.broken {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	var sb strings.Builder
	if event != "" {
		sb.WriteString("event: " + event + "\n")
	}
	if id > 0 {
		sb.WriteString("id: " + strconv.FormatInt(id, 10) + "\n")
	}
	sb.WriteString("data: ")
	sb.Write(b)
	sb.WriteString("\n\n")
	if _, err := io.WriteString(s.w, sb.String()); err != nil {
		s.broken = true
		return
	}
	s.flush()
}

func (s *sse) send(id int64, ev *streamResponse) { s.write("", id, s.encode(ev)) }

func (s *sse) error(e *rpcError) {
	event, v := s.fail(e)
	s.write(event, 0, v)
}

func (s *sse) comment() {
	if s.broken {
		return
	}
	if _, err := io.WriteString(s.w, ": keepalive\n\n"); err != nil {
		s.broken = true
		return
	}
	s.flush()
}

// acquireStream takes one of the a2a.max_streams places.
func (h *Handler) acquireStream() (func(), *rpcError) {
	select {
	case h.streams <- struct{}{}:
		h.m.streams.Inc()
		return func() { <-h.streams; h.m.streams.Dec() }, nil
	default:
		h.m.refused.Inc()
		return nil, &rpcError{code: codeServerError, http: http.StatusTooManyRequests, status: "RESOURCE_EXHAUSTED",
			reason: reasonConcurrency, domain: apierr.Domain, msg: "too many A2A streams are open on this server; retry later"}
	}
}

// lastEventID reads the client's position: the Last-Event-ID header (the SSE id of
// the last event it received). 0 when absent.
func lastEventID(r *http.Request) (int64, *rpcError) {
	v := strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, invalidParams("Last-Event-ID must be the id of an event of this task's stream (a non-negative integer)")
	}
	return n, nil
}

// follow streams a task: first the task as it is (the spec's first event), then its
// log from after onwards, mapped to status and artifact updates, until it ends (or,
// with closeOnInput, until it waits for the caller's input).
func (h *Handler) follow(ctx context.Context, t *agentplanev1.Task, after int64, s *sse, closeOnInput bool) {
	snap, rerr := h.view(ctx, t, nil, true)
	if rerr != nil {
		s.error(rerr)
		return
	}
	s.send(after, &streamResponse{Task: &snap})
	if after >= t.GetLastSequence() && (terminalState(snap.Status.State) || (closeOnInput && interruptedState(snap.Status.State))) {
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if h.o.Stopping != nil {
		defer context.AfterFunc(h.o.Stopping, cancel)()
	}
	stream, err := h.tasks.WatchTask(wctx, &agentplanev1.WatchTaskRequest{TaskId: t.GetTaskId(), AfterSequence: after})
	if err != nil {
		s.error(fromAPI(err))
		return
	}
	cur := cloneTask(t)
	id, cx := t.GetTaskId(), contextOf(t)
	drafts := map[string]bool{}
	// The interrupts raised and not yet resolved, as of the stream's position: what a
	// paused task waits for is read from the log (the state change's reason, the
	// interrupts raised before it), never from the task as it is now, so that a replay
	// says what was true then.
	open := map[string]*agentplanev1.Interrupt{}
	if after == t.GetLastSequence() {
		for _, in := range h.pendingOf(ctx, t).interrupts {
			open[in.GetInterruptId()] = in
		}
	}
	for !s.broken {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			// A stream ended by the shutdown is silent, whichever side's cancel (this
			// one's, or the server's own of WatchTask) reached it first.
			if wctx.Err() == nil && !h.stopping() {
				s.error(fromAPI(err))
			}
			return
		}
		switch k := resp.GetKind().(type) {
		case *agentplanev1.WatchTaskResponse_Keepalive:
			s.comment()
		case *agentplanev1.WatchTaskResponse_MessageDelta:
			d := k.MessageDelta
			if d.GetTextDelta() == "" {
				continue
			}
			aid := "draft-" + d.GetMessageId()
			s.send(0, &streamResponse{ArtifactUpdate: &artifactUpdate{TaskID: id, ContextID: cx, Append: drafts[aid],
				Artifact: artifact{ArtifactID: aid, Name: "draft", Parts: []part{{Text: strp(d.GetTextDelta())}}}}})
			drafts[aid] = true
		case *agentplanev1.WatchTaskResponse_Event:
			ev := k.Event
			out, end := h.mapEvent(ctx, cur, ev, open, closeOnInput)
			for i, o := range out {
				seq := int64(0)
				if i == len(out)-1 {
					seq = ev.GetSequence()
				}
				s.send(seq, o)
			}
			if end {
				return
			}
		}
	}
}

func cloneTask(t *agentplanev1.Task) *agentplanev1.Task {
	return &agentplanev1.Task{TaskId: t.GetTaskId(), State: t.GetState(), Labels: t.GetLabels(), SessionId: t.GetSessionId(),
		UpdateTime: t.GetUpdateTime(), Spec: t.GetSpec(), Failure: t.GetFailure(), CancelRequested: t.GetCancelRequested()}
}

// mapEvent maps one log event to A2A stream events; end reports that the stream is over.
func (h *Handler) mapEvent(ctx context.Context, cur *agentplanev1.Task, ev *agentplanev1.TaskEvent, open map[string]*agentplanev1.Interrupt, closeOnInput bool) ([]*streamResponse, bool) {
	id, cx := cur.GetTaskId(), contextOf(cur)
	switch p := ev.GetPayload().(type) {
	case *agentplanev1.TaskEvent_InterruptRaised:
		in := p.InterruptRaised.GetInterrupt()
		open[in.GetInterruptId()] = in
		return nil, false
	case *agentplanev1.TaskEvent_InterruptResolved:
		delete(open, p.InterruptResolved.GetInterruptId())
		return nil, false
	case *agentplanev1.TaskEvent_StateChanged:
		cur.State, cur.UpdateTime = p.StateChanged.GetToState(), ev.GetTime()
		if terminal(cur) {
			if full, err := h.tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: id, View: agentplanev1.TaskView_TASK_VIEW_BASIC}); err == nil {
				cur.Failure = full.GetTask().GetFailure()
			} else if cur.GetState() == agentplanev1.TaskState_TASK_STATE_FAILED {
				cur.Failure = &agentplanev1.TaskFailure{Reason: p.StateChanged.GetReason()}
			}
			return []*streamResponse{{StatusUpdate: &statusUpdate{TaskID: id, ContextID: cx, Status: status(cur, pending{})}}}, true
		}
		var pd pending
		if cur.GetState() == agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED {
			pd = waitingFor(p.StateChanged.GetReason(), open)
		}
		st := status(cur, pd)
		return []*streamResponse{{StatusUpdate: &statusUpdate{TaskID: id, ContextID: cx, Status: st}}}, closeOnInput && interruptedState(st.State)
	case *agentplanev1.TaskEvent_CancelRequested:
		cur.CancelRequested = true
		return []*streamResponse{{StatusUpdate: &statusUpdate{TaskID: id, ContextID: cx, Status: status(cur, pending{})}}}, false
	case *agentplanev1.TaskEvent_Message:
		m := p.Message
		if m.GetRole() != agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT || len(m.GetParts()) == 0 {
			return nil, false
		}
		st := status(cur, pending{})
		st.Message = outboundMessage(m, id, cx)
		st.Timestamp = timestamp(ev.GetTime().AsTime())
		return []*streamResponse{{StatusUpdate: &statusUpdate{TaskID: id, ContextID: cx, Status: st}}}, false
	case *agentplanev1.TaskEvent_Output:
		var out []*streamResponse
		for _, a := range outputArtifacts(p.Output) {
			out = append(out, &streamResponse{ArtifactUpdate: &artifactUpdate{TaskID: id, ContextID: cx, Artifact: a, LastChunk: true}})
		}
		return out, false
	}
	return nil, false
}

// await waits, for a blocking SendMessage, until the task ends or waits for the
// caller's input (a call waiting for a person does not end the wait), or until
// a2a.blocking_timeout; it returns the task as it then is.
func (h *Handler) await(ctx context.Context, t *agentplanev1.Task) *agentplanev1.Task {
	if h.settled(ctx, t) {
		return t
	}
	wctx, cancel := context.WithTimeout(ctx, h.o.BlockingTimeout)
	defer cancel()
	if h.o.Stopping != nil {
		defer context.AfterFunc(h.o.Stopping, cancel)()
	}
	stream, err := h.tasks.WatchTask(wctx, &agentplanev1.WatchTaskRequest{TaskId: t.GetTaskId(), AfterSequence: t.GetLastSequence()})
	if err == nil {
		cur := cloneTask(t)
		for {
			resp, err := stream.Recv()
			if err != nil {
				break
			}
			sc := resp.GetEvent().GetStateChanged()
			if sc == nil {
				continue
			}
			cur.State = sc.GetToState()
			if h.settled(ctx, cur) {
				break
			}
		}
	}
	resp, err := h.tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: t.GetTaskId(), View: agentplanev1.TaskView_TASK_VIEW_BASIC})
	if err != nil {
		return t
	}
	return resp.GetTask()
}

func (h *Handler) settled(ctx context.Context, t *agentplanev1.Task) bool {
	if terminal(t) {
		return true
	}
	if t.GetState() != agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED {
		return false
	}
	k := h.pendingOf(ctx, t).kind
	return k == waitTurnEnd || k == waitToolOutput
}

// waitingFor is what a pause waits for, from the reason of the state change that
// paused the task (tasks.StateChanged.reason) and the interrupts open at that point.
func waitingFor(reason string, open map[string]*agentplanev1.Interrupt) pending {
	ints := make([]*agentplanev1.Interrupt, 0, len(open))
	for _, in := range open {
		ints = append(ints, in)
	}
	sort.Slice(ints, func(i, j int) bool { return ints[i].GetInterruptId() < ints[j].GetInterruptId() })
	p := classify(ints)
	switch reason {
	case "turn.ended":
		p.kind = waitTurnEnd
	case "tool_output.required":
		p.kind = waitToolOutput
	case "interrupt.raised", "interrupt.pending", "task.suspended":
		p.kind = waitApproval
	}
	return p
}

// stopping reports whether the server is shutting down.
func (h *Handler) stopping() bool {
	return h.o.Stopping != nil && h.o.Stopping.Err() != nil
}
