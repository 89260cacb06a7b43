package server

import "testing"

// TestLoggedPathHidesLinkTokens: the guard's log line of a refused request never
// holds an approval link's token (a capability); other paths are logged as they are.
func TestLoggedPathHidesLinkTokens(t *testing.T) {
	for in, want := range map[string]string{
		"/hitl/links/eyJ2IjoxfQ.c2ln": "/hitl/links/…",
		"/hitl/slack/interactions":    "/hitl/slack/interactions",
		"/ui/interrupts/in-1":         "/ui/interrupts/in-1",
		"/v1/interrupts/in-1:resolve": "/v1/interrupts/in-1:resolve",
	} {
		if got := loggedPath(in); got != want {
			t.Errorf("loggedPath(%q) = %q, want %q", in, got, want)
		}
	}
}
