// Package webhookstest is a webhook receiver for tests: a real HTTP server on loopback
// that checks every delivery with a Standard Webhooks verifier written from the
// specification, independently of the sender's signing code.
package webhookstest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Verify checks a delivery the way a receiver following the Standard Webhooks
// specification does: the three headers are present, the timestamp is within
// tolerance of now, and one of the space-separated "v1,<base64>" signatures is the
// HMAC-SHA256, keyed with the base64-decoded secret after "whsec_", of
// "<webhook-id>.<webhook-timestamp>.<body>", compared in constant time.
func Verify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q is not an integer", ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("webhook-timestamp %s is %s away from now", ts, d)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return fmt.Errorf("secret: %w", err)
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.", id, ts)
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		version, sig, ok := strings.Cut(s, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no signature matches")
}

// Delivery is one request the receiver got.
type Delivery struct {
	ID     string
	Header http.Header
	Body   []byte
	At     time.Time
	// Verified is nil when the signature checked out (or the receiver has no secret).
	Verified error
}

// Receiver records every delivery and answers with what Respond says (200 unless
// set).
type Receiver struct {
	URL    string
	secret string
	srv    *httptest.Server

	mu         sync.Mutex
	deliveries []Delivery
	respond    func(Delivery) int
	changed    chan struct{}
}

// New starts a receiver on 127.0.0.1, verifying signatures with secret ("" for none),
// closed when the test ends.
func New(t testing.TB, secret string) *Receiver {
	r := &Receiver{secret: secret, changed: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	r.URL = r.srv.URL
	t.Cleanup(r.srv.Close)
	return r
}

// Respond sets how the receiver answers; f may block (it runs in the handler).
func (r *Receiver) Respond(f func(Delivery) int) {
	r.mu.Lock()
	r.respond = f
	r.mu.Unlock()
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	d := Delivery{ID: req.Header.Get("webhook-id"), Header: req.Header.Clone(), Body: body, At: time.Now()}
	if r.secret != "" {
		d.Verified = Verify(r.secret, req.Header, body, time.Now(), 5*time.Minute)
	}
	r.mu.Lock()
	r.deliveries = append(r.deliveries, d)
	respond := r.respond
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	code := http.StatusOK
	if respond != nil {
		code = respond(d)
	}
	w.WriteHeader(code)
}

// Deliveries returns a copy of what was received so far, in arrival order.
func (r *Receiver) Deliveries() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.deliveries...)
}

// WaitFor waits until done holds for the deliveries so far, failing the test after
// limit.
func (r *Receiver) WaitFor(t testing.TB, limit time.Duration, what string, done func([]Delivery) bool) []Delivery {
	t.Helper()
	deadline := time.After(limit)
	for {
		r.mu.Lock()
		ds, changed := append([]Delivery(nil), r.deliveries...), r.changed
		r.mu.Unlock()
		if done(ds) {
			return ds
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("webhook receiver: %s: still waiting after %s (%d deliveries)", what, limit, len(ds))
		}
	}
}

// Serve is New on a listener the caller opened (to receive on a known address).
func Serve(t testing.TB, lis net.Listener, secret string) *Receiver {
	r := &Receiver{secret: secret, changed: make(chan struct{})}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	r.srv.Listener.Close()
	r.srv.Listener = lis
	r.srv.Start()
	r.URL = r.srv.URL
	t.Cleanup(r.srv.Close)
	return r
}
