package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

// auditPrefix starts every audit id.
const auditPrefix = "aud_"

// AuditIDPrefix is the part of the audit ids of records written at t that sorts them by
// time: aud_ and t's Unix nanoseconds in 16 hex digits. Every id written at or after
// t sorts after it, so it is ScanAudit's after for "since t".
func AuditIDPrefix(t time.Time) string {
	return fmt.Sprintf("%s%016x", auditPrefix, schema.Nanos(t))
}

// NewAuditID is a fresh audit id for a record written at t: the time part of
// AuditIDPrefix and 64 random bits, so ids have one length, sort by time and do not
// collide across replicas. Within a process the time part is strictly increasing (a
// record in the same nanosecond as the last takes the next one), so records of one
// replica sort in the order they were written.
func NewAuditID(t time.Time) string {
	n := schema.Nanos(t)
	for {
		last := lastAuditNanos.Load()
		if n <= last {
			n = last + 1
		}
		if lastAuditNanos.CompareAndSwap(last, n) {
			break
		}
	}
	var r [8]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%s%016x%s", auditPrefix, n, hex.EncodeToString(r[:]))
}

var lastAuditNanos atomic.Uint64

// CheckAuditRecord is what every implementation's Writer.PutAudit checks of rec: the
// keys it is stored under are valid.
func CheckAuditRecord(rec *storagev1.AuditRecordEntry) error {
	r := rec.GetRecord()
	if err := CheckTenant(r.GetTenant()); err != nil {
		return err
	}
	if !schema.ValidComponent(r.GetAuditId()) {
		return fmt.Errorf("store: audit id %q is empty or longer than %d bytes", r.GetAuditId(), schema.MaxComponent)
	}
	if r.GetTime() == nil {
		return fmt.Errorf("store: audit record %s has no time", r.GetAuditId())
	}
	return nil
}

// ErrAuditExists is PutAudit's error for an id already written: the log is
// append-only. Ids are random, so only a bug meets it; it is no client's error.
func ErrAuditExists(id string) error {
	return fmt.Errorf("%w: audit record %q exists", ErrAppendOnly, id)
}

// ErrAppendOnly is wrapped by ErrAuditExists.
var ErrAppendOnly = errors.New("store: the audit log is append-only")

// EscalationDue is when the next escalation step of rec is due, for the escalation
// index: while it is pending (and not closed) under an approval rule, its remind_time
// until the reminder ran, then its escalate_time until the escalation ran, whichever
// of those not yet run comes first. ok is false when none is left.
func EscalationDue(rec *storagev1.InterruptRecord) (due time.Time, ok bool) {
	in := rec.GetInterrupt()
	rq := in.GetRequirement()
	if rq == nil || rec.GetClosedReason() != "" || in.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_PENDING {
		return time.Time{}, false
	}
	if t := rq.GetRemindTime(); t != nil && !rq.GetReminded() {
		due, ok = t.AsTime(), true
	}
	if t := rq.GetEscalateTime(); t != nil && !rq.GetEscalated() && (!ok || t.AsTime().Before(due)) {
		due, ok = t.AsTime(), true
	}
	return due, ok
}
