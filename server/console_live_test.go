package server_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
)

// liveStream is an open server-sent-event stream of the console, read line by line.
type liveStream struct {
	t      *testing.T
	resp   *http.Response
	lines  chan string
	closed chan struct{}
	cancel context.CancelFunc
}

// openLive opens path as u's browser would (its cookie, Accept: text/event-stream,
// header pairs), and returns the stream, or the refusal's response with a nil stream.
func (u *uiClient) openLive(path string, header ...string) (*liveStream, *http.Response) {
	u.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u.base+path, nil)
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if u.cookie != nil {
		req.AddCookie(u.cookie)
	}
	resp, err := u.hc.Do(req)
	if err != nil {
		cancel()
		u.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		cancel()
		return nil, resp
	}
	s := &liveStream{t: u.t, resp: resp, lines: make(chan string, 1024), closed: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(s.closed)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	u.t.Cleanup(s.close)
	return s, resp
}

func (s *liveStream) close() { s.cancel(); s.resp.Body.Close() }

// next returns the next line that match accepts, failing the test after
// testutil.WaitLimit (a bound, not a measurement) or when the stream ends.
func (s *liveStream) next(what string, match func(string) bool) string {
	s.t.Helper()
	timeout := time.After(testutil.WaitLimit)
	for {
		select {
		case l := <-s.lines:
			if match(l) {
				return l
			}
		case <-s.closed:
			s.t.Fatalf("%s: the stream ended", what)
		case <-timeout:
			s.t.Fatalf("%s: not within %v", what, testutil.WaitLimit)
		}
	}
}

// until collects the lines up to the n-th keepalive comment.
func (s *liveStream) until(n int) []string {
	s.t.Helper()
	var got []string
	for n > 0 {
		l := s.next("a keepalive", func(string) bool { return true })
		if l == ": keepalive" {
			n--
		}
		got = append(got, l)
	}
	return got
}

// ended waits for the server to end the stream.
func (s *liveStream) ended(what string) {
	s.t.Helper()
	timeout := time.After(testutil.WaitLimit)
	for {
		select {
		case <-s.lines:
		case <-s.closed:
			return
		case <-timeout:
			s.t.Fatalf("%s: the stream is still open after %v", what, testutil.WaitLimit)
		}
	}
}

func prefix(p string) func(string) bool {
	return func(l string) bool { return strings.HasPrefix(l, p) }
}

func liveConfig(c *config.Config) {
	c.Limits.StreamKeepaliveInterval = config.Duration(time.Second)
	c.Limits.MaxWatchesPerPrincipal = 3
}

func TestConsoleLiveInbox(t *testing.T) {
	mt := startMultiTenant(t, []string{"acme", "globex"}, liveConfig)
	addr := mt.in.HTTPAddr

	t.Run("no session is refused", func(t *testing.T) {
		for _, p := range []string{"/ui/inbox/live", "/ui/tasks/x/live"} {
			_, resp := newUI(t, addr).openLive(p)
			wantStatus(t, p+" without a session", resp, http.StatusUnauthorized, "")
			u := newUI(t, addr)
			u.get("/ui/signin") // an anonymous session: not signed in
			_, resp = u.openLive(p)
			wantStatus(t, p+" with an anonymous session", resp, http.StatusUnauthorized, "")
		}
	})

	acme := signIn(t, addr, mt.by["acme"][auth.RoleApprover])
	globex := signIn(t, addr, mt.by["globex"][auth.RoleApprover])
	a, _ := acme.openLive("/ui/inbox/live")
	g, _ := globex.openLive("/ui/inbox/live")
	if ct := a.resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	if csp := a.resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Fatalf("the stream lacks the console's CSP: %q", csp)
	}
	a.next("retry", prefix("retry: "))
	g.next("retry", prefix("retry: "))
	a.until(1) // both streams are subscribed: a heartbeat came after the subscription
	g.until(1)

	t.Run("an interrupt of the tenant is pushed; another tenant hears nothing", func(t *testing.T) {
		_, in := raiseInterrupt(t, mt, "acme")
		a.next("acme's inbox event", prefix("event: inbox"))
		data := a.next("its data", prefix("data: "))
		if _, err := strconv.Atoi(strings.TrimPrefix(data, "data: ")); err != nil {
			t.Fatalf("the event carries %q, want a number only", data)
		}
		for _, l := range g.until(2) {
			if strings.HasPrefix(l, "event:") || strings.Contains(l, in.GetInterruptId()) {
				t.Fatalf("globex's stream got %q after acme's interrupt", l)
			}
		}
		// Resolving it is a change of the inbox too.
		if _, err := mt.by["acme"][auth.RoleApprover].c.Hitl.ResolveInterrupt(context.Background(), &agentplanev1.ResolveInterruptRequest{
			InterruptId: in.GetInterruptId(), Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}},
		}); err != nil {
			t.Fatal(err)
		}
		a.next("acme's inbox event for the decision", prefix("event: inbox"))
	})

	t.Run("limits per principal, and the gauge", func(t *testing.T) {
		// limits.max_watches_per_principal is 3: a holds one place; two more sessions of
		// the same principal take the rest.
		for i := range 2 {
			if s, resp := signIn(t, addr, mt.by["acme"][auth.RoleApprover]).openLive("/ui/inbox/live"); s == nil {
				t.Fatalf("stream %d: %d", i+2, resp.StatusCode)
			}
		}
		_, resp := signIn(t, addr, mt.by["acme"][auth.RoleApprover]).openLive("/ui/inbox/live")
		wantStatus(t, "a fourth stream of acme's approver", resp, http.StatusTooManyRequests, "")
		if resp.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
		if s, resp := signIn(t, addr, mt.by["acme"][auth.RoleUser]).openLive("/ui/inbox/live"); s == nil {
			t.Fatalf("another principal of acme is refused: %d", resp.StatusCode)
		}
		m := adminMetrics(t, mt)
		if !strings.Contains(m, `agentplane_console_open_streams{page="inbox"} 5`+"\n") {
			t.Fatalf("/metrics lacks 5 open inbox streams:\n%s", grepLines(m, "console_open_streams"))
		}
	})

	t.Run("sign-out ends the session's streams", func(t *testing.T) {
		u := signIn(t, addr, mt.by["globex"][auth.RoleUser])
		s, _ := u.openLive("/ui/inbox/live")
		s.next("retry", prefix("retry: "))
		cookie := u.cookie
		u.get("/ui/inbox") // the session's CSRF token
		resp, _ := u.post("/ui/signout", url.Values{})
		wantStatus(t, "sign-out", resp, http.StatusSeeOther, "/ui/signin")
		s.ended("after sign-out")
		u.cookie = cookie // the replayed cookie opens nothing
		_, resp = u.openLive("/ui/inbox/live")
		wantStatus(t, "a stream with a signed-out cookie", resp, http.StatusUnauthorized, "")
	})
}

func TestConsoleLiveTask(t *testing.T) {
	mt := startMultiTenant(t, []string{"acme", "globex"}, liveConfig)
	addr := mt.in.HTTPAddr
	taskID, _, lease := raiseInterruptLeased(t, mt, "acme")
	acme := signIn(t, addr, mt.by["acme"][auth.RoleUser])

	t.Run("another tenant's task is not found", func(t *testing.T) {
		_, resp := signIn(t, addr, mt.by["globex"][auth.RoleApprover]).openLive("/ui/tasks/" + taskID + "/live?after=0")
		wantStatus(t, "globex following acme's task", resp, http.StatusNotFound, "")
	})

	got, err := mt.by["acme"][auth.RoleUser].c.Tasks.GetTask(context.Background(), &agentplanev1.GetTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	last := got.GetTask().GetLastSequence()

	t.Run("replay, live events, heartbeat", func(t *testing.T) {
		s, resp := acme.openLive("/ui/tasks/" + taskID + "/live?after=0")
		if s == nil {
			t.Fatalf("status %d", resp.StatusCode)
		}
		for seq := int64(1); seq <= last; seq++ {
			s.next("event "+strconv.FormatInt(seq, 10), prefix("event: task"))
			if id := s.next("its id", prefix("id: ")); id != "id: "+strconv.FormatInt(seq, 10) {
				t.Fatalf("got %q, want id %d", id, seq)
			}
		}
		s.until(1)
		note(t, mt, lease)
		s.next("the live event", prefix("event: task"))
		if id := s.next("its id", prefix("id: ")); id != "id: "+strconv.FormatInt(last+1, 10) {
			t.Fatalf("got %q, want id %d", id, last+1)
		}
	})

	t.Run("resume with Last-Event-ID", func(t *testing.T) {
		s, resp := acme.openLive("/ui/tasks/"+taskID+"/live?after=0", "Last-Event-ID", strconv.FormatInt(last, 10))
		if s == nil {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if id := s.next("the first event after Last-Event-ID", prefix("id: ")); id != "id: "+strconv.FormatInt(last+1, 10) {
			t.Fatalf("got %q, want id %d", id, last+1)
		}
	})
}

// note has the runtime report a note on its task: one more event.
func note(t *testing.T, mt *multiTenant, lease *agentplanev1.LeaseRef) {
	t.Helper()
	if _, err := mt.by["acme"][auth.RoleRuntime].c.Runtime.ReportEvents(context.Background(), &agentplanev1.ReportEventsRequest{
		Lease: lease, Events: []*agentplanev1.RuntimeEvent{{Payload: &agentplanev1.RuntimeEvent_Note{Note: &agentplanev1.RuntimeNote{Text: "hi"}}}},
	}); err != nil {
		t.Fatal(err)
	}
}

func adminMetrics(t *testing.T, mt *multiTenant) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+mt.in.HTTPAddr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+mt.admin.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
