package storecopy_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/boltstore"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/pgstore"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
	"github.com/agentplane/agentplane/server/store/storecopy"
	"github.com/agentplane/agentplane/server/store/storetest"
)

var base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fill writes tasks of every shape into s: two tenants, request ids, queued (two
// queues), leased, ended; specs, events, interrupts pending (one with a deadline) and
// resolved, verdicts and obligations.
func fill(t *testing.T, s store.Store) {
	t.Helper()
	err := s.Update(context.Background(), func(w store.Writer) error {
		for i := range 12 {
			tenant := []string{"acme", "globex"}[i%2]
			id := fmt.Sprintf("task-%02d", i)
			rec := storetest.Task(tenant, id, base.Add(time.Duration(i)*time.Second))
			if i%3 == 0 {
				rec.RequestId = "req-" + id
			}
			switch i % 4 {
			case 0:
				rec.QueueTime = rec.GetCreateTime()
				if i%8 == 0 {
					rec.Queue = "gpu"
				}
			case 1:
				rec.State = agentplanev1.TaskState_TASK_STATE_WORKING
				rec.Lease = &storagev1.LeaseRecord{LeaseId: "L" + id, Epoch: 2, Deadline: timestamppb.New(base.Add(time.Hour))}
				if i == 1 {
					rec.ConcurrencyKey, rec.HoldsSlot = "cust-a", true
				}
			case 2:
				rec.State = agentplanev1.TaskState_TASK_STATE_COMPLETED
				rec.EndTime = timestamppb.New(base.Add(time.Minute))
			}
			if err := w.PutTask(rec); err != nil {
				return err
			}
			if err := w.PutTaskSpec(tenant, id, &storagev1.TaskSpecRecord{Spec: &storagev1.TaskSpecRecord_AgentId{AgentId: "agent-" + id}}); err != nil {
				return err
			}
			var evs []*storagev1.EventRecord
			for seq := int64(1); seq <= int64(i%5); seq++ {
				evs = append(evs, storetest.Event(seq, fmt.Sprintf("%s event %d", id, seq)))
			}
			if err := w.AppendEvents(tenant, id, evs...); err != nil {
				return err
			}
			for j := range i % 3 {
				in := storetest.Interrupt(tenant, id, fmt.Sprintf("in-%02d-%d", i, j), base.Add(time.Duration(i*10+j)*time.Second))
				if j == 1 {
					in.Interrupt.State = agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED
				} else if i%2 == 0 {
					in.Interrupt.Deadline = timestamppb.New(base.Add(2 * time.Hour))
				}
				if err := w.PutInterrupt(in); err != nil {
					return err
				}
			}
			if i%2 == 1 {
				if err := w.PutVerdict(tenant, &storagev1.VerdictRecord{Verdict: &agentplanev1.Verdict{TaskId: id, Sequence: 1}}); err != nil {
					return err
				}
				if err := w.PutObligation(tenant, id, &storagev1.ObligationRecord{Ordinal: 1}); err != nil {
					return err
				}
			}
		}
		// Flow control: the slot task-01 holds, a start bucket with half a token left.
		for _, f := range flowRecords() {
			if err := w.PutFlow(f.tenant, f.name, f.rec); err != nil {
				return err
			}
		}
		// The webhook outbox: two pending notifications and a dead letter.
		for i, id := range []string{"msg_1", "msg_2", "msg_3"} {
			rec := storetest.Outbox("acme", id, base.Add(time.Duration(i)*time.Second), base.Add(time.Minute))
			if i == 2 {
				rec.State = storagev1.OutboxState_OUTBOX_STATE_DEAD
			}
			if err := w.PutOutbox(rec); err != nil {
				return err
			}
		}
		for _, d := range []*storagev1.BudgetUsageRecord{
			storetest.BudgetDelta("acme", "daily", base.Truncate(24*time.Hour), 1200, 7),
			storetest.BudgetDelta("beta", "daily", base.Truncate(24*time.Hour), 3, 0),
		} {
			d.Warned = d.GetTenant() == "acme"
			if _, err := w.AddBudgetUsage(d); err != nil {
				return err
			}
		}
		// Schedules, one of a tenant with no task, one advanced past revision 1.
		for _, rec := range []*storagev1.ScheduleRecord{storetest.Schedule("acme", "nightly", base.Add(time.Hour)), storetest.Schedule("initech", "paused", time.Time{})} {
			if err := w.PutSchedule(rec); err != nil {
				return err
			}
		}
		rec, err := w.GetSchedule("acme", "nightly")
		if err != nil {
			return err
		}
		rec.Revision, rec.LastTaskId = 5, "task-01"
		if err := w.PutSchedule(rec); err != nil {
			return err
		}
		// Revoked approval links.
		for _, tenant := range []string{"acme", "initech"} {
			if err := w.PutLinkRevocation(&storagev1.LinkRevocationRecord{Tenant: tenant, LinkId: "link-1",
				ExpireTime: timestamppb.New(base.Add(time.Hour)), RevokeTime: timestamppb.New(base), RevokedBy: "alice"}); err != nil {
				return err
			}
		}
		// The approval audit log, of a tenant that has no task too (they were purged).
		for i, tenant := range []string{"acme", "acme", "initech"} {
			if err := w.PutAudit(storetest.Audit(tenant, base.Add(time.Duration(i)*time.Second), "alice")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

type flowRecord struct {
	tenant, name string
	rec          *storagev1.FlowRecord
}

// flowRecords are the flow records fill writes.
func flowRecords() []flowRecord {
	return []flowRecord{
		{"acme", "s:default:*", &storagev1.FlowRecord{Tokens: 0.5, RefillTime: timestamppb.New(base)}},
		{"globex", "c:default:cust-a", &storagev1.FlowRecord{Holders: []string{"task-01"}}},
	}
}

// TestCopyBoltToPostgres copies a bbolt store into PostgreSQL and compares every record
// and every index afterwards; then a changed record is reported by Compare.
func TestCopyBoltToPostgres(t *testing.T) {
	ctx := context.Background()
	src, err := boltstore.Open(filepath.Join(t.TempDir(), "agentplane.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	fill(t, src)
	dst, err := pgstore.Open(ctx, pgtest.DSN(t), pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()

	n, err := storecopy.Copy(ctx, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if n.Tenants != 2 || n.Tasks != 12 || n.Specs != 12 || n.Events != 21 || n.Interrupts != 12 || n.Verdicts != 6 || n.Obligations != 6 || n.Notifications != 3 || n.Schedules != 2 || n.Budgets != 2 ||
		n.AuditRecords != 3 || n.LinkRevocations != 2 || n.Flows != 2 {
		t.Fatalf("copied %+v", n)
	}
	if err := dst.View(ctx, func(r store.Reader) error {
		for _, tenant := range []string{"acme", "initech"} {
			if rec, err := r.GetLinkRevocation(tenant, "link-1"); err != nil || rec.GetRevokedBy() != "alice" {
				t.Errorf("%s's link revocation after the copy: %v %v", tenant, rec, err)
			}
		}
		// The slot and the bucket came along: a moved deployment neither over-leases
		// the capped key nor refills the bucket.
		for _, f := range flowRecords() {
			if rec, err := r.GetFlow(f.tenant, f.name); err != nil || !proto.Equal(rec, f.rec) {
				t.Errorf("flow record %s/%s after the copy: %v %v, want %v", f.tenant, f.name, rec, err, f.rec)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := storecopy.Compare(ctx, src, dst); err != nil {
		t.Fatalf("after the copy: %v", err)
	}
	if _, err := storecopy.Copy(ctx, src, dst); err == nil || !strings.Contains(err.Error(), "already has tasks") {
		t.Fatalf("a second copy into the same store = %v, want a refusal", err)
	}

	// Compare sees a flow record changed.
	if err := dst.Update(ctx, func(w store.Writer) error {
		return w.PutFlow("globex", "c:default:cust-a", &storagev1.FlowRecord{Holders: []string{"task-01", "task-05"}})
	}); err != nil {
		t.Fatal(err)
	}
	if err := storecopy.Compare(ctx, src, dst); err == nil || !strings.Contains(err.Error(), "flow records: globex/c:default:cust-a differs") {
		t.Fatalf("Compare with a flow record changed = %v", err)
	}
	if err := dst.Update(ctx, func(w store.Writer) error {
		return w.PutFlow("globex", "c:default:cust-a", flowRecords()[1].rec)
	}); err != nil {
		t.Fatal(err)
	}

	// Compare sees an audit record missing.
	if err := src.Update(ctx, func(w store.Writer) error { return w.PutAudit(storetest.Audit("acme", base.Add(time.Hour), "bob")) }); err != nil {
		t.Fatal(err)
	}
	if err := storecopy.Compare(ctx, src, dst); err == nil || !strings.Contains(err.Error(), `tenant "acme" audit log: 3 and 2 records`) {
		t.Fatalf("Compare with an audit record missing = %v", err)
	}

	// Compare sees a difference in one record.
	if err := dst.Update(ctx, func(w store.Writer) error {
		rec, err := w.GetTask("globex", "task-05")
		if err != nil {
			return err
		}
		rec.SessionId = "changed"
		return w.PutTask(rec)
	}); err != nil {
		t.Fatal(err)
	}
	if err := storecopy.Compare(ctx, src, dst); err == nil || !strings.Contains(err.Error(), "globex/task-05") {
		t.Fatalf("Compare after a change = %v, want task globex/task-05 named", err)
	}
}

// TestCompareFlowsInAnyOrder: Compare matches flow records by tenant and name, not by
// the order each store scans them in (bbolt's keys put a shorter name first).
func TestCompareFlowsInAnyOrder(t *testing.T) {
	ctx := context.Background()
	src, err := boltstore.Open(filepath.Join(t.TempDir(), "agentplane.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := src.Update(ctx, func(w store.Writer) error {
		for _, name := range []string{"f:default:b", "f:default:aa"} {
			if err := w.PutFlow("acme", name, &storagev1.FlowRecord{FairFinish: timestamppb.New(base)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	dst, err := pgstore.Open(ctx, pgtest.DSN(t), pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if n, err := storecopy.Copy(ctx, src, dst); err != nil || n.Flows != 2 {
		t.Fatalf("copied %+v, %v", n, err)
	}
	if err := storecopy.Compare(ctx, src, dst); err != nil {
		t.Fatalf("Compare after the copy: %v", err)
	}
}
