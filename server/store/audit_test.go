package store

import (
	"testing"
	"time"
)

// TestNewAuditIDSortsAsWritten: ids have one length, carry the time they were made
// at, and increase within a process even when the clock does not.
func TestNewAuditIDSortsAsWritten(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	a, b := NewAuditID(at), NewAuditID(at)
	later := NewAuditID(at.Add(time.Second))
	earlier := NewAuditID(at.Add(-time.Hour)) // the clock went back
	if !(a < b && b < later && later < earlier) || len(a) != len(later) || len(a) != len(earlier) {
		t.Fatalf("ids %s %s %s %s", a, b, later, earlier)
	}
	if a[:len(AuditIDPrefix(at))] != AuditIDPrefix(at) {
		t.Fatalf("%s does not start with its time %s", a, AuditIDPrefix(at))
	}
}
