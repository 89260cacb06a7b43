package webhooks

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/store/storetest"
)

// The wait after the n-th failed attempt doubles from initial_backoff up to
// max_backoff and is jittered into [d/2, d], also after very many attempts (where
// doubling on without the cap would overflow).
//
// Mutants: backoff's loop condition as ||, its jitter's halving changed.
func TestBackoffDoublesUpToTheCap(t *testing.T) {
	s := &Service{cfg: config.Notifications{InitialBackoff: config.Duration(time.Second), MaxBackoff: config.Duration(time.Minute)}}
	for attempts, d := range map[int32]time.Duration{
		1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 6: 32 * time.Second, 7: time.Minute, 100: time.Minute, 1 << 30: time.Minute,
	} {
		for range 200 {
			if got := s.backoff(attempts); got < d/2 || got > d {
				t.Fatalf("backoff(%d) = %s, want within [%s, %s]", attempts, got, d/2, d)
			}
		}
	}
}

// The text of a Slack message says what happened: an expired approval as expired, a
// failed task with its failure message, and nothing dangling when there is none.
//
// Mutants: the expired verb's condition flipped, the failure message's condition as ||.
func TestSlackTextSaysWhatHappened(t *testing.T) {
	text := func(m Message) string {
		t.Helper()
		payload, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		body, err := slackBody(payload)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatal(err)
		}
		return out.Text
	}
	for _, c := range []struct {
		m         Message
		want, not string
	}{
		{Message{Type: config.EventInterruptExpired, Data: Data{Tenant: "acme", TaskID: "t1", Tool: "refund"}}, "Approval expired: `refund` on task `t1`", "resolved"},
		{Message{Type: config.EventInterruptResolved, Data: Data{Tenant: "acme", TaskID: "t1", Tool: "refund"}}, "Approval resolved: `refund` on task `t1`", "expired"},
		{Message{Type: config.EventTaskEnded, Data: Data{Tenant: "acme", TaskID: "t1", State: "failed", Failure: &Failure{Reason: "model.error", Message: "no model"}}}, "Task `t1` failed: `no model`", ""},
		{Message{Type: config.EventTaskEnded, Data: Data{Tenant: "acme", TaskID: "t1", State: "failed", Failure: &Failure{Reason: "model.error"}}}, "Task `t1` failed [tenant `acme`]", "failed:"},
	} {
		got := text(c.m)
		if !strings.Contains(got, c.want) || (c.not != "" && strings.Contains(got, c.not)) {
			t.Errorf("%s: text %q, want %q", c.m.Type, got, c.want)
		}
	}
}

// An interrupt's notification carries its deadline when it has one, and none when it
// has none.
//
// Mutant: interruptData's deadline condition flipped.
func TestInterruptDataDeadline(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := storetest.Interrupt("acme", "t1", "i1", at)
	rec.Interrupt.Deadline = nil
	if d := interruptData(rec, ""); d.Deadline != nil {
		t.Errorf("no deadline, yet the data says %v", d.Deadline)
	}
	rec.Interrupt.Deadline = timestamppb.New(at.Add(time.Hour))
	if d := interruptData(rec, ""); d.Deadline == nil || !d.Deadline.Equal(at.Add(time.Hour)) {
		t.Errorf("deadline %v, want %v", d.Deadline, at.Add(time.Hour))
	}
}
