package tasks

import (
	"testing"
	"time"
)

func TestIDsSortByCreation(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	seen := map[string]bool{}
	prev := newIDAt(at)
	for i := range 1000 {
		id := newIDAt(at.Add(time.Duration(i) * time.Millisecond))
		if len(id) != 26 || seen[id] {
			t.Fatalf("id %q: wrong length or repeated", id)
		}
		if i > 0 && id <= prev {
			t.Fatalf("id %q created a millisecond later sorts before %q", id, prev)
		}
		seen[id] = true
		prev = id
	}
}
