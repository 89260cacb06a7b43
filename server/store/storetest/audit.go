package storetest

import (
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// Audit is an audit record of tenant written at t, with an id of t's prefix
// (AuditIDPrefix) and a random tail, as NewAuditID makes them (which also keeps a
// process's ids increasing, whatever t).
func Audit(tenant string, t time.Time, principal string) *storagev1.AuditRecordEntry {
	return &storagev1.AuditRecordEntry{Record: &agentplanev1.AuditRecord{
		AuditId: store.AuditIDPrefix(t) + rand.Text()[:16], Tenant: tenant, TaskId: "t", InterruptId: "i",
		Action: agentplanev1.AuditAction_AUDIT_ACTION_APPROVE, Principal: principal, Channel: "api",
		Time: timestamppb.New(t),
	}}
}

func auditPrincipals(t *testing.T, s store.Store, tenant, after string, limit int) []string {
	t.Helper()
	var out []string
	view(t, s, func(r store.Reader) error {
		return r.ScanAudit(tenant, after, func(rec *storagev1.AuditRecordEntry) (bool, error) {
			out = append(out, rec.GetRecord().GetPrincipal())
			return limit == 0 || len(out) < limit, nil
		})
	})
	return out
}

// testAudit: the audit log is per tenant, in time order, resumable after an id or
// from a time (AuditIDPrefix), append-only, and outlives the task it records.
func testAudit(t *testing.T, s store.Store) {
	putTasks(t, s, Task("acme", "t", at(0)))
	recs := []*storagev1.AuditRecordEntry{
		Audit("acme", at(3), "carol"), Audit("acme", at(1), "alice"), Audit("globex", at(2), "mallory"), Audit("acme", at(2), "bob"),
	}
	update(t, s, func(w store.Writer) error {
		for _, rec := range recs {
			if err := w.PutAudit(rec); err != nil {
				return err
			}
		}
		return nil
	})
	equalStrings(t, "acme's log", auditPrincipals(t, s, "acme", "", 0), []string{"alice", "bob", "carol"})
	equalStrings(t, "globex's log", auditPrincipals(t, s, "globex", "", 0), []string{"mallory"})
	equalStrings(t, "after bob", auditPrincipals(t, s, "acme", recs[3].GetRecord().GetAuditId(), 0), []string{"carol"})
	equalStrings(t, "since 2s", auditPrincipals(t, s, "acme", store.AuditIDPrefix(at(2)), 0), []string{"bob", "carol"})
	equalStrings(t, "since 4s", auditPrincipals(t, s, "acme", store.AuditIDPrefix(at(4)), 0), nil)
	equalStrings(t, "stop early", auditPrincipals(t, s, "acme", "", 1), []string{"alice"})

	err := s.Update(t.Context(), func(w store.Writer) error { return w.PutAudit(recs[0]) })
	if !errors.Is(err, store.ErrAppendOnly) {
		t.Fatalf("rewriting an audit record: err = %v, want ErrAppendOnly", err)
	}
	update(t, s, func(w store.Writer) error {
		_, err := w.DeleteTask("acme", "t")
		return err
	})
	equalStrings(t, "log after the task's deletion", auditPrincipals(t, s, "acme", "", 0), []string{"alice", "bob", "carol"})
}

// testEscalationIndex: a pending interrupt under an approval rule is indexed by its
// next escalation step not yet run, and leaves the index once none is left, once it
// is resolved, or with its task.
func testEscalationIndex(t *testing.T, s store.Store) {
	putTasks(t, s, Task("acme", "t", at(0)))
	in := Interrupt("acme", "t", "i1", at(0))
	in.Interrupt.Requirement = &agentplanev1.ApprovalRequirement{Rule: "r", Quorum: 2,
		RemindTime: timestamppb.New(at(10)), EscalateTime: timestamppb.New(at(20))}
	plain := Interrupt("acme", "t", "i2", at(0))
	put := func(recs ...*storagev1.InterruptRecord) {
		t.Helper()
		update(t, s, func(w store.Writer) error {
			for _, r := range recs {
				if err := w.PutInterrupt(r); err != nil {
					return err
				}
			}
			return nil
		})
	}
	entries := func() string {
		t.Helper()
		var out []string
		view(t, s, func(r store.Reader) error {
			return r.ScanIndex(store.IndexInterruptEscalations, "acme", store.IndexRange{}, func(e store.IndexEntry) (bool, error) {
				out = append(out, fmt.Sprintf("%s@%s", e.ID, e.At.Sub(base)))
				return true, nil
			})
		})
		return fmt.Sprint(out)
	}
	put(in, plain)
	if got := entries(); got != "[i1@10s]" {
		t.Fatalf("index = %s, want the reminder of i1 only", got)
	}
	equalStrings(t, "tenants", tenants(t, s, store.IndexInterruptEscalations, ""), []string{"acme"})
	in.Interrupt.Requirement.Reminded = true
	put(in)
	if got := entries(); got != "[i1@20s]" {
		t.Fatalf("after the reminder: %s, want the escalation", got)
	}
	in.Interrupt.Requirement.Escalated = true
	put(in)
	if got := entries(); got != "[]" {
		t.Fatalf("after the escalation: %s", got)
	}
	in.Interrupt.Requirement.Escalated = false
	put(in)
	in.Interrupt.State = agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED
	put(in)
	if got := entries(); got != "[]" {
		t.Fatalf("after the resolution: %s", got)
	}
	in.Interrupt.State = agentplanev1.InterruptState_INTERRUPT_STATE_PENDING
	put(in)
	update(t, s, func(w store.Writer) error {
		_, err := w.DeleteTask("acme", "t")
		return err
	})
	if got := entries(); got != "[]" {
		t.Fatalf("after the task's deletion: %s", got)
	}
}
