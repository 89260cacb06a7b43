package pgstore

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/server/store"
)

// TestNoticesStayUnderThePayloadLimit: a transaction's changes are one notice when they
// fit, split over several each under PostgreSQL's 8000 bytes when they do not, every
// change in exactly one of them, and one notice with All past maxNotices.
func TestNoticesStayUnderThePayloadLimit(t *testing.T) {
	build := func(n int) []change {
		var cs []change
		for i := range n {
			cs = append(cs, change{kind: store.ChangeEvents, a: "acme", b: fmt.Sprintf("%s-%04d", strings.Repeat("t", 200), i)})
		}
		return append(cs, change{kind: store.ChangeQueued, a: "gpu"},
			change{kind: store.ChangeDecided, a: "acme", b: "i1"}, change{kind: store.ChangeDeadline})
	}
	decode := func(ps []string) (got map[change]int, all bool) {
		got = map[change]int{}
		for _, p := range ps {
			if len(p) >= 8000 {
				t.Fatalf("a notice of %d bytes; PostgreSQL refuses 8000 or more", len(p))
			}
			var n notice
			if err := json.Unmarshal([]byte(p), &n); err != nil || n.Replica != "r1" {
				t.Fatalf("notice %q: %v", p, err)
			}
			all = all || n.All
			for i := 0; i+1 < len(n.Events); i += 2 {
				got[change{kind: store.ChangeEvents, a: n.Events[i], b: n.Events[i+1]}]++
			}
			for _, q := range n.Queues {
				got[change{kind: store.ChangeQueued, a: q}]++
			}
			for i := 0; i+1 < len(n.Decided); i += 2 {
				got[change{kind: store.ChangeDecided, a: n.Decided[i], b: n.Decided[i+1]}]++
			}
			if n.Deadline {
				got[change{kind: store.ChangeDeadline}]++
			}
		}
		return got, all
	}
	if ps := notices("r1", build(3)); len(ps) != 1 {
		t.Fatalf("3 tasks' changes in %d notices, want 1", len(ps))
	}
	cs := build(100) // about 22 kB
	ps := notices("r1", cs)
	if len(ps) < 3 || len(ps) > maxNotices {
		t.Fatalf("100 tasks' changes in %d notices, want 3 to %d", len(ps), maxNotices)
	}
	got, all := decode(ps)
	if all || len(got) != len(cs) {
		t.Fatalf("decoded %d changes (all %v), want the %d sent", len(got), all, len(cs))
	}
	for _, c := range cs {
		if got[c] != 1 {
			t.Fatalf("change %+v in %d notices, want 1", c, got[c])
		}
	}
	ps = notices("r1", build(1000)) // about 220 kB: past maxNotices
	if got, all := decode(ps); len(ps) != 1 || !all || len(got) != 0 {
		t.Fatalf("1000 tasks' changes gave %d notices (all %v, %d named), want one notice with All", len(ps), all, len(got))
	}
	if ps := notices("r1", nil); ps != nil {
		t.Fatalf("no changes gave notices %q", ps)
	}
}
