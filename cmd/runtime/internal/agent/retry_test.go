package agent

import (
	"net/http"
	"testing"
	"time"
)

// TestRetryAfter: the wait a failed answer asks for, in each form servers send it;
// absurd values stand for "longer than the runtime waits".
func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		headers map[string]string
		want    time.Duration
		ok      bool
	}{
		{headers: nil},
		{headers: map[string]string{"Retry-After": "2"}, want: 2 * time.Second, ok: true},
		{headers: map[string]string{"Retry-After": "0.5"}, want: 500 * time.Millisecond, ok: true},
		{headers: map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, want: 250 * time.Millisecond, ok: true},
		{headers: map[string]string{"Retry-After": "1e300"}, want: 24 * time.Hour, ok: true},
		{headers: map[string]string{"Retry-After": "-1"}},
		{headers: map[string]string{"Retry-After": "soon"}},
		{headers: map[string]string{"Retry-After": time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)}, want: 0, ok: true},
	} {
		res := &http.Response{Header: http.Header{}}
		for k, v := range tc.headers {
			res.Header.Set(k, v)
		}
		if got, ok := retryAfter(res); got != tc.want || ok != tc.ok {
			t.Errorf("%v: %v %v, want %v %v", tc.headers, got, ok, tc.want, tc.ok)
		}
	}
}
