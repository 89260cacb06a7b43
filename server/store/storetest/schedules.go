package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// Schedule builds a new schedule record (revision 1) waking at wake (zero: not due).
func Schedule(tenant, id string, wake time.Time) *storagev1.ScheduleRecord {
	rec := &storagev1.ScheduleRecord{Tenant: tenant, ScheduleId: id, Revision: 1, CreateTime: timestamppb.New(base), CreatedBy: "alice"}
	if !wake.IsZero() {
		rec.WakeTime = timestamppb.New(wake)
	}
	return rec
}

func scheduleIDs(t *testing.T, s store.Store, tenant, after string) []string {
	t.Helper()
	var ids []string
	view(t, s, func(r store.Reader) error {
		return r.ScanSchedules(tenant, after, func(rec *storagev1.ScheduleRecord) (bool, error) {
			ids = append(ids, rec.GetScheduleId())
			return true, nil
		})
	})
	return ids
}

func dueSchedules(t *testing.T, s store.Store, until time.Time) []string {
	t.Helper()
	var ids []string
	view(t, s, func(r store.Reader) error {
		return r.ScanDueSchedules(until, func(d store.ScheduleDue) (bool, error) {
			ids = append(ids, fmt.Sprintf("%s/%s@%d", d.Tenant, d.ScheduleID, d.Wake.Sub(base)/time.Second))
			return true, nil
		})
	})
	return ids
}

func scheduleCount(t *testing.T, s store.Store, tenant string) int64 {
	t.Helper()
	var n int64
	view(t, s, func(r store.Reader) error {
		var err error
		n, err = r.ScheduleCount(tenant)
		return err
	})
	return n
}

func testSchedules(t *testing.T, s store.Store) {
	update(t, s, func(w store.Writer) error {
		for _, rec := range []*storagev1.ScheduleRecord{
			Schedule("a", "nightly", at(30)), Schedule("a", "b", at(10)), Schedule("a", "zz", time.Time{}),
			Schedule("b", "nightly", at(20)),
		} {
			if err := w.PutSchedule(rec); err != nil {
				return err
			}
		}
		// Counted within the transaction too.
		if n, err := w.ScheduleCount("a"); err != nil || n != 3 {
			return fmt.Errorf("count in transaction = %d, %v; want 3", n, err)
		}
		return nil
	})
	// Id order: shorter first, then bytes (as for interrupts).
	equalStrings(t, "schedules of a", scheduleIDs(t, s, "a", ""), []string{"b", "zz", "nightly"})
	equalStrings(t, "schedules of a after zz", scheduleIDs(t, s, "a", "zz"), []string{"nightly"})
	equalStrings(t, "schedules of b", scheduleIDs(t, s, "b", ""), []string{"nightly"})
	equalStrings(t, "due at 20", dueSchedules(t, s, at(20)), []string{"a/b@10", "b/nightly@20"})
	equalStrings(t, "due at 100", dueSchedules(t, s, at(100)), []string{"a/b@10", "b/nightly@20", "a/nightly@30"})
	var names []string
	view(t, s, func(r store.Reader) error {
		return r.ScheduleTenants("", func(tenant string) (bool, error) {
			names = append(names, tenant)
			return true, nil
		})
	})
	equalStrings(t, "tenants with schedules", names, []string{"a", "b"})
	names = nil
	view(t, s, func(r store.Reader) error {
		return r.ScheduleTenants("a", func(tenant string) (bool, error) {
			names = append(names, tenant)
			return true, nil
		})
	})
	equalStrings(t, "tenants with schedules after a", names, []string{"b"})
	if a, b := scheduleCount(t, s, "a"), scheduleCount(t, s, "b"); a != 3 || b != 1 {
		t.Fatalf("counts a=%d b=%d, want 3 and 1", a, b)
	}

	// Tenant isolation: b cannot read a's b.
	err := s.View(context.Background(), func(r store.Reader) error {
		_, err := r.GetSchedule("b", "b")
		return err
	})
	wantCode(t, err, codes.NotFound, apierr.ReasonScheduleNotFound)

	// Creating over an existing id is refused; replacing a missing one too.
	err = s.Update(context.Background(), func(w store.Writer) error { return w.PutSchedule(Schedule("a", "nightly", at(1))) })
	wantCode(t, err, codes.AlreadyExists, apierr.ReasonScheduleExists)
	missing := Schedule("a", "ghost", at(1))
	missing.Revision = 2
	err = s.Update(context.Background(), func(w store.Writer) error { return w.PutSchedule(missing) })
	wantCode(t, err, codes.NotFound, apierr.ReasonScheduleNotFound)

	// Moving the wake time moves the index entry; clearing it takes it out.
	update(t, s, func(w store.Writer) error {
		rec, err := w.GetSchedule("a", "nightly")
		if err != nil {
			return err
		}
		rec.Revision++
		rec.WakeTime = timestamppb.New(at(5))
		if err := w.PutSchedule(rec); err != nil {
			return err
		}
		rec, err = w.TryLockSchedule("a", "b")
		if err != nil || rec == nil {
			return fmt.Errorf("TryLockSchedule = %v, %v", rec, err)
		}
		rec.Revision++
		rec.WakeTime = nil
		return w.PutSchedule(rec)
	})
	equalStrings(t, "due after moves", dueSchedules(t, s, at(100)), []string{"a/nightly@5", "b/nightly@20"})
	view(t, s, func(r store.Reader) error {
		rec, err := r.GetSchedule("a", "nightly")
		if err == nil && (rec.GetRevision() != 2 || !rec.GetWakeTime().AsTime().Equal(at(5))) {
			err = fmt.Errorf("read back revision %d wake %v", rec.GetRevision(), rec.GetWakeTime().AsTime())
		}
		return err
	})

	// Delete takes the record, its due entry and its count.
	update(t, s, func(w store.Writer) error { return w.DeleteSchedule("a", "nightly") })
	equalStrings(t, "due after delete", dueSchedules(t, s, at(100)), []string{"b/nightly@20"})
	equalStrings(t, "schedules after delete", scheduleIDs(t, s, "a", ""), []string{"b", "zz"})
	if n := scheduleCount(t, s, "a"); n != 2 {
		t.Fatalf("count after delete = %d, want 2", n)
	}
	err = s.Update(context.Background(), func(w store.Writer) error { return w.DeleteSchedule("a", "nightly") })
	wantCode(t, err, codes.NotFound, apierr.ReasonScheduleNotFound)
	err = s.Update(context.Background(), func(w store.Writer) error {
		_, err := w.TryLockSchedule("a", "nightly")
		return err
	})
	wantCode(t, err, codes.NotFound, apierr.ReasonScheduleNotFound)

	// A failed transaction leaves nothing of its schedule writes.
	err = s.Update(context.Background(), func(w store.Writer) error {
		if err := w.PutSchedule(Schedule("a", "doomed", at(1))); err != nil {
			return err
		}
		return fmt.Errorf("abort")
	})
	if err == nil {
		t.Fatal("the failing update succeeded")
	}
	equalStrings(t, "schedules after abort", scheduleIDs(t, s, "a", ""), []string{"b", "zz"})
	if n := scheduleCount(t, s, "a"); n != 2 {
		t.Fatalf("count after abort = %d, want 2", n)
	}
}

// testScheduleConcurrentAdvance has several writers advance one schedule at once, each
// reading it with TryLockSchedule and writing the next revision only when the record
// it read is still the one it expected: every revision is written once, as the
// scheduler relies on.
func testScheduleConcurrentAdvance(t *testing.T, s store.Store) {
	update(t, s, func(w store.Writer) error { return w.PutSchedule(Schedule("a", "s", at(0))) })
	const rounds = 40
	var mu sync.Mutex
	wrote := map[int64]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var rev int64
				err := s.Update(context.Background(), func(w store.Writer) error {
					rev = 0
					rec, err := w.TryLockSchedule("a", "s")
					if err != nil || rec == nil {
						return err
					}
					if rec.GetRevision() > rounds {
						rev = -1
						return nil
					}
					rec.Revision++
					rev = rec.GetRevision()
					return w.PutSchedule(rec)
				})
				if err != nil {
					t.Error(err)
					return
				}
				if rev < 0 {
					return
				}
				if rev > 0 {
					mu.Lock()
					wrote[rev]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for r := int64(2); r <= rounds+1; r++ {
		if wrote[r] != 1 {
			t.Errorf("revision %d written %d times", r, wrote[r])
		}
	}
}
