package console

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// capsConn answers GetCapabilities (every principal is ann of acme); no other call.
type capsConn struct{}

func (capsConn) Invoke(_ context.Context, method string, _, reply any, _ ...grpc.CallOption) error {
	if method != agentplanev1.CapabilityService_GetCapabilities_FullMethodName {
		return errors.New("unexpected call " + method)
	}
	reply.(*agentplanev1.GetCapabilitiesResponse).Capabilities = &agentplanev1.Capabilities{
		Principal: &agentplanev1.Principal{Subject: "ann", Tenant: "acme"}}
	return nil
}

func (capsConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, errors.New("no streams")
}

// liveHandler is a console whose sessions last ttl; the inbox streams it opens get
// their channels from feeds, in order.
func liveHandler(t *testing.T, ttl time.Duration, perSession int) (*Handler, *session, chan chan struct{}) {
	t.Helper()
	feeds := make(chan chan struct{}, 16)
	h, err := New(Options{Conn: capsConn{}, MultiTenant: true, Key: make([]byte, 32), TTL: ttl,
		Live: LiveOptions{PerSession: perSession, Heartbeat: 50 * time.Millisecond,
			Interrupts: func(string) (<-chan struct{}, func()) {
				feed := make(chan struct{}, 1)
				feeds <- feed
				return feed, func() {}
			}}})
	if err != nil {
		t.Fatal(err)
	}
	s := h.sessions.fresh()
	s.Token = "apt_x"
	return h, s, feeds
}

// openInbox starts a GET /ui/inbox/live for s on srv; its lines arrive on the channel,
// closed when the stream ends.
func openInbox(t *testing.T, h *Handler, srv *httptest.Server, s *session) (*http.Response, <-chan string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/ui/inbox/live", nil)
	for _, c := range carry(h.sessions, s).Cookies() {
		req.AddCookie(c)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 256)
	go func() {
		defer close(lines)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return resp, lines
}

func TestLivePerSessionLimitAndHeartbeat(t *testing.T) {
	h, s, feeds := liveHandler(t, time.Hour, 2)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close) // after t.Context ends the streams
	var streams []<-chan string
	for range 2 {
		resp, lines := openInbox(t, h, srv, s)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		streams = append(streams, lines)
	}
	resp, _ := openInbox(t, h, srv, s)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a third stream of one session: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	(<-feeds) <- struct{}{} // the first stream's
	var got []string
	for l := range streams[0] {
		got = append(got, l)
		if l == ": keepalive" && strings.Contains(strings.Join(got, "\n"), "event: inbox\ndata: 1") {
			break
		}
	}
	if got[0] != "retry: 2000" {
		t.Fatalf("stream opens with %q", got[0])
	}
}

func TestLiveEndsAtSessionExpiry(t *testing.T) {
	h, s, _ := liveHandler(t, time.Hour, 0)
	s.Expires = time.Now().Add(300 * time.Millisecond)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close) // after t.Context ends the streams
	resp, lines := openInbox(t, h, srv, s)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for range lines { // ends when the server closes the stream
	}
	if time.Now().Before(s.Expires) {
		t.Fatal("the stream ended before the session's expiry")
	}
}
