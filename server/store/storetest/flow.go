package storetest

import (
	"context"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

func getFlow(t *testing.T, s store.Store, tenant, name string) *storagev1.FlowRecord {
	t.Helper()
	var rec *storagev1.FlowRecord
	view(t, s, func(r store.Reader) (err error) {
		rec, err = r.GetFlow(tenant, name)
		return err
	})
	return rec
}

// testFlow: flow records round-trip per tenant, a nil put deletes, and a write is
// visible to later reads of the same transaction.
func testFlow(t *testing.T, s store.Store) {
	if rec := getFlow(t, s, "acme", "c:default:x"); rec != nil {
		t.Fatalf("absent flow record = %v, want nil", rec)
	}
	want := &storagev1.FlowRecord{Holders: []string{"t1", "t2"}, Tokens: 1.5, RefillTime: timestamppb.New(at(3))}
	update(t, s, func(w store.Writer) error {
		if err := w.PutFlow("acme", "c:default:x", want); err != nil {
			return err
		}
		got, err := w.GetFlow("acme", "c:default:x")
		if err == nil && !proto.Equal(got, want) {
			t.Errorf("read in its own transaction = %v, want %v", got, want)
		}
		return err
	})
	if got := getFlow(t, s, "acme", "c:default:x"); !proto.Equal(got, want) {
		t.Fatalf("flow record = %v, want %v", got, want)
	}
	if got := getFlow(t, s, "beta", "c:default:x"); got != nil {
		t.Fatalf("another tenant's flow record = %v, want nil", got)
	}
	update(t, s, func(w store.Writer) error { return w.PutFlow("acme", "c:default:x", nil) })
	if got := getFlow(t, s, "acme", "c:default:x"); got != nil {
		t.Fatalf("deleted flow record = %v", got)
	}
	err := s.Update(context.Background(), func(w store.Writer) error {
		return w.PutFlow("acme", string(make([]byte, schema.MaxComponent+1)), want)
	})
	if err == nil {
		t.Fatal("a flow record name over 255 bytes was stored")
	}
}

// testFlowConcurrentRMW: concurrent read-modify-writes of one flow record, starting
// from none, lose no update (the row lock, and the key for its creation).
func testFlowConcurrentRMW(t *testing.T, s store.Store) {
	const n = 32
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			err := s.Update(context.Background(), func(w store.Writer) error {
				rec, err := w.GetFlow("acme", "r:default:k")
				if err != nil {
					return err
				}
				if rec == nil {
					rec = &storagev1.FlowRecord{}
				}
				rec.Tokens++
				return w.PutFlow("acme", "r:default:k", rec)
			})
			if err != nil {
				t.Errorf("Update: %v", err)
			}
		})
	}
	wg.Wait()
	if got := getFlow(t, s, "acme", "r:default:k").GetTokens(); got != n {
		t.Fatalf("tokens = %v after %d increments", got, n)
	}
}

// testQueuePriority: within a queue, a higher priority is read first, then queue time.
func testQueuePriority(t *testing.T, s store.Store) {
	queued := func(id string, sec int, prio int32) *storagev1.TaskRecord {
		rec := Task("acme", id, at(sec))
		rec.QueueTime, rec.Priority = timestamppb.New(at(sec)), prio
		return rec
	}
	putTasks(t, s, queued("old-low", 1, -1), queued("old", 2, 0), queued("new-high", 3, 2), queued("new", 4, 0), queued("newest-high", 5, 2))
	until := at(10).Add(schema.MaxPriority * schema.PriorityStep)
	equalStrings(t, "queue by priority", queueIDs(t, s, "acme", store.DefaultQueue, until),
		[]string{"new-high", "newest-high", "old", "new", "old-low"})
	if got := queueIDs(t, s, "acme", store.DefaultQueue, at(10)); len(got) != 4 {
		t.Fatalf("queue until now = %v: a negative priority is ordered after now", got)
	}
}
