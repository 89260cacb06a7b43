package console

import (
	"bytes"
	"context"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

//go:embed assets
var assets embed.FS

// Options configures New.
type Options struct {
	// Conn reaches the API in process (the gRPC server with every interceptor).
	Conn grpc.ClientConnInterface
	// MultiTenant is auth.require_principal: sign-in with a bearer token is required.
	MultiTenant bool
	// Key seals session cookies (32 bytes, see LoadKey).
	Key []byte
	// TTL is how long a sign-in lasts.
	TTL time.Duration
	// Secure marks cookies Secure (the listener serves TLS).
	Secure bool
	Log    *slog.Logger
	// Live bounds and feeds the pages' live updates (live.go).
	Live LiveOptions
}

// Handler serves the console under /ui/.
type Handler struct {
	opt      Options
	sessions *sessions
	pages    map[string]*template.Template
	mux      *http.ServeMux

	tasks agentplanev1.TaskServiceClient
	hitl  agentplanev1.HitlServiceClient
	caps  agentplanev1.CapabilityServiceClient

	schedules agentplanev1.ScheduleServiceClient

	streams *streams // the open live-update streams (live.go)
}

// New returns the console's handler, to be mounted at /ui/.
func New(opt Options) (*Handler, error) {
	sess, err := newSessions(opt.Key, opt.TTL, opt.Secure)
	if err != nil {
		return nil, err
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	h := &Handler{opt: opt, sessions: sess, pages: map[string]*template.Template{}, mux: http.NewServeMux(),
		tasks:     agentplanev1.NewTaskServiceClient(opt.Conn),
		hitl:      agentplanev1.NewHitlServiceClient(opt.Conn),
		caps:      agentplanev1.NewCapabilityServiceClient(opt.Conn),
		schedules: agentplanev1.NewScheduleServiceClient(opt.Conn), streams: newStreams(opt.Live)}
	sess.ended = h.streams.end // a sign-out closes the session's streams
	layout := template.Must(template.New("").Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/fragments.html"))
	for _, p := range []string{"signin", "inbox", "interrupt", "tasks", "task", "schedules", "schedule", "capabilities", "error"} {
		t := template.Must(template.Must(layout.Clone()).ParseFS(assets, "assets/"+p+".html"))
		h.pages[p] = t
	}
	h.pages["fragments"] = layout
	static, _ := fs.Sub(assets, "assets/static")
	h.mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", staticFiles(http.FileServerFS(static))))
	h.mux.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/inbox", http.StatusSeeOther)
	})
	h.mux.HandleFunc("GET /ui/signin", h.signinPage)
	h.mux.HandleFunc("POST /ui/signin", h.signin)
	h.mux.HandleFunc("POST /ui/signout", h.with(h.signout))
	h.mux.HandleFunc("GET /ui/inbox", h.with(h.inbox))
	h.mux.HandleFunc("GET /ui/inbox/rows", h.with(h.inboxRows))
	h.mux.HandleFunc("GET /ui/inbox/live", h.live("inbox", h.inboxLive))
	h.mux.HandleFunc("GET /ui/interrupts/{id}", h.with(h.interrupt))
	h.mux.HandleFunc("POST /ui/interrupts/{id}", h.with(h.resolve))
	h.mux.HandleFunc("GET /ui/tasks", h.with(h.taskList))
	h.mux.HandleFunc("GET /ui/tasks/{id}", h.with(h.task))
	h.mux.HandleFunc("GET /ui/tasks/{id}/events", h.with(h.taskEvents))
	h.mux.HandleFunc("GET /ui/tasks/{id}/live", h.live("task", h.taskLive))
	h.mux.HandleFunc("POST /ui/tasks/{id}/continue", h.with(h.continueTask))
	h.mux.HandleFunc("GET /ui/schedules", h.with(h.scheduleList))
	h.mux.HandleFunc("GET /ui/schedules/{id}", h.with(h.schedule))
	h.mux.HandleFunc("GET /ui/capabilities", h.with(h.capabilities))
	h.mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		h.render(w, r, http.StatusNotFound, "error", &page{Title: "Not found", Err: &apiError{Status: 404, Message: "There is no console page at " + r.URL.Path + "."}})
	})
	return h, nil
}

// ServeHTTP sets the security headers every answer carries, then routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	if h.opt.Secure {
		hd.Set("Strict-Transport-Security", "max-age=31536000")
	}
	if !strings.HasPrefix(r.URL.Path, "/ui/static/") {
		hd.Set("Cache-Control", "no-store")
	}
	h.mux.ServeHTTP(w, r)
}

// staticFiles lets browsers keep the script and style sheet for an hour; they hold
// nothing of a tenant's.
func staticFiles(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		next.ServeHTTP(w, r)
	})
}

// page is what every template receives.
type page struct {
	Title       string
	Nav         string
	S           *session
	MultiTenant bool
	Notice      string
	Err         *apiError
	Data        any
}

// with resolves the request's session and refuses what it must: no session, or not
// signed in when the deployment is multi-tenant (GET: to the sign-in page), a POST
// without the session's CSRF token. A POST from another origin or through a Host the
// deployment does not serve never gets here: the HTTP guard in front of every
// handler (server/httpguard.go) refuses it, and the console relies on that one check.
func (h *Handler) with(fn func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := h.sessions.read(r)
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if s == nil || (h.opt.MultiTenant && s.Token == "") {
				h.render(w, r, http.StatusForbidden, "error", &page{Title: "Signed out", Err: &apiError{Status: 403, Reason: "console.session",
					Message: "Your session has ended. Sign in again, then repeat the change."}})
				return
			}
			if !checkCSRF(r, s) {
				h.opt.Log.Warn("console: refused a change without its CSRF token",
					"path", r.URL.Path, "subject", s.Subject, "tenant", s.Tenant, "remote", r.RemoteAddr,
					"origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
				h.render(w, r, http.StatusForbidden, "error", &page{Title: "Refused", S: s, Err: &apiError{Status: 403, Reason: "console.csrf",
					Message: "The form's CSRF token is missing or does not match your session. Reload the page and try again."}})
				return
			}
		}
		if s == nil || (h.opt.MultiTenant && s.Token == "") {
			if h.opt.MultiTenant {
				to := "/ui/signin"
				if next := r.URL.RequestURI(); safeNext(next) && next != "/ui/inbox" && r.Header.Get("Accept") != "application/json" {
					to += "?next=" + url.QueryEscape(next) // a link from a notification opens after sign-in
				}
				http.Redirect(w, r, to, http.StatusSeeOther)
				return
			}
			// Single-user: the owner, no sign-in; the session carries the CSRF token.
			s = h.sessions.fresh()
			if caps, err := h.caps.GetCapabilities(r.Context(), &agentplanev1.GetCapabilitiesRequest{}); err == nil {
				p := caps.GetCapabilities().GetPrincipal()
				s.Subject, s.Tenant, s.Roles = p.GetSubject(), p.GetTenant(), p.GetRoles()
			}
			h.sessions.write(w, s)
		}
		fn(w, r, s)
	}
}

// safeNext reports whether next is a console page to return to after sign-in: a
// path of this console, never another site ("//host", "/\\host") or the sign-in itself.
func safeNext(next string) bool {
	return strings.HasPrefix(next, "/ui/") && !strings.HasPrefix(next, "/ui/signin") && len(next) <= 2048 &&
		!strings.ContainsAny(next, "\\\r\n") && !strings.Contains(next, "//")
}

// maxFormBytes bounds a POSTed form (an edit holds a tool's arguments).
const maxFormBytes = 1 << 20

// call returns the context for an API call as s: its bearer token, when it has one.
func (h *Handler) call(r *http.Request, s *session) context.Context {
	ctx := r.Context()
	if s != nil && s.Token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+s.Token)
	}
	return ctx
}

// apiError is an API error as a page shows it.
type apiError struct {
	Status     int
	Code       string
	Reason     string
	Message    string
	Violations []violation
}

type violation struct{ Field, Description string }

// fromAPI reads a gRPC status: code, ErrorInfo reason and BadRequest violations.
func fromAPI(err error) *apiError {
	st, ok := status.FromError(err)
	if !ok { // not the API's answer: the console's own failure, told in the log only
		return &apiError{Status: http.StatusInternalServerError, Code: codes.Internal.String(), Message: "the console failed; the server log says why"}
	}
	e := &apiError{Status: runtime.HTTPStatusFromCode(st.Code()), Code: st.Code().String(), Message: st.Message()}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			e.Reason = d.GetReason()
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				e.Violations = append(e.Violations, violation{v.GetField(), v.GetDescription()})
			}
		}
	}
	return e
}

// fail renders an API error as the page answer. An UNAUTHENTICATED answer in
// multi-tenant mode means the token is no longer configured: the session ends.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	if h.opt.MultiTenant && status.Code(err) == codes.Unauthenticated {
		h.sessions.revoke(w, s)
		http.Redirect(w, r, "/ui/signin", http.StatusSeeOther)
		return
	}
	e := fromAPI(err)
	if e.Status >= 500 {
		h.opt.Log.Warn("console: page failed", "path", r.URL.Path, "code", e.Code, "err", err)
	}
	h.render(w, r, e.Status, "error", &page{Title: "Error", S: s, Err: e})
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, code int, name string, p *page) {
	p.MultiTenant = h.opt.MultiTenant
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		h.opt.Log.Error("console: template", "page", name, "err", err)
		http.Error(w, "console: page failed to render", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// fragment renders a named template of fragments.html to a string (for live updates).
func (h *Handler) fragment(name string, data any) (string, error) {
	var buf bytes.Buffer
	err := h.pages["fragments"].ExecuteTemplate(&buf, name, data)
	return buf.String(), err
}
