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

// Outbox builds a pending outbox record due at due.
func Outbox(tenant, id string, created, due time.Time) *storagev1.OutboxRecord {
	return &storagev1.OutboxRecord{
		Id: id, Tenant: tenant, Endpoint: "hook", EventType: "task.ended", Payload: []byte(`{}`),
		CreateTime: timestamppb.New(created), State: storagev1.OutboxState_OUTBOX_STATE_PENDING,
		NextAttemptTime: timestamppb.New(due),
	}
}

func claimIDs(t *testing.T, s store.Store, now time.Time, limit int) []string {
	t.Helper()
	var ids []string
	update(t, s, func(w store.Writer) error {
		ids = nil
		recs, err := w.ClaimOutbox(now, limit)
		for _, r := range recs {
			ids = append(ids, r.GetId())
		}
		return err
	})
	return ids
}

func outboxIDs(t *testing.T, s store.Store, state storagev1.OutboxState, after string) []string {
	t.Helper()
	var ids []string
	view(t, s, func(r store.Reader) error {
		return r.ScanOutbox(state, after, func(rec *storagev1.OutboxRecord) (bool, error) {
			ids = append(ids, rec.GetId())
			return true, nil
		})
	})
	return ids
}

func outboxDepth(t *testing.T, s store.Store, tenant string) int64 {
	t.Helper()
	var n int64
	view(t, s, func(r store.Reader) error {
		var err error
		n, err = r.OutboxDepth(tenant)
		return err
	})
	return n
}

// testOutbox: the due index follows next_attempt_time and state, dead letters are
// listed apart, depth counts per tenant, delete removes every trace.
func testOutbox(t *testing.T, s store.Store) {
	pending := storagev1.OutboxState_OUTBOX_STATE_PENDING
	dead := storagev1.OutboxState_OUTBOX_STATE_DEAD
	update(t, s, func(w store.Writer) error {
		for _, r := range []*storagev1.OutboxRecord{
			Outbox("a", "o1", at(1), at(30)),
			Outbox("a", "o2", at(2), at(10)),
			Outbox("b", "o3", at(3), at(20)),
		} {
			if err := w.PutOutbox(r); err != nil {
				return err
			}
		}
		// Depth inside the transaction sees its own writes.
		if n, err := w.OutboxDepth("a"); err != nil || n != 2 {
			return fmt.Errorf("OutboxDepth(a) in the transaction = %d, %v; want 2", n, err)
		}
		return nil
	})
	equalStrings(t, "due at 15", claimIDs(t, s, at(15), 10), []string{"o2"})
	equalStrings(t, "due at 30", claimIDs(t, s, at(30), 10), []string{"o2", "o3", "o1"})
	equalStrings(t, "due at 30, limit 2", claimIDs(t, s, at(30), 2), []string{"o2", "o3"})
	if a, b := outboxDepth(t, s, "a"), outboxDepth(t, s, "b"); a != 2 || b != 1 {
		t.Fatalf("depth a=%d b=%d, want 2 and 1", a, b)
	}

	// Moving o2 later takes it out of the earlier due slot; making o3 dead takes it
	// out of the due index into the dead letters.
	update(t, s, func(w store.Writer) error {
		o2, err := w.GetOutbox("o2")
		if err != nil {
			return err
		}
		o2.NextAttemptTime, o2.Attempts, o2.Claim = timestamppb.New(at(100)), 1, "c1"
		if err := w.PutOutbox(o2); err != nil {
			return err
		}
		o3, err := w.GetOutbox("o3")
		if err != nil {
			return err
		}
		o3.State, o3.DeadTime, o3.LastError = dead, timestamppb.New(at(40)), "HTTP 500"
		return w.PutOutbox(o3)
	})
	equalStrings(t, "due at 50", claimIDs(t, s, at(50), 10), []string{"o1"})
	equalStrings(t, "due at 100", claimIDs(t, s, at(100), 10), []string{"o1", "o2"})
	equalStrings(t, "dead", outboxIDs(t, s, dead, ""), []string{"o3"})
	equalStrings(t, "pending", outboxIDs(t, s, pending, ""), []string{"o1", "o2"})
	equalStrings(t, "pending after o1", outboxIDs(t, s, pending, "o1"), []string{"o2"})
	if b := outboxDepth(t, s, "b"); b != 1 {
		t.Fatalf("depth b=%d, want 1 (a dead letter still counts)", b)
	}
	var got *storagev1.OutboxRecord
	view(t, s, func(r store.Reader) error {
		var err error
		got, err = r.GetOutbox("o2")
		return err
	})
	if got.GetAttempts() != 1 || got.GetClaim() != "c1" || string(got.GetPayload()) != "{}" {
		t.Fatalf("o2 = %v, want attempts 1, claim c1, the payload kept", got)
	}
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.OutboxPending != 2 || st.OutboxDead != 1 || !st.OutboxOldestPending.Equal(at(1)) {
		t.Fatalf("stats pending=%d dead=%d oldest=%v, want 2, 1, %v", st.OutboxPending, st.OutboxDead, st.OutboxOldestPending, at(1))
	}

	// Dead back to pending (a retry), then delete everything.
	update(t, s, func(w store.Writer) error {
		o3, err := w.GetOutbox("o3")
		if err != nil {
			return err
		}
		o3.State, o3.NextAttemptTime = pending, timestamppb.New(at(0))
		return w.PutOutbox(o3)
	})
	equalStrings(t, "dead after retry", outboxIDs(t, s, dead, ""), nil)
	equalStrings(t, "due at 0", claimIDs(t, s, at(0), 10), []string{"o3"})
	update(t, s, func(w store.Writer) error {
		for _, id := range []string{"o1", "o2", "o3"} {
			if err := w.DeleteOutbox(id); err != nil {
				return err
			}
		}
		return nil
	})
	equalStrings(t, "due after delete", claimIDs(t, s, at(1000), 10), nil)
	if a, b := outboxDepth(t, s, "a"), outboxDepth(t, s, "b"); a != 0 || b != 0 {
		t.Fatalf("depth after delete a=%d b=%d, want 0", a, b)
	}
	err = s.Update(context.Background(), func(w store.Writer) error { return w.DeleteOutbox("o1") })
	wantCode(t, err, codes.NotFound, apierr.ReasonWebhookDeliveryNotFound)
	err = s.View(context.Background(), func(r store.Reader) error { _, err := r.GetOutbox("nope"); return err })
	wantCode(t, err, codes.NotFound, apierr.ReasonWebhookDeliveryNotFound)

	// Immutable fields and invalid records are refused.
	update(t, s, func(w store.Writer) error { return w.PutOutbox(Outbox("a", "o4", at(1), at(1))) })
	for name, change := range map[string]func(*storagev1.OutboxRecord){
		"tenant":      func(r *storagev1.OutboxRecord) { r.Tenant = "b" },
		"endpoint":    func(r *storagev1.OutboxRecord) { r.Endpoint = "other" },
		"create_time": func(r *storagev1.OutboxRecord) { r.CreateTime = timestamppb.New(at(2)) },
		"no due time": func(r *storagev1.OutboxRecord) { r.NextAttemptTime = nil },
		"no state":    func(r *storagev1.OutboxRecord) { r.State = storagev1.OutboxState_OUTBOX_STATE_UNSPECIFIED },
	} {
		rec := Outbox("a", "o4", at(1), at(1))
		change(rec)
		if err := s.Update(context.Background(), func(w store.Writer) error { return w.PutOutbox(rec) }); err == nil {
			t.Errorf("PutOutbox changing %s: no error", name)
		}
	}
}

// testOutboxConcurrentClaims: concurrent claimers, each moving what it claims out of
// the due window, never claim the same notification twice.
func testOutboxConcurrentClaims(t *testing.T, s store.Store) {
	const n = 60
	update(t, s, func(w store.Writer) error {
		for i := range n {
			if err := w.PutOutbox(Outbox("a", fmt.Sprintf("o%03d", i), at(i), at(0))); err != nil {
				return err
			}
		}
		return nil
	})
	var mu sync.Mutex
	claimed := map[string]int{}
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var got []string
				err := s.Update(context.Background(), func(w store.Writer) error {
					got = nil
					recs, err := w.ClaimOutbox(at(1), 5)
					if err != nil {
						return err
					}
					for _, r := range recs {
						r.NextAttemptTime, r.Claim = timestamppb.New(at(1000)), fmt.Sprint(c)
						if err := w.PutOutbox(r); err != nil {
							return err
						}
						got = append(got, r.GetId())
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, id := range got {
					claimed[id]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(claimed) != n {
		t.Fatalf("%d notifications claimed, want %d", len(claimed), n)
	}
	for id, k := range claimed {
		if k != 1 {
			t.Errorf("%s claimed %d times", id, k)
		}
	}
}
