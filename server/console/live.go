package console

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/auth"
)

// Live updates (docs/console.md#live-updates). An open inbox or task page holds one
// server-sent-event stream that says when something changed: the inbox's stream that
// an interrupt of the tenant was raised or resolved, the task's stream the sequence
// of each new event of its log. A stream carries no tenant data, only that signal
// and sequence numbers: the page then reads the change from the endpoints it polls
// without a stream (/ui/inbox/rows, /ui/tasks/{id}/events), which render it with
// html/template under the session's token. So what a stream could leak or inject is
// nothing, and the API stays the one authorization path.

// LiveOptions bounds the live streams.
type LiveOptions struct {
	// Interrupts returns a channel told (coalesced) when an interrupt of tenant is
	// raised or resolved, and its stop function (tasks.Manager.WatchInterrupts). Nil:
	// the inbox has no stream and polls.
	Interrupts func(tenant string) (<-chan struct{}, func())
	// PerSession and PerPrincipal bound the streams open at once for one session and
	// for one principal (tenant and subject) on this server.
	PerSession, PerPrincipal int
	// Heartbeat is how often an idle stream sends a comment, and how often a stream
	// checks that its session and token still stand.
	Heartbeat time.Duration
	// Registerer receives agentplane_console_open_streams.
	Registerer prometheus.Registerer
	// Stopping closes every stream when it is done (the server shutting down).
	Stopping context.Context
}

// Defaults of LiveOptions.
const (
	defaultPerSession   = 8
	defaultPerPrincipal = 64
	defaultHeartbeat    = 15 * time.Second
)

// streams counts and ends the open live streams.
type streams struct {
	opt  LiveOptions
	open *prometheus.GaugeVec

	mu          sync.Mutex
	bySession   map[string]map[*liveStream]struct{}
	byPrincipal map[string]int
}

type liveStream struct{ cancel context.CancelFunc }

func newStreams(opt LiveOptions) *streams {
	if opt.PerSession <= 0 {
		opt.PerSession = defaultPerSession
	}
	if opt.PerPrincipal <= 0 {
		opt.PerPrincipal = defaultPerPrincipal
	}
	if opt.Heartbeat <= 0 {
		opt.Heartbeat = defaultHeartbeat
	}
	m := &streams{opt: opt, bySession: map[string]map[*liveStream]struct{}{}, byPrincipal: map[string]int{},
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "agentplane", Name: "console_open_streams",
			Help: "Live-update streams (server-sent events) of console pages open on this server, by page (inbox, task).",
		}, []string{"page"})}
	m.open.WithLabelValues("inbox")
	m.open.WithLabelValues("task")
	if opt.Registerer != nil {
		opt.Registerer.MustRegister(m.open)
	}
	return m
}

// acquire takes a place for a stream of s on page, or says why not.
func (m *streams) acquire(ctx context.Context, s *session, page string) (context.Context, func(), string) {
	principal := s.Tenant + "\x00" + s.Subject
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case len(m.bySession[s.ID]) >= m.opt.PerSession:
		return nil, nil, "This session has " + strconv.Itoa(m.opt.PerSession) + " live pages open already; close some or reload later."
	case m.byPrincipal[principal] >= m.opt.PerPrincipal:
		return nil, nil, "You have " + strconv.Itoa(m.opt.PerPrincipal) + " live pages open already; close some or reload later."
	}
	ctx, cancel := context.WithCancel(ctx)
	ls := &liveStream{cancel: cancel}
	if m.bySession[s.ID] == nil {
		m.bySession[s.ID] = map[*liveStream]struct{}{}
	}
	m.bySession[s.ID][ls] = struct{}{}
	m.byPrincipal[principal]++
	m.open.WithLabelValues(page).Inc()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			cancel()
			m.mu.Lock()
			defer m.mu.Unlock()
			delete(m.bySession[s.ID], ls)
			if len(m.bySession[s.ID]) == 0 {
				delete(m.bySession, s.ID)
			}
			if m.byPrincipal[principal]--; m.byPrincipal[principal] <= 0 {
				delete(m.byPrincipal, principal)
			}
			m.open.WithLabelValues(page).Dec()
		})
	}, ""
}

// end closes the streams of session id (it signed out).
func (m *streams) end(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for ls := range m.bySession[id] {
		ls.cancel()
	}
}

// sse writes one stream's events, flushing each.
type sse struct {
	w  io.Writer
	rc *http.ResponseController
}

func openSSE(w http.ResponseWriter, retry time.Duration) (*sse, error) {
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w)}
	return s, s.write("retry: " + strconv.FormatInt(retry.Milliseconds(), 10) + "\n\n")
}

func (s *sse) write(text string) error {
	if _, err := io.WriteString(s.w, text); err != nil {
		return err
	}
	return s.rc.Flush()
}

// event writes an event whose data is a number (a sequence, or a count of changes):
// nothing a tenant wrote ever goes into a stream.
func (s *sse) event(name string, id, data int64) error {
	var b strings.Builder
	b.WriteString("event: " + name + "\n")
	if id > 0 {
		b.WriteString("id: " + strconv.FormatInt(id, 10) + "\n")
	}
	b.WriteString("data: " + strconv.FormatInt(data, 10) + "\n\n")
	return s.write(b.String())
}

// liveRetry is the reconnection delay the streams ask of EventSource.
const liveRetry = 2 * time.Second

// live wraps a stream's handler: a session is required (the page that opens the
// stream set it; without one the answer is 401, never a redirect, so that the page's
// EventSource fails and the page falls back to polling, whose answer signs it out),
// the token must still be accepted (GetCapabilities names the tenant the stream
// follows), and the stream takes a place within the limits. The stream's context ends
// at the session's expiry, at its sign-out, and when the server stops.
func (h *Handler) live(page string, fn func(ctx context.Context, w http.ResponseWriter, r *http.Request, s *session, tick <-chan time.Time) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := h.sessions.read(r)
		if s == nil || (h.opt.MultiTenant && s.Token == "") {
			http.Error(w, "console: no session; reload the page", http.StatusUnauthorized)
			return
		}
		caps, err := h.caps.GetCapabilities(h.call(r, s), &agentplanev1.GetCapabilitiesRequest{})
		if err != nil {
			h.liveRefuse(w, err)
			return
		}
		p := caps.GetCapabilities().GetPrincipal()
		s.Tenant, s.Subject = p.GetTenant(), p.GetSubject()
		ctx, release, refused := h.streams.acquire(r.Context(), s, page)
		if refused != "" {
			w.Header().Set("Retry-After", "30")
			http.Error(w, refused, http.StatusTooManyRequests)
			return
		}
		defer release()
		ctx, cancel := context.WithDeadline(ctx, s.Expires)
		defer cancel()
		if h.opt.Live.Stopping != nil {
			defer context.AfterFunc(h.opt.Live.Stopping, cancel)()
		}
		r = r.WithContext(ctx)
		t := time.NewTicker(h.streams.opt.Heartbeat)
		defer t.Stop()
		// Each heartbeat checks again that the session was not signed out elsewhere in
		// this process and that the API still accepts its token.
		tick := make(chan time.Time)
		go func() {
			for {
				select {
				case now := <-t.C:
					if h.sessions.read(r) == nil {
						cancel()
						return
					}
					if _, err := h.caps.GetCapabilities(h.call(r, s), &agentplanev1.GetCapabilitiesRequest{}); status.Code(err) == codes.Unauthenticated {
						cancel()
						return
					}
					select {
					case tick <- now:
					case <-ctx.Done():
						return
					}
				case <-ctx.Done():
					return
				}
			}
		}()
		if err := fn(ctx, w, r, s, tick); err != nil && ctx.Err() == nil {
			h.opt.Log.Debug("console: live stream ended", "page", page, "err", err)
		}
	}
}

// liveRefuse answers a stream the API refused before it started, as plain text with
// the API's HTTP status (401 for a token no longer accepted).
func (h *Handler) liveRefuse(w http.ResponseWriter, err error) {
	e := fromAPI(err)
	if e.Status >= 500 {
		h.opt.Log.Warn("console: live stream refused", "code", e.Code, "err", err)
	}
	if e.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "30")
	}
	http.Error(w, "console: "+e.Message, e.Status)
}

// inboxLive streams "inbox" events: one after each change to the tenant's interrupts
// (a burst of them is one event when the page is slower than the burst).
func (h *Handler) inboxLive(ctx context.Context, w http.ResponseWriter, r *http.Request, s *session, tick <-chan time.Time) error {
	if h.opt.Live.Interrupts == nil || s.Tenant == auth.AllTenants {
		// A principal of every tenant (an admin) has no one tenant's taps: its inbox polls.
		http.Error(w, "console: no live inbox here; the page polls", http.StatusNotFound)
		return nil
	}
	changed, stop := h.opt.Live.Interrupts(s.Tenant)
	defer stop()
	out, err := openSSE(w, liveRetry)
	if err != nil {
		return err
	}
	var n int64
	for {
		select {
		case <-changed:
			n++
			if err := out.event("inbox", 0, n); err != nil {
				return err
			}
		case <-tick:
			if err := out.write(": keepalive\n\n"); err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// taskLive streams a task's log as "task" events, each the sequence of an event
// (also its SSE id), from after ?after= or the Last-Event-ID a reconnecting
// EventSource sends; "end" after the event that ends the task. It follows the task
// with WatchTask under the session's token: the API's tenant check and its
// limits.max_watches_per_principal apply.
func (h *Handler) taskLive(ctx context.Context, w http.ResponseWriter, r *http.Request, s *session, tick <-chan time.Time) error {
	after, _ := parseInt(r.URL.Query().Get("after"))
	if id, err := parseInt(strings.TrimSpace(r.Header.Get("Last-Event-ID"))); err == nil && id > after {
		after = id
	}
	if after < 0 {
		after = 0
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := h.tasks.WatchTask(h.call(r, s), &agentplanev1.WatchTaskRequest{TaskId: r.PathValue("id"), AfterSequence: after})
	if err != nil {
		h.liveRefuse(w, err)
		return nil
	}
	type msg struct {
		m   *agentplanev1.WatchTaskResponse
		err error
	}
	first, err := st.Recv() // the API's refusal (not found, limits) comes before any event
	if err != nil && err != io.EOF {
		h.liveRefuse(w, err)
		return nil
	}
	out, werr := openSSE(w, liveRetry)
	if werr != nil {
		return werr
	}
	if err == io.EOF {
		return out.event("end", 0, after)
	}
	// One goroutine receives (Recv blocks); its channel holds one message, so a slow
	// page holds the gRPC stream's flow control, and the API's watcher catches up from
	// the store: memory stays bounded.
	msgs := make(chan msg, 1)
	msgs <- msg{m: first}
	go func() {
		for {
			m, err := st.Recv()
			select {
			case msgs <- msg{m, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		select {
		case m := <-msgs:
			if m.err == io.EOF {
				return out.event("end", 0, after)
			}
			if m.err != nil {
				return m.err // the page reconnects from the last id
			}
			if ev := m.m.GetEvent(); ev != nil {
				after = ev.GetSequence()
				if err := out.event("task", after, after); err != nil {
					return err
				}
			}
		case <-tick:
			if err := out.write(": keepalive\n\n"); err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
}
