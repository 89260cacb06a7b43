package tasks

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/boltstore"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

var errInjected = errors.New("injected store failure")

// faultStore is a real store whose reads and writes can be made to fail: once armed,
// the failAt-th call of a Reader or Writer method fails with errInjected.
type faultStore struct {
	store.Store
	failAt  atomic.Int64 // 0: never
	calls   atomic.Int64
	updates atomic.Int64 // Update calls
}

func (s *faultStore) fail() error {
	if at := s.failAt.Load(); at > 0 && s.calls.Add(1) == at {
		return errInjected
	}
	return nil
}

func (s *faultStore) arm(at int64) { s.calls.Store(0); s.failAt.Store(at) }

// disarm stops failing calls and says whether the armed failure happened.
func (s *faultStore) disarm() bool {
	at := s.failAt.Swap(0)
	return s.calls.Load() >= at
}

func (s *faultStore) View(ctx context.Context, fn func(store.Reader) error) error {
	return s.Store.View(ctx, func(r store.Reader) error { return fn(faultReader{r, s}) })
}

func (s *faultStore) Update(ctx context.Context, fn func(store.Writer) error) error {
	s.updates.Add(1)
	return s.Store.Update(ctx, func(w store.Writer) error { return fn(faultWriter{faultReader{w, s}, w}) })
}

type faultReader struct {
	store.Reader
	s *faultStore
}

func (r faultReader) GetTask(tenant, id string) (*storagev1.TaskRecord, error) {
	if err := r.s.fail(); err != nil {
		return nil, err
	}
	return r.Reader.GetTask(tenant, id)
}

func (r faultReader) GetTaskSpec(tenant, id string) (*storagev1.TaskSpecRecord, error) {
	if err := r.s.fail(); err != nil {
		return nil, err
	}
	return r.Reader.GetTaskSpec(tenant, id)
}

func (r faultReader) GetInterrupt(tenant, id string) (*storagev1.InterruptRecord, error) {
	if err := r.s.fail(); err != nil {
		return nil, err
	}
	return r.Reader.GetInterrupt(tenant, id)
}

func (r faultReader) Tenants(idx store.Index, after string, fn func(string) (bool, error)) error {
	if err := r.s.fail(); err != nil {
		return err
	}
	return r.Reader.Tenants(idx, after, fn)
}

func (r faultReader) ScanIndex(idx store.Index, tenant string, ir store.IndexRange, fn func(store.IndexEntry) (bool, error)) error {
	if err := r.s.fail(); err != nil {
		return err
	}
	return r.Reader.ScanIndex(idx, tenant, ir, fn)
}

func (r faultReader) ScanQueue(tenant, queue string, ir store.IndexRange, fn func(store.IndexEntry) (bool, error)) error {
	if err := r.s.fail(); err != nil {
		return err
	}
	return r.Reader.ScanQueue(tenant, queue, ir, fn)
}

func (r faultReader) ScanEvents(tenant, id string, after int64, fn func(*storagev1.EventRecord) (bool, error)) error {
	if err := r.s.fail(); err != nil {
		return err
	}
	return r.Reader.ScanEvents(tenant, id, after, fn)
}

type faultWriter struct {
	faultReader
	w store.Writer
}

func (w faultWriter) PutFlow(tenant, name string, rec *storagev1.FlowRecord) error {
	if err := w.s.fail(); err != nil {
		return err
	}
	return w.w.PutFlow(tenant, name, rec)
}

func (w faultWriter) PutTask(rec *storagev1.TaskRecord) error {
	if err := w.s.fail(); err != nil {
		return err
	}
	return w.w.PutTask(rec)
}

func (w faultWriter) PutTaskSpec(tenant, id string, spec *storagev1.TaskSpecRecord) error {
	return w.w.PutTaskSpec(tenant, id, spec)
}

func (w faultWriter) AppendEvents(tenant, id string, events ...*storagev1.EventRecord) error {
	if err := w.s.fail(); err != nil {
		return err
	}
	return w.w.AppendEvents(tenant, id, events...)
}

func (w faultWriter) PutInterrupt(rec *storagev1.InterruptRecord) error {
	if err := w.s.fail(); err != nil {
		return err
	}
	return w.w.PutInterrupt(rec)
}

func (w faultWriter) PutVerdict(tenant string, rec *storagev1.VerdictRecord) error {
	return w.w.PutVerdict(tenant, rec)
}

func (w faultWriter) PutObligation(tenant, id string, rec *storagev1.ObligationRecord) error {
	return w.w.PutObligation(tenant, id, rec)
}

func (w faultWriter) PutOutbox(rec *storagev1.OutboxRecord) error { return w.w.PutOutbox(rec) }
func (w faultWriter) DeleteOutbox(id string) error                { return w.w.DeleteOutbox(id) }
func (w faultWriter) ClaimOutbox(now time.Time, limit int) ([]*storagev1.OutboxRecord, error) {
	return w.w.ClaimOutbox(now, limit)
}
func (w faultWriter) DeleteTask(tenant, id string) (store.Deleted, error) {
	return w.w.DeleteTask(tenant, id)
}
func (w faultWriter) OnCommit(f func())                               { w.w.OnCommit(f) }
func (w faultWriter) PutAudit(rec *storagev1.AuditRecordEntry) error  { return w.w.PutAudit(rec) }
func (w faultWriter) PutSchedule(rec *storagev1.ScheduleRecord) error { return w.w.PutSchedule(rec) }
func (w faultWriter) PutLinkRevocation(rec *storagev1.LinkRevocationRecord) error {
	return w.w.PutLinkRevocation(rec)
}
func (w faultWriter) DeleteSchedule(tenant, id string) error { return w.w.DeleteSchedule(tenant, id) }
func (w faultWriter) TryLockSchedule(tenant, id string) (*storagev1.ScheduleRecord, error) {
	return w.w.TryLockSchedule(tenant, id)
}
func (w faultWriter) AddBudgetUsage(d *storagev1.BudgetUsageRecord) (*storagev1.BudgetUsageRecord, error) {
	if err := w.s.fail(); err != nil {
		return nil, err
	}
	return w.w.AddBudgetUsage(d)
}

func newFaultHarness(t *testing.T) (*harness, *faultStore) {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "agentplane.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fs := &faultStore{Store: st}
	clock := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	m, err := New(Options{Store: fs, Config: testConfig(), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Stop()
		_ = st.Close()
	})
	return &harness{m: m, clock: clock, store: fs, path: ""}, fs
}

// A store that fails a read or a write under a lease operation fails the operation
// with that error and commits nothing of it: a lease is never granted, renewed or
// expired on a half-read state. The test fails each store call of each operation in
// turn, on a fresh store, until the operation makes no more calls than that.
//
// Mutants: each error return of lease.go skipped.
func TestLeaseOperationsReturnStoreErrors(t *testing.T) {
	type scenario struct {
		name string
		// setup builds the state; op is the operation whose store calls fail.
		setup func(t *testing.T, h *harness) func() error
	}
	scenarios := []scenario{
		{"lease across tenants, one lease overdue", func(t *testing.T, h *harness) func() error {
			h.start(t, params("acme"))
			h.lease(t, "old")
			h.start(t, params("acme"))
			h.start(t, params("beta"))
			h.clock.Advance(time.Minute)
			return func() error {
				_, err := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt", MaxTasks: 10, Queues: []string{"default", "gpu"}})
				return err
			}
		}},
		{"lease of one tenant, with a decision to hand over", func(t *testing.T, h *harness) func() error {
			task := h.start(t, params("acme"))
			h.start(t, params("beta"))
			if err := h.m.UpdateTask(ctx, "acme", task.GetTaskId(), func(op *Op) error {
				rec := op.Task()
				in := &agentplanev1.Interrupt{InterruptId: "i1", TaskId: rec.GetTaskId(), Tenant: rec.GetTenant(),
					Kind: agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL, State: agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED}
				rec.ResumeInterruptIds = []string{"i1"}
				return op.Writer().PutInterrupt(&storagev1.InterruptRecord{Interrupt: in, CreateTime: timestamppb.New(op.Now())})
			}); err != nil {
				t.Fatal(err)
			}
			return func() error {
				_, err := h.m.LeaseTasks(ctx, LeaseRequest{RuntimeID: "rt", Tenant: "acme"})
				return err
			}
		}},
		{"heartbeat", func(t *testing.T, h *harness) func() error {
			h.start(t, params("acme"))
			l := h.lease(t, "rt")
			return func() error { _, err := h.m.Heartbeat(ctx, ref(l)); return err }
		}},
		{"heartbeat after the deadline", func(t *testing.T, h *harness) func() error {
			h.start(t, params("acme"))
			l := h.lease(t, "rt")
			if _, err := h.m.Heartbeat(ctx, ref(l)); err != nil {
				t.Fatal(err)
			}
			h.clock.Advance(time.Minute)
			return lateHeartbeat(h, l)
		}},
		{"heartbeat after the deadline of the last attempt, a decision pending", func(t *testing.T, h *harness) func() error {
			h.start(t, params("acme"))
			l := h.lease(t, "rt")
			if err := h.m.UpdateLeased(ctx, ref(l), func(op *Op) error {
				op.Task().FailedAttempts = int32(h.m.cfg.MaxAttempts - 1)
				return raiseApproval(op, "i1")
			}); err != nil {
				t.Fatal(err)
			}
			h.clock.Advance(time.Minute)
			return lateHeartbeat(h, l)
		}},
		{"history read", func(t *testing.T, h *harness) func() error {
			h.start(t, params("acme"))
			l := h.lease(t, "rt")
			return func() error { _, _, err := h.m.ReadHistory(ctx, ref(l), 0, 10); return err }
		}},
		{"expiry of overdue leases", func(t *testing.T, h *harness) func() error {
			h.start(t, params("acme"))
			h.lease(t, "rt")
			h.start(t, params("beta"))
			h.lease(t, "rt")
			h.clock.Advance(time.Minute)
			return func() error { _, err := h.m.ExpireLeases(ctx); return err }
		}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			for at := int64(1); ; at++ {
				h, fs := newFaultHarness(t)
				op := sc.setup(t, h)
				before := h.snapshot(t)
				fs.arm(at)
				err := op()
				if !fs.disarm() {
					if err != nil {
						t.Fatalf("without a failure: %v", err)
					}
					if at == 1 {
						t.Fatal("the operation made no store call")
					}
					return
				}
				if !errors.Is(err, errInjected) {
					t.Fatalf("store call %d failed; the operation returned %v", at, err)
				}
				if after := h.snapshot(t); after != before {
					t.Fatalf("store call %d failed, yet the operation committed:\nbefore %s\nafter  %s", at, before, after)
				}
			}
		})
	}
}

// lateHeartbeat is a heartbeat past the lease's deadline: LEASE_LOST, the expiry
// committed, is its success.
func lateHeartbeat(h *harness, l *agentplanev1.Lease) func() error {
	return func() error {
		_, err := h.m.Heartbeat(ctx, ref(l))
		if err != nil && !errors.Is(err, errInjected) {
			return nil
		}
		return err
	}
}

// raiseApproval records a pending tool-approval interrupt id of op's task.
func raiseApproval(op *Op, id string) error {
	rec := op.Task()
	in := &agentplanev1.Interrupt{InterruptId: id, TaskId: rec.GetTaskId(), Tenant: rec.GetTenant(),
		Kind: agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL, State: agentplanev1.InterruptState_INTERRUPT_STATE_PENDING}
	if err := op.Writer().PutInterrupt(&storagev1.InterruptRecord{Interrupt: in, CreateTime: timestamppb.New(op.Now())}); err != nil {
		return err
	}
	rec.PendingInterruptIds = append(rec.PendingInterruptIds, id)
	return nil
}

// snapshot is every task of the test's tenants, with its lease and event count.
func (h *harness) snapshot(t *testing.T) string {
	t.Helper()
	var out string
	for _, tenant := range []string{"acme", "beta"} {
		err := h.store.View(ctx, func(r store.Reader) error {
			return r.ScanTasks(tenant, store.TaskRange{}, func(_ []byte, rec *storagev1.TaskRecord) (bool, error) {
				out += rec.GetTaskId() + " " + rec.GetState().String() + " " + rec.GetLease().GetLeaseId() + " " +
					rec.GetLease().GetDeadline().AsTime().String() + fmt.Sprintf(" %d\n", rec.GetLastSequence())
				return true, nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
