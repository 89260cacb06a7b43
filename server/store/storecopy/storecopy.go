// Package storecopy copies every record of one store into another (controlplane store
// copy: the embedded bbolt file to PostgreSQL) and compares two stores record by
// record.
package storecopy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// Source is a store whose tenants can be listed: both backends are.
type Source interface {
	store.Store
	// TaskTenants lists every tenant that has a task, in key order.
	TaskTenants(ctx context.Context, fn func(tenant string) (bool, error)) error
	// AuditTenants lists every tenant that has an approval audit record, in key order.
	AuditTenants(ctx context.Context, fn func(tenant string) (bool, error)) error
}

// Counts is what Copy copied.
type Counts struct {
	Tenants, Tasks, Specs, Events, Interrupts, Verdicts, Obligations int64
	// Notifications counts the webhook outbox's records, pending and dead letters.
	Notifications int64
	// Schedules counts the schedules, with their firing state.
	Schedules int64
	// Budgets counts the budget counts (one per tenant and budget).
	Budgets int64
	// AuditRecords counts the approval audit log's records.
	AuditRecords int64
	// LinkRevocations counts the revocations of single approval links.
	LinkRevocations int64
	// Flows counts the flow-control records: the slots of concurrency keys, token
	// buckets and fair-share tags (docs/api.md#flow-control).
	Flows int64
}

// task is every record of one task.
type task struct {
	rec         *storagev1.TaskRecord
	spec        *storagev1.TaskSpecRecord
	events      []*storagev1.EventRecord
	interrupts  []*storagev1.InterruptRecord
	verdicts    []*storagev1.VerdictRecord
	obligations []*storagev1.ObligationRecord
}

func readTask(r store.Reader, tenant, id string) (*task, error) {
	t := &task{}
	var err error
	if t.rec, err = r.GetTask(tenant, id); err != nil {
		return nil, err
	}
	if t.spec, err = r.GetTaskSpec(tenant, id); err != nil && !store.IsNotFound(err) {
		return nil, err
	}
	if err := r.ScanEvents(tenant, id, 0, func(e *storagev1.EventRecord) (bool, error) {
		t.events = append(t.events, e)
		return true, nil
	}); err != nil {
		return nil, err
	}
	if err := r.ScanTaskInterrupts(tenant, id, func(in *storagev1.InterruptRecord) (bool, error) {
		t.interrupts = append(t.interrupts, in)
		return true, nil
	}); err != nil {
		return nil, err
	}
	if err := r.ScanVerdicts(tenant, id, 0, func(v *storagev1.VerdictRecord) (bool, error) {
		t.verdicts = append(t.verdicts, v)
		return true, nil
	}); err != nil {
		return nil, err
	}
	err = r.ScanObligations(tenant, id, 0, func(o *storagev1.ObligationRecord) (bool, error) {
		t.obligations = append(t.obligations, o)
		return true, nil
	})
	return t, err
}

// taskIDs lists a tenant's tasks, newest first.
func taskIDs(ctx context.Context, s store.Store, tenant string) ([]string, error) {
	var ids []string
	err := s.View(ctx, func(r store.Reader) error {
		return r.ScanTasks(tenant, store.TaskRange{}, func(_ []byte, rec *storagev1.TaskRecord) (bool, error) {
			ids = append(ids, rec.GetTaskId())
			return true, nil
		})
	})
	return ids, err
}

func tenants(ctx context.Context, s Source) ([]string, error) {
	var out []string
	err := s.TaskTenants(ctx, func(t string) (bool, error) {
		out = append(out, t)
		return true, nil
	})
	return out, err
}

// Copy writes every task of src, with everything it owns, into dst, one Update per
// task; dst must have no task yet. The indexes and counters of dst are derived from
// the records as they are written. src must not change meanwhile (stop the server
// using it).
func Copy(ctx context.Context, src, dst Source) (Counts, error) {
	var n Counts
	if have, err := tenants(ctx, dst); err != nil {
		return n, err
	} else if len(have) > 0 {
		return n, fmt.Errorf("the destination already has tasks (tenant %q); copy into an empty store", have[0])
	}
	names, err := tenants(ctx, src)
	if err != nil {
		return n, err
	}
	for _, tenant := range names {
		n.Tenants++
		ids, err := taskIDs(ctx, src, tenant)
		if err != nil {
			return n, err
		}
		for _, id := range ids {
			var t *task
			if err := src.View(ctx, func(r store.Reader) (err error) {
				t, err = readTask(r, tenant, id)
				return err
			}); err != nil {
				return n, fmt.Errorf("reading task %s/%s: %w", tenant, id, err)
			}
			if err := dst.Update(ctx, func(w store.Writer) error { return writeTask(w, tenant, t) }); err != nil {
				return n, fmt.Errorf("writing task %s/%s: %w", tenant, id, err)
			}
			n.Tasks++
			if t.spec != nil {
				n.Specs++
			}
			n.Events += int64(len(t.events))
			n.Interrupts += int64(len(t.interrupts))
			n.Verdicts += int64(len(t.verdicts))
			n.Obligations += int64(len(t.obligations))
		}
	}
	copied, err := copySchedules(ctx, src, dst)
	n.Schedules += copied
	if err != nil {
		return n, err
	}
	auditTenants, err := listAuditTenants(ctx, src)
	if err != nil {
		return n, err
	}
	for _, tenant := range auditTenants {
		copied, err := copyAudit(ctx, src, dst, tenant)
		n.AuditRecords += copied
		if err != nil {
			return n, err
		}
	}
	for _, state := range []storagev1.OutboxState{storagev1.OutboxState_OUTBOX_STATE_PENDING, storagev1.OutboxState_OUTBOX_STATE_DEAD} {
		copied, err := copyOutbox(ctx, src, dst, state)
		n.Notifications += copied
		if err != nil {
			return n, err
		}
	}
	budgets, err := copyBudgets(ctx, src, dst)
	n.Budgets += budgets
	if err != nil {
		return n, err
	}
	revocations, err := copyLinkRevocations(ctx, src, dst)
	n.LinkRevocations += revocations
	if err != nil {
		return n, err
	}
	flows, err := copyFlows(ctx, src, dst)
	n.Flows += flows
	return n, err
}

// flowRecord is one flow-control record with its name.
type flowRecord struct {
	tenant, name string
	rec          *storagev1.FlowRecord
}

// allFlows reads every flow-control record of s, sorted by tenant and name (each
// store scans them in its own key order).
func allFlows(ctx context.Context, s Source) ([]flowRecord, error) {
	var out []flowRecord
	err := s.View(ctx, func(r store.Reader) error {
		return r.ScanFlows(func(tenant, name string, rec *storagev1.FlowRecord) (bool, error) {
			out = append(out, flowRecord{tenant, name, rec})
			return true, nil
		})
	})
	slices.SortFunc(out, func(a, b flowRecord) int {
		return cmp.Or(strings.Compare(a.tenant, b.tenant), strings.Compare(a.name, b.name))
	})
	return out, err
}

// flowBatch bounds the flow records one transaction of a copy writes.
const flowBatch = 512

// copyFlows copies the flow-control records as they are, so that a move keeps the
// slots the copied leases hold (each holder is a copied task whose record says it
// holds them: recomputing them would give the same list), the tokens each bucket has
// left, and each key's fair-share tag; a fresh set would let a moved deployment
// over-lease a capped key and hand every bucket a full burst.
func copyFlows(ctx context.Context, src, dst Source) (int64, error) {
	recs, err := allFlows(ctx, src)
	if err != nil {
		return 0, fmt.Errorf("reading the flow records: %w", err)
	}
	for batch := range slices.Chunk(recs, flowBatch) {
		if err := dst.Update(ctx, func(w store.Writer) error {
			for _, f := range batch {
				if err := w.PutFlow(f.tenant, f.name, f.rec); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return 0, fmt.Errorf("writing the flow records: %w", err)
		}
	}
	return int64(len(recs)), nil
}

// copyLinkRevocations copies the link revocations in one transaction (they are
// bounded by the links revoked within one link TTL), so that a revoked link stays
// revoked after a move.
func copyLinkRevocations(ctx context.Context, src, dst Source) (int64, error) {
	var recs []*storagev1.LinkRevocationRecord
	if err := src.View(ctx, func(r store.Reader) error {
		return r.ScanLinkRevocations(func(rec *storagev1.LinkRevocationRecord) (bool, error) {
			recs = append(recs, rec)
			return true, nil
		})
	}); err != nil {
		return 0, fmt.Errorf("reading the link revocations: %w", err)
	}
	if len(recs) == 0 {
		return 0, nil
	}
	if err := dst.Update(ctx, func(w store.Writer) error {
		for _, rec := range recs {
			if err := w.PutLinkRevocation(rec); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return 0, fmt.Errorf("writing the link revocations: %w", err)
	}
	return int64(len(recs)), nil
}

// copyBudgets copies the budget counts in one transaction (they are bounded by
// tenants times budgets), so that a move does not hand every tenant a fresh period.
func copyBudgets(ctx context.Context, src, dst Source) (int64, error) {
	var recs []*storagev1.BudgetUsageRecord
	if err := src.View(ctx, func(r store.Reader) error {
		return r.ScanBudgetUsage(func(rec *storagev1.BudgetUsageRecord) (bool, error) {
			recs = append(recs, rec)
			return true, nil
		})
	}); err != nil {
		return 0, fmt.Errorf("reading the budget counts: %w", err)
	}
	if len(recs) == 0 {
		return 0, nil
	}
	if err := dst.Update(ctx, func(w store.Writer) error {
		for _, rec := range recs {
			if _, err := w.AddBudgetUsage(rec); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return 0, fmt.Errorf("writing the budget counts: %w", err)
	}
	return int64(len(recs)), nil
}

// allSchedules reads every schedule of s, by tenant then id.
func allSchedules(ctx context.Context, s Source) ([]*storagev1.ScheduleRecord, error) {
	var out []*storagev1.ScheduleRecord
	err := s.View(ctx, func(r store.Reader) error {
		var names []string
		if err := r.ScheduleTenants("", func(t string) (bool, error) { names = append(names, t); return true, nil }); err != nil {
			return err
		}
		for _, t := range names {
			if err := r.ScanSchedules(t, "", func(rec *storagev1.ScheduleRecord) (bool, error) {
				out = append(out, rec)
				return true, nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// copySchedules copies every schedule as it is (revision, next nominal time, recent
// runs), so that the destination fires from where the source stopped.
func copySchedules(ctx context.Context, src, dst Source) (int64, error) {
	recs, err := allSchedules(ctx, src)
	if err != nil {
		return 0, fmt.Errorf("reading the schedules: %w", err)
	}
	var n int64
	for _, rec := range recs {
		// PutSchedule creates a record at revision 1 only; write it at 1, then as it is.
		rev := rec.GetRevision()
		if err := dst.Update(ctx, func(w store.Writer) error {
			first := proto.Clone(rec).(*storagev1.ScheduleRecord)
			first.Revision = 1
			if err := w.PutSchedule(first); err != nil {
				return err
			}
			if rev == 1 {
				return nil
			}
			return w.PutSchedule(rec)
		}); err != nil {
			return n, fmt.Errorf("writing schedule %s/%s: %w", rec.GetTenant(), rec.GetScheduleId(), err)
		}
		n++
	}
	return n, nil
}

func listAuditTenants(ctx context.Context, s Source) ([]string, error) {
	var out []string
	err := s.AuditTenants(ctx, func(t string) (bool, error) {
		out = append(out, t)
		return true, nil
	})
	return out, err
}

// readAudit reads up to limit (0: all) of tenant's audit records after the id after.
func readAudit(ctx context.Context, s store.Store, tenant, after string, limit int) ([]*storagev1.AuditRecordEntry, error) {
	var recs []*storagev1.AuditRecordEntry
	err := s.View(ctx, func(r store.Reader) error {
		return r.ScanAudit(tenant, after, func(rec *storagev1.AuditRecordEntry) (bool, error) {
			recs = append(recs, rec)
			return limit == 0 || len(recs) < limit, nil
		})
	})
	return recs, err
}

// copyAudit copies tenant's approval audit log, a chunk per transaction: an auditor's
// record outlives the move, as it outlives the tasks it records.
func copyAudit(ctx context.Context, src, dst Source, tenant string) (int64, error) {
	var n int64
	after := ""
	for {
		recs, err := readAudit(ctx, src, tenant, after, outboxChunk)
		if err != nil {
			return n, fmt.Errorf("reading the audit log of %s: %w", tenant, err)
		}
		if len(recs) == 0 {
			return n, nil
		}
		if err := dst.Update(ctx, func(w store.Writer) error {
			for _, rec := range recs {
				if err := w.PutAudit(rec); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return n, fmt.Errorf("writing the audit log of %s: %w", tenant, err)
		}
		n += int64(len(recs))
		after = recs[len(recs)-1].GetRecord().GetAuditId()
	}
}

// outboxChunk is how many outbox records one Update of copyOutbox writes.
const outboxChunk = 256

// copyOutbox copies the webhook outbox's records in state, a chunk per transaction,
// so that notifications not yet delivered are not lost with the move.
func copyOutbox(ctx context.Context, src, dst Source, state storagev1.OutboxState) (int64, error) {
	var n int64
	after := ""
	for {
		var recs []*storagev1.OutboxRecord
		if err := src.View(ctx, func(r store.Reader) error {
			return r.ScanOutbox(state, after, func(rec *storagev1.OutboxRecord) (bool, error) {
				recs = append(recs, rec)
				return len(recs) < outboxChunk, nil
			})
		}); err != nil {
			return n, fmt.Errorf("reading the webhook outbox: %w", err)
		}
		if len(recs) == 0 {
			return n, nil
		}
		if err := dst.Update(ctx, func(w store.Writer) error {
			for _, rec := range recs {
				if err := w.PutOutbox(rec); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return n, fmt.Errorf("writing the webhook outbox: %w", err)
		}
		n += int64(len(recs))
		after = recs[len(recs)-1].GetId()
	}
}

func writeTask(w store.Writer, tenant string, t *task) error {
	if err := w.PutTask(t.rec); err != nil {
		return err
	}
	id := t.rec.GetTaskId()
	if t.spec != nil {
		if err := w.PutTaskSpec(tenant, id, t.spec); err != nil {
			return err
		}
	}
	if len(t.events) > 0 {
		if err := w.AppendEvents(tenant, id, t.events...); err != nil {
			return err
		}
	}
	for _, in := range t.interrupts {
		if err := w.PutInterrupt(in); err != nil {
			return err
		}
	}
	for _, v := range t.verdicts {
		if err := w.PutVerdict(tenant, v); err != nil {
			return err
		}
	}
	for _, o := range t.obligations {
		if err := w.PutObligation(tenant, id, o); err != nil {
			return err
		}
	}
	return nil
}

// Compare reports every difference between the records of a and b: tenants, tasks in
// listing order, and each task's spec, events, interrupts, verdicts and obligations;
// nil when they hold the same records.
func Compare(ctx context.Context, a, b Source) error {
	var diffs []error
	differ := func(format string, args ...any) { diffs = append(diffs, fmt.Errorf(format, args...)) }
	ta, tb, err := both(ctx, a, b, tenants)
	if err != nil {
		return err
	}
	if fmt.Sprint(ta) != fmt.Sprint(tb) {
		differ("tenants %q and %q", ta, tb)
	}
	sa, err := a.Stats(ctx)
	if err != nil {
		return err
	}
	sb, err := b.Stats(ctx)
	if err != nil {
		return err
	}
	if d := statsDiff(sa, sb); d != "" {
		differ("stats: %s", d)
	}
	for _, tenant := range ta {
		ia, err := taskIDs(ctx, a, tenant)
		if err != nil {
			return err
		}
		ib, err := taskIDs(ctx, b, tenant)
		if err != nil {
			return err
		}
		if fmt.Sprint(ia) != fmt.Sprint(ib) {
			differ("tenant %q lists tasks %q and %q", tenant, ia, ib)
			continue
		}
		for _, id := range ia {
			var x, y *task
			if err := a.View(ctx, func(r store.Reader) (err error) { x, err = readTask(r, tenant, id); return err }); err != nil {
				return err
			}
			if err := b.View(ctx, func(r store.Reader) (err error) { y, err = readTask(r, tenant, id); return err }); err != nil {
				return err
			}
			if d := x.diff(y); d != "" {
				differ("task %s/%s: %s", tenant, id, d)
			}
			if req := x.rec.GetRequestId(); req != "" {
				var oa, ob string
				if err := a.View(ctx, func(r store.Reader) (err error) { oa, err = r.TaskForRequest(tenant, req); return err }); err != nil {
					return err
				}
				if err := b.View(ctx, func(r store.Reader) (err error) { ob, err = r.TaskForRequest(tenant, req); return err }); err != nil {
					return err
				}
				if oa != ob {
					differ("tenant %q request %q names task %q and %q", tenant, req, oa, ob)
				}
			}
		}
		for _, idx := range []store.Index{store.IndexLeaseDeadlines, store.IndexEnded, store.IndexPendingInterrupts, store.IndexInterruptDeadlines,
			store.IndexInterruptEscalations} {
			ea, err := entries(ctx, a, func(r store.Reader, fn func(store.IndexEntry) (bool, error)) error {
				return r.ScanIndex(idx, tenant, store.IndexRange{}, fn)
			})
			if err != nil {
				return err
			}
			eb, err := entries(ctx, b, func(r store.Reader, fn func(store.IndexEntry) (bool, error)) error {
				return r.ScanIndex(idx, tenant, store.IndexRange{}, fn)
			})
			if err != nil {
				return err
			}
			if ea != eb {
				differ("tenant %q index %s: %s and %s", tenant, idx, ea, eb)
			}
		}
		for queue := range sa.QueueDepth {
			scan := func(r store.Reader, fn func(store.IndexEntry) (bool, error)) error {
				return r.ScanQueue(tenant, queue, store.IndexRange{}, fn)
			}
			ea, err := entries(ctx, a, scan)
			if err != nil {
				return err
			}
			eb, err := entries(ctx, b, scan)
			if err != nil {
				return err
			}
			if ea != eb {
				differ("tenant %q queue %s: %s and %s", tenant, queue, ea, eb)
			}
		}
	}
	sca, scb, err := both(ctx, a, b, allSchedules)
	if err != nil {
		return err
	}
	if !equalAll(sca, scb) {
		differ("schedules: %d and %d, or they differ", len(sca), len(scb))
	}
	ba, bb, err := both(ctx, a, b, budgetCounts)
	if err != nil {
		return err
	}
	if ba != bb {
		differ("budget counts %s and %s", ba, bb)
	}
	fa, fb, err := both(ctx, a, b, allFlows)
	if err != nil {
		return err
	}
	if d := flowsDiff(fa, fb); d != "" {
		differ("flow records: %s", d)
	}
	aa, ab, err := both(ctx, a, b, listAuditTenants)
	if err != nil {
		return err
	}
	if fmt.Sprint(aa) != fmt.Sprint(ab) {
		differ("audit tenants %q and %q", aa, ab)
	}
	for _, tenant := range aa {
		ra, err := readAudit(ctx, a, tenant, "", 0)
		if err != nil {
			return err
		}
		rb, err := readAudit(ctx, b, tenant, "", 0)
		if err != nil {
			return err
		}
		if !equalAll(ra, rb) {
			differ("tenant %q audit log: %d and %d records, or they differ", tenant, len(ra), len(rb))
		}
	}
	return errors.Join(diffs...)
}

// both reads the same of a and of b.
func both[T any](ctx context.Context, a, b Source, read func(context.Context, Source) (T, error)) (x, y T, err error) {
	if x, err = read(ctx, a); err != nil {
		return x, y, err
	}
	y, err = read(ctx, b)
	return x, y, err
}

// flowsDiff names the first flow record that differs between a and b, "" when none.
func flowsDiff(a, b []flowRecord) string {
	for i := range max(len(a), len(b)) {
		switch {
		case i >= len(a):
			return fmt.Sprintf("%s/%s is only in the second", b[i].tenant, b[i].name)
		case i >= len(b):
			return fmt.Sprintf("%s/%s is only in the first", a[i].tenant, a[i].name)
		case a[i].tenant != b[i].tenant || a[i].name != b[i].name:
			return fmt.Sprintf("%s/%s and %s/%s", a[i].tenant, a[i].name, b[i].tenant, b[i].name)
		case !proto.Equal(a[i].rec, b[i].rec):
			return fmt.Sprintf("%s/%s differs", a[i].tenant, a[i].name)
		}
	}
	return ""
}

// budgetCounts is every budget count of s, sorted, as text.
func budgetCounts(ctx context.Context, s Source) (string, error) {
	var out []string
	err := s.View(ctx, func(r store.Reader) error {
		return r.ScanBudgetUsage(func(rec *storagev1.BudgetUsageRecord) (bool, error) {
			out = append(out, prototext.MarshalOptions{}.Format(rec))
			return true, nil
		})
	})
	slices.Sort(out)
	return strings.Join(out, "\n"), err
}

func (t *task) diff(o *task) string {
	switch {
	case !proto.Equal(t.rec, o.rec):
		return "task records differ"
	case !proto.Equal(t.spec, o.spec):
		return "specs differ"
	case !equalAll(t.events, o.events):
		return fmt.Sprintf("events differ (%d and %d)", len(t.events), len(o.events))
	case !equalAll(t.interrupts, o.interrupts):
		return fmt.Sprintf("interrupts differ (%d and %d)", len(t.interrupts), len(o.interrupts))
	case !equalAll(t.verdicts, o.verdicts):
		return fmt.Sprintf("verdicts differ (%d and %d)", len(t.verdicts), len(o.verdicts))
	case !equalAll(t.obligations, o.obligations):
		return fmt.Sprintf("obligations differ (%d and %d)", len(t.obligations), len(o.obligations))
	}
	return ""
}

func equalAll[M proto.Message](a, b []M) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// entries renders an index scan: each entry's time and id.
func entries(ctx context.Context, s store.Store, scan func(store.Reader, func(store.IndexEntry) (bool, error)) error) (string, error) {
	var out []string
	err := s.View(ctx, func(r store.Reader) error {
		return scan(r, func(e store.IndexEntry) (bool, error) {
			out = append(out, e.At.UTC().Format(time.RFC3339Nano)+" "+e.ID)
			return true, nil
		})
	})
	return fmt.Sprint(out), err
}

// statsDiff compares what two stores count, not how they store it.
func statsDiff(a, b store.Stats) string {
	nonZero := func(m map[agentplanev1.TaskState]int64) string {
		out := map[agentplanev1.TaskState]int64{}
		for k, v := range m {
			if v != 0 {
				out[k] = v
			}
		}
		return fmt.Sprint(out)
	}
	queues := func(m map[string]int64) string {
		out := map[string]int64{}
		for k, v := range m {
			if v != 0 {
				out[k] = v
			}
		}
		return fmt.Sprint(out)
	}
	switch {
	case nonZero(a.TasksByState) != nonZero(b.TasksByState):
		return fmt.Sprintf("tasks by state %s and %s", nonZero(a.TasksByState), nonZero(b.TasksByState))
	case a.Events != b.Events:
		return fmt.Sprintf("events %d and %d", a.Events, b.Events)
	case a.PendingInterrupts != b.PendingInterrupts:
		return fmt.Sprintf("pending interrupts %d and %d", a.PendingInterrupts, b.PendingInterrupts)
	case a.OutboxPending != b.OutboxPending || a.OutboxDead != b.OutboxDead:
		return fmt.Sprintf("webhook outbox %d pending, %d dead and %d pending, %d dead", a.OutboxPending, a.OutboxDead, b.OutboxPending, b.OutboxDead)
	case a.ActiveLeases != b.ActiveLeases:
		return fmt.Sprintf("active leases %d and %d", a.ActiveLeases, b.ActiveLeases)
	case queues(a.QueueDepth) != queues(b.QueueDepth):
		return fmt.Sprintf("queue depths %s and %s", queues(a.QueueDepth), queues(b.QueueDepth))
	}
	return ""
}
