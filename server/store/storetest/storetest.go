package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// Opener returns a new, empty store. The suite closes it.
type Opener func(t *testing.T) store.Store

// Run runs the whole suite.
func Run(t *testing.T, open Opener) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"TaskRoundTrip", testTaskRoundTrip},
		{"TaskSpecWrittenOnce", testTaskSpec},
		{"TenantIsolation", testTenantIsolation},
		{"RequestIndex", testRequestIndex},
		{"ImmutableFields", testImmutableFields},
		{"ScanTasksOrderAndPaging", testScanTasks},
		{"EventsGapFree", testEvents},
		{"TimeIndexes", testTimeIndexes},
		{"RunQueues", testRunQueues},
		{"Interrupts", testInterrupts},
		{"VerdictsAndObligations", testVerdictsAndObligations},
		{"DeleteTaskCascade", testDeleteTask},
		{"UpdateIsAtomic", testUpdateAtomic},
		{"OnCommit", testOnCommit},
		{"ConcurrentUpdatesIsolateFailures", testConcurrentFailures},
		{"ConcurrentReadModifyWrite", testConcurrentRMW},
		{"Snapshot", testSnapshot},
		{"Stats", testStats},
		{"CanceledContext", testCanceledContext},
		{"Closed", testClosed},
		{"Outbox", testOutbox},
		{"OutboxConcurrentClaims", testOutboxConcurrentClaims},
		{"Schedules", testSchedules},
		{"ScheduleConcurrentAdvance", testScheduleConcurrentAdvance},
		{"BudgetUsage", testBudgetUsage},
		{"BudgetConcurrentAdds", testBudgetConcurrentAdds},
		{"Audit", testAudit},
		{"EscalationIndex", testEscalationIndex},
		{"Flow", testFlow},
		{"FlowConcurrentReadModifyWrite", testFlowConcurrentRMW},
		{"QueuePriority", testQueuePriority},
		{"LinkRevocations", testLinkRevocations},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { _ = s.Close() })
			tc.fn(t, s)
		})
	}
}

var base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }

// Task builds a minimal valid task record.
func Task(tenant, id string, created time.Time) *storagev1.TaskRecord {
	return &storagev1.TaskRecord{
		TaskId:     id,
		Tenant:     tenant,
		State:      agentplanev1.TaskState_TASK_STATE_SUBMITTED,
		SpecKind:   "static",
		SessionId:  "session of " + id,
		CreateTime: timestamppb.New(created),
		UpdateTime: timestamppb.New(created),
	}
}

// Event builds a note event with the given sequence.
func Event(seq int64, text string) *storagev1.EventRecord {
	return &storagev1.EventRecord{
		Sequence: seq,
		Time:     timestamppb.New(at(int(seq))),
		Event:    &agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_Note{Note: &agentplanev1.RuntimeNote{Text: text}}},
	}
}

// Interrupt builds a pending interrupt of a task.
func Interrupt(tenant, taskID, id string, created time.Time) *storagev1.InterruptRecord {
	return &storagev1.InterruptRecord{
		Interrupt: &agentplanev1.Interrupt{
			InterruptId: id,
			TaskId:      taskID,
			Tenant:      tenant,
			Kind:        agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL,
			State:       agentplanev1.InterruptState_INTERRUPT_STATE_PENDING,
		},
		CreateTime: timestamppb.New(created),
	}
}

func update(t *testing.T, s store.Store, fn func(store.Writer) error) {
	t.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func view(t *testing.T, s store.Store, fn func(store.Reader) error) {
	t.Helper()
	if err := s.View(context.Background(), fn); err != nil {
		t.Fatalf("View: %v", err)
	}
}

func putTasks(t *testing.T, s store.Store, recs ...*storagev1.TaskRecord) {
	t.Helper()
	update(t, s, func(w store.Writer) error {
		for _, r := range recs {
			if err := w.PutTask(r); err != nil {
				return err
			}
		}
		return nil
	})
}

func getTask(t *testing.T, s store.Store, tenant, id string) (*storagev1.TaskRecord, error) {
	t.Helper()
	var rec *storagev1.TaskRecord
	err := s.View(context.Background(), func(r store.Reader) error {
		var err error
		rec, err = r.GetTask(tenant, id)
		return err
	})
	return rec, err
}

func wantCode(t *testing.T, err error, code codes.Code, reason apierr.Reason) {
	t.Helper()
	var e *apierr.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want *apierr.Error %s/%s", err, code, reason)
	}
	if e.Code != code || (reason != 0 && e.Reason != reason) {
		t.Fatalf("err = %s/%s (%v), want %s/%s", e.Code, e.Reason, err, code, reason)
	}
}

func taskIDs(t *testing.T, s store.Store, tenant string, r store.TaskRange) []string {
	t.Helper()
	var ids []string
	view(t, s, func(rd store.Reader) error {
		return rd.ScanTasks(tenant, r, func(_ []byte, rec *storagev1.TaskRecord) (bool, error) {
			ids = append(ids, rec.GetTaskId())
			return true, nil
		})
	})
	return ids
}

func indexIDs(t *testing.T, s store.Store, idx store.Index, tenant string, until time.Time) []string {
	t.Helper()
	var ids []string
	view(t, s, func(r store.Reader) error {
		return r.ScanIndex(idx, tenant, store.IndexRange{Until: until}, func(e store.IndexEntry) (bool, error) {
			ids = append(ids, e.ID)
			return true, nil
		})
	})
	return ids
}

func queueIDs(t *testing.T, s store.Store, tenant, queue string, until time.Time) []string {
	t.Helper()
	var ids []string
	view(t, s, func(r store.Reader) error {
		return r.ScanQueue(tenant, queue, store.IndexRange{Until: until}, func(e store.IndexEntry) (bool, error) {
			ids = append(ids, e.ID)
			return true, nil
		})
	})
	return ids
}

func tenants(t *testing.T, s store.Store, idx store.Index, after string) []string {
	t.Helper()
	var out []string
	view(t, s, func(r store.Reader) error {
		return r.Tenants(idx, after, func(tenant string) (bool, error) {
			out = append(out, tenant)
			return true, nil
		})
	})
	return out
}

func equalStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func testTaskRoundTrip(t *testing.T, s store.Store) {
	rec := Task("acme", "t1", at(0))
	rec.Labels = map[string]string{"team": "blue"}
	putTasks(t, s, rec)
	got, err := getTask(t, s, "acme", "t1")
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, rec) {
		t.Fatalf("GetTask = %v, want %v", got, rec)
	}
	got.SessionId = "changed by the caller"
	again, _ := getTask(t, s, "acme", "t1")
	if again.GetSessionId() != rec.GetSessionId() {
		t.Fatal("a returned record aliases stored state")
	}
	for _, id := range []string{"absent", "", string(bytes.Repeat([]byte("x"), 300))} {
		_, err := getTask(t, s, "acme", id)
		wantCode(t, err, codes.NotFound, apierr.ReasonTaskNotFound)
	}
}

func testTaskSpec(t *testing.T, s store.Store) {
	putTasks(t, s, Task("acme", "t1", at(0)))
	spec := &storagev1.TaskSpecRecord{Spec: &storagev1.TaskSpecRecord_AgentId{AgentId: "echo"}, Input: textMessage("hi")}
	update(t, s, func(w store.Writer) error { return w.PutTaskSpec("acme", "t1", spec) })
	view(t, s, func(r store.Reader) error {
		got, err := r.GetTaskSpec("acme", "t1")
		if err != nil || !proto.Equal(got, spec) {
			t.Errorf("GetTaskSpec = %v, %v", got, err)
		}
		_, err = r.GetTaskSpec("other", "t1")
		wantCode(t, err, codes.NotFound, apierr.ReasonTaskNotFound)
		return nil
	})
	// The partial reads: without the resolved spec, and without the submitted inline spec.
	name := "big"
	agent := &agentplanev1.AgentSpec{Name: &name, Model: "m"}
	full := &storagev1.TaskSpecRecord{
		Spec:             &storagev1.TaskSpecRecord_Agent{Agent: agent},
		ResolvedSpec:     &agentplanev1.ResolvedSpec{Spec: &agentplanev1.ResolvedSpec_Agent{Agent: agent}},
		Input:            textMessage("hello"),
		InterruptTimeout: durationpb.New(time.Minute),
		ToolAxes:         []*agentplanev1.ToolAxisOverride{{Tool: "t", Egress: proto.Bool(true)}},
		McpServers:       []*agentplanev1.McpServer{{Name: "m", Url: "https://m.example.com", Headers: map[string]string{"a": "b"}}},
		A2APeers:         []*agentplanev1.A2APeer{{Name: "p", Url: "https://p.example.com"}},
	}
	putTasks(t, s, Task("acme", "t2", at(1)))
	update(t, s, func(w store.Writer) error { return w.PutTaskSpec("acme", "t2", full) })
	view(t, s, func(r store.Reader) error {
		want := proto.Clone(full).(*storagev1.TaskSpecRecord)
		want.ResolvedSpec = nil
		if got, err := r.GetTaskSpecPartial("acme", "t2", true); err != nil || !proto.Equal(got, want) {
			t.Errorf("GetTaskSpecPartial with the submitted spec = %v, %v; want %v", got, err, want)
		}
		want.Spec = nil
		if got, err := r.GetTaskSpecPartial("acme", "t2", false); err != nil || !proto.Equal(got, want) {
			t.Errorf("GetTaskSpecPartial = %v, %v; want %v", got, err, want)
		}
		if got, err := r.GetTaskSpecPartial("acme", "t1", false); err != nil || !proto.Equal(got, spec) {
			t.Errorf("GetTaskSpecPartial of a static agent = %v, %v; want %v (agent_id kept)", got, err, spec)
		}
		_, err := r.GetTaskSpecPartial("other", "t2", true)
		wantCode(t, err, codes.NotFound, apierr.ReasonTaskNotFound)
		return nil
	})
	if err := s.Update(context.Background(), func(w store.Writer) error { return w.PutTaskSpec("acme", "t1", spec) }); err == nil {
		t.Fatal("a second PutTaskSpec was accepted")
	}
	err := s.Update(context.Background(), func(w store.Writer) error { return w.PutTaskSpec("acme", "absent", spec) })
	wantCode(t, err, codes.NotFound, apierr.ReasonTaskNotFound)
}

func testTenantIsolation(t *testing.T, s store.Store) {
	a, b := Task("a", "same", at(0)), Task("ab", "same", at(1))
	b.SessionId = "tenant ab's"
	putTasks(t, s, a, b, Task("a", "other", at(2)))
	_, err := getTask(t, s, "b", "same")
	wantCode(t, err, codes.NotFound, apierr.ReasonTaskNotFound)
	got, err := getTask(t, s, "ab", "same")
	if err != nil || got.GetSessionId() != "tenant ab's" {
		t.Fatalf("GetTask(ab) = %v, %v", got, err)
	}
	equalStrings(t, "tenant a's tasks", taskIDs(t, s, "a", store.TaskRange{}), []string{"other", "same"})
	equalStrings(t, "tenant ab's tasks", taskIDs(t, s, "ab", store.TaskRange{}), []string{"same"})
	update(t, s, func(w store.Writer) error { return w.AppendEvents("a", "same", Event(1, "a")) })
	var n int
	view(t, s, func(r store.Reader) error {
		return r.ScanEvents("ab", "same", 0, func(*storagev1.EventRecord) (bool, error) { n++; return true, nil })
	})
	if n != 0 {
		t.Fatalf("tenant ab sees %d events of tenant a", n)
	}
}

func testRequestIndex(t *testing.T, s store.Store) {
	first := Task("acme", "t1", at(0))
	first.RequestId = "req-1"
	putTasks(t, s, first)
	view(t, s, func(r store.Reader) error {
		for _, tc := range []struct{ tenant, req, want string }{
			{"acme", "req-1", "t1"}, {"acme", "req-2", ""}, {"other", "req-1", ""},
		} {
			got, err := r.TaskForRequest(tc.tenant, tc.req)
			if err != nil || got != tc.want {
				t.Errorf("TaskForRequest(%s, %s) = %q, %v; want %q", tc.tenant, tc.req, got, err, tc.want)
			}
		}
		return nil
	})
	second := Task("acme", "t2", at(1))
	second.RequestId = "req-1"
	err := s.Update(context.Background(), func(w store.Writer) error { return w.PutTask(second) })
	wantCode(t, err, codes.AlreadyExists, apierr.ReasonRequestIDReused)
	if _, err := getTask(t, s, "acme", "t2"); !store.IsNotFound(err) {
		t.Fatalf("refused task was written: %v", err)
	}
	other := Task("other", "t2", at(1))
	other.RequestId = "req-1"
	putTasks(t, s, other) // request ids are per tenant
}

func testImmutableFields(t *testing.T, s store.Store) {
	rec := Task("acme", "t1", at(0))
	putTasks(t, s, rec)
	for name, mutate := range map[string]func(*storagev1.TaskRecord){
		"create_time": func(r *storagev1.TaskRecord) { r.CreateTime = timestamppb.New(at(5)) },
		"request_id":  func(r *storagev1.TaskRecord) { r.RequestId = "late" },
	} {
		t.Run(name, func(t *testing.T) {
			changed := proto.Clone(rec).(*storagev1.TaskRecord)
			mutate(changed)
			if err := s.Update(context.Background(), func(w store.Writer) error { return w.PutTask(changed) }); err == nil {
				t.Fatalf("changing %s was accepted", name)
			}
		})
	}
}

func testScanTasks(t *testing.T, s store.Store) {
	var recs []*storagev1.TaskRecord
	for i := range 10 {
		recs = append(recs, Task("acme", fmt.Sprintf("t%02d", i), at(i/2))) // pairs share a creation time
	}
	putTasks(t, s, recs...)
	putTasks(t, s, Task("acme2", "z", at(100)))
	all := taskIDs(t, s, "acme", store.TaskRange{})
	equalStrings(t, "newest first", all, []string{"t08", "t09", "t06", "t07", "t04", "t05", "t02", "t03", "t00", "t01"})
	equalStrings(t, "created in [1s, 3s)", taskIDs(t, s, "acme", store.TaskRange{CreatedAfter: at(1), CreatedBefore: at(3)}),
		[]string{"t04", "t05", "t02", "t03"})

	t.Run("paging", func(t *testing.T) {
		var got []string
		var cursor []byte
		for page := 0; ; page++ {
			if page > 10 {
				t.Fatal("paging does not end")
			}
			var ids []string
			view(t, s, func(r store.Reader) error {
				return r.ScanTasks("acme", store.TaskRange{After: cursor}, func(c []byte, rec *storagev1.TaskRecord) (bool, error) {
					ids = append(ids, rec.GetTaskId())
					cursor = c
					return len(ids) < 3, nil
				})
			})
			if len(ids) == 0 {
				break
			}
			got = append(got, ids...)
		}
		equalStrings(t, "pages", got, all)
	})
	t.Run("filter hint", func(t *testing.T) {
		// A filtered scan still passes every task with its cursor; a record the store
		// stepped over (nil) is one the filters exclude, and the one that matches comes
		// decoded. Which excluded tasks come nil is the store's choice.
		match := recs[3].GetTaskId()
		tr := store.TaskRange{States: []agentplanev1.TaskState{agentplanev1.TaskState_TASK_STATE_WORKING}, Labels: map[string]string{"pick": "yes"}}
		update(t, s, func(w store.Writer) error {
			rec := proto.Clone(recs[3]).(*storagev1.TaskRecord)
			rec.State, rec.Labels = agentplanev1.TaskState_TASK_STATE_WORKING, map[string]string{"pick": "yes", "other": "x"}
			return w.PutTask(rec)
		})
		var ids []string
		view(t, s, func(r store.Reader) error {
			i := 0
			return r.ScanTasks("acme", tr, func(_ []byte, rec *storagev1.TaskRecord) (bool, error) {
				switch {
				case rec == nil && all[i] == match:
					t.Errorf("the matching task %s came undecoded", match)
				case rec != nil && rec.GetTaskId() != all[i]:
					t.Errorf("task %d is %s, want %s", i, rec.GetTaskId(), all[i])
				}
				ids = append(ids, all[i])
				i++
				return true, nil
			})
		})
		equalStrings(t, "filtered scan", ids, all)
	})
	t.Run("cursor of another tenant", func(t *testing.T) {
		var foreign []byte
		view(t, s, func(r store.Reader) error {
			return r.ScanTasks("acme2", store.TaskRange{}, func(c []byte, _ *storagev1.TaskRecord) (bool, error) {
				foreign = c
				return false, nil
			})
		})
		err := s.View(context.Background(), func(r store.Reader) error {
			return r.ScanTasks("acme", store.TaskRange{After: foreign}, func([]byte, *storagev1.TaskRecord) (bool, error) {
				t.Fatal("scan went ahead with a foreign cursor")
				return false, nil
			})
		})
		wantCode(t, err, codes.InvalidArgument, apierr.ReasonPageTokenInvalid)
	})
}

func testEvents(t *testing.T, s store.Store) {
	putTasks(t, s, Task("acme", "t1", at(0)))
	update(t, s, func(w store.Writer) error { return w.AppendEvents("acme", "t1", Event(1, "a"), Event(2, "b")) })
	for name, evs := range map[string][]*storagev1.EventRecord{
		"gap":          {Event(4, "x")},
		"repeat":       {Event(2, "x")},
		"restart":      {Event(1, "x")},
		"gap in batch": {Event(3, "x"), Event(5, "y")},
	} {
		t.Run(name, func(t *testing.T) {
			if err := s.Update(context.Background(), func(w store.Writer) error { return w.AppendEvents("acme", "t1", evs...) }); err == nil {
				t.Fatal("append accepted")
			}
		})
	}
	err := s.Update(context.Background(), func(w store.Writer) error { return w.AppendEvents("acme", "absent", Event(1, "x")) })
	wantCode(t, err, codes.NotFound, apierr.ReasonTaskNotFound)
	update(t, s, func(w store.Writer) error { return w.AppendEvents("acme", "t1", Event(3, "c")) })
	for _, tc := range []struct {
		after int64
		want  []string
	}{{0, []string{"a", "b", "c"}}, {1, []string{"b", "c"}}, {3, nil}, {-5, []string{"a", "b", "c"}}} {
		var got []string
		view(t, s, func(r store.Reader) error {
			return r.ScanEvents("acme", "t1", tc.after, func(e *storagev1.EventRecord) (bool, error) {
				got = append(got, e.GetEvent().GetNote().GetText())
				return true, nil
			})
		})
		equalStrings(t, fmt.Sprintf("events after %d", tc.after), got, tc.want)
	}
}

func testTimeIndexes(t *testing.T, s store.Store) {
	q1, q2, q3 := Task("acme", "q1", at(0)), Task("acme", "q2", at(1)), Task("beta", "q3", at(2))
	q1.QueueTime, q2.QueueTime, q3.QueueTime = timestamppb.New(at(20)), timestamppb.New(at(10)), timestamppb.New(at(5))
	leased := Task("acme", "l1", at(3))
	leased.Lease = &storagev1.LeaseRecord{LeaseId: "L", Epoch: 1, Deadline: timestamppb.New(at(30))}
	ended := Task("gamma", "e1", at(4))
	ended.State, ended.EndTime = agentplanev1.TaskState_TASK_STATE_COMPLETED, timestamppb.New(at(40))
	putTasks(t, s, q1, q2, q3, leased, ended)

	equalStrings(t, "acme queue", queueIDs(t, s, "acme", "", time.Time{}), []string{"q2", "q1"})
	equalStrings(t, "acme queue until 10s", queueIDs(t, s, "acme", "", at(10)), []string{"q2"})
	equalStrings(t, "queue tenants", tenants(t, s, store.IndexQueue, ""), []string{"acme", "beta"})
	equalStrings(t, "queue tenants after acme", tenants(t, s, store.IndexQueue, "acme"), []string{"beta"})
	equalStrings(t, "lease deadlines", indexIDs(t, s, store.IndexLeaseDeadlines, "acme", at(30)), []string{"l1"})
	equalStrings(t, "lease deadlines until 29s", indexIDs(t, s, store.IndexLeaseDeadlines, "acme", at(29)), nil)
	equalStrings(t, "ended", indexIDs(t, s, store.IndexEnded, "gamma", time.Time{}), []string{"e1"})

	t.Run("paging", func(t *testing.T) {
		var first store.IndexEntry
		view(t, s, func(r store.Reader) error {
			return r.ScanQueue("acme", "", store.IndexRange{}, func(e store.IndexEntry) (bool, error) {
				first = e
				return false, nil
			})
		})
		if first.ID != "q2" || !first.At.Equal(at(10)) {
			t.Fatalf("first entry = %+v", first)
		}
		var rest []string
		view(t, s, func(r store.Reader) error {
			return r.ScanQueue("acme", "", store.IndexRange{After: first.Cursor}, func(e store.IndexEntry) (bool, error) {
				rest = append(rest, e.ID)
				return true, nil
			})
		})
		equalStrings(t, "after cursor", rest, []string{"q1"})
	})

	// Moving and clearing the driving fields moves and clears the entries.
	q1.QueueTime = nil
	q2.QueueTime = timestamppb.New(at(50))
	leased.Lease.Revoked = true
	putTasks(t, s, q1, q2, leased)
	equalStrings(t, "queue after dequeue", queueIDs(t, s, "acme", "", time.Time{}), []string{"q2"})
	equalStrings(t, "queue until 20s after move", queueIDs(t, s, "acme", "", at(20)), nil)
	equalStrings(t, "revoked lease", indexIDs(t, s, store.IndexLeaseDeadlines, "acme", time.Time{}), nil)
	equalStrings(t, "lease tenants", tenants(t, s, store.IndexLeaseDeadlines, ""), nil)
}

// testRunQueues: each named queue is its own FIFO, its depth is counted, and a task's
// queue is validated and immutable.
func testRunQueues(t *testing.T, s store.Store) {
	queued := func(tenant, id, queue string, sec int) *storagev1.TaskRecord {
		rec := Task(tenant, id, at(sec))
		rec.Queue, rec.QueueTime = queue, timestamppb.New(at(sec))
		return rec
	}
	g1, d1, g2, d2, b1 := queued("acme", "g1", "gpu", 3), queued("acme", "d1", "", 2), queued("acme", "g2", "gpu", 1),
		queued("acme", "d2", store.DefaultQueue, 4), queued("beta", "b1", "gpu", 5)
	putTasks(t, s, g1, d1, g2, d2, b1)
	equalStrings(t, "acme gpu", queueIDs(t, s, "acme", "gpu", time.Time{}), []string{"g2", "g1"})
	equalStrings(t, "acme default", queueIDs(t, s, "acme", store.DefaultQueue, time.Time{}), []string{"d1", "d2"})
	equalStrings(t, "acme default by its empty name", queueIDs(t, s, "acme", "", time.Time{}), []string{"d1", "d2"})
	equalStrings(t, "beta gpu", queueIDs(t, s, "beta", "gpu", time.Time{}), []string{"b1"})
	equalStrings(t, "acme gp (a prefix of gpu)", queueIDs(t, s, "acme", "gp", time.Time{}), nil)
	equalStrings(t, "queue tenants", tenants(t, s, store.IndexQueue, ""), []string{"acme", "beta"})
	depth := func(want map[string]int64) {
		t.Helper()
		st, err := s.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(st.QueueDepth) != fmt.Sprint(want) {
			t.Fatalf("queue depth = %v, want %v", st.QueueDepth, want)
		}
	}
	depth(map[string]int64{"default": 2, "gpu": 3})

	g2.QueueTime = nil // leased
	putTasks(t, s, g2)
	update(t, s, func(w store.Writer) error {
		_, err := w.DeleteTask("beta", "b1")
		return err
	})
	equalStrings(t, "acme gpu after a lease", queueIDs(t, s, "acme", "gpu", time.Time{}), []string{"g1"})
	depth(map[string]int64{"default": 2, "gpu": 1})

	moved := proto.CloneOf(g1)
	moved.Queue = "cpu"
	err := s.Update(context.Background(), func(w store.Writer) error { return w.PutTask(moved) })
	if err == nil {
		t.Fatal("a task's queue changed")
	}
	for _, bad := range []string{"-x", "a b", "é", strings.Repeat("q", 65)} {
		err := s.Update(context.Background(), func(w store.Writer) error { return w.PutTask(queued("acme", "bad", bad, 9)) })
		wantCode(t, err, codes.InvalidArgument, apierr.ReasonInvalidArgument)
		err = s.View(context.Background(), func(r store.Reader) error {
			return r.ScanQueue("acme", bad, store.IndexRange{}, func(store.IndexEntry) (bool, error) { return true, nil })
		})
		wantCode(t, err, codes.InvalidArgument, apierr.ReasonInvalidArgument)
	}
}

func testInterrupts(t *testing.T, s store.Store) {
	putTasks(t, s, Task("acme", "t1", at(0)), Task("acme", "t2", at(1)))
	i1, i2, i3 := Interrupt("acme", "t1", "i1", at(5)), Interrupt("acme", "t2", "i2", at(3)), Interrupt("acme", "t1", "i3", at(4))
	i3.Interrupt.Deadline = timestamppb.New(at(60))
	update(t, s, func(w store.Writer) error {
		for _, in := range []*storagev1.InterruptRecord{i1, i2, i3} {
			if err := w.PutInterrupt(in); err != nil {
				return err
			}
		}
		return nil
	})
	equalStrings(t, "inbox oldest first", indexIDs(t, s, store.IndexPendingInterrupts, "acme", time.Time{}), []string{"i2", "i3", "i1"})
	equalStrings(t, "inbox of another tenant", indexIDs(t, s, store.IndexPendingInterrupts, "other", time.Time{}), nil)
	equalStrings(t, "deadlines", indexIDs(t, s, store.IndexInterruptDeadlines, "acme", time.Time{}), []string{"i3"})
	var ofT1 []string
	view(t, s, func(r store.Reader) error {
		return r.ScanTaskInterrupts("acme", "t1", func(in *storagev1.InterruptRecord) (bool, error) {
			ofT1 = append(ofT1, in.GetInterrupt().GetInterruptId())
			return true, nil
		})
	})
	equalStrings(t, "t1's interrupts", ofT1, []string{"i1", "i3"})
	putTasks(t, s, Task("acme2", "t9", at(0)))
	update(t, s, func(w store.Writer) error { return w.PutInterrupt(Interrupt("acme2", "t9", "i0", at(0))) })
	for _, tc := range []struct {
		after string
		want  []string
	}{{"", []string{"i1", "i2", "i3"}}, {"i1", []string{"i2", "i3"}}, {"i3", nil}} {
		var got []string
		view(t, s, func(r store.Reader) error {
			return r.ScanInterrupts("acme", tc.after, func(in *storagev1.InterruptRecord) (bool, error) {
				got = append(got, in.GetInterrupt().GetInterruptId())
				return true, nil
			})
		})
		equalStrings(t, "acme's interrupts after "+tc.after, got, tc.want)
	}

	i3.Interrupt.State = agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED
	i1.ClosedReason = "task.canceled"
	update(t, s, func(w store.Writer) error {
		if err := w.PutInterrupt(i3); err != nil {
			return err
		}
		return w.PutInterrupt(i1)
	})
	equalStrings(t, "inbox after resolve and close", indexIDs(t, s, store.IndexPendingInterrupts, "acme", time.Time{}), []string{"i2"})
	equalStrings(t, "deadlines after resolve", indexIDs(t, s, store.IndexInterruptDeadlines, "acme", time.Time{}), nil)
	view(t, s, func(r store.Reader) error {
		got, err := r.GetInterrupt("acme", "i3")
		if err != nil || got.GetInterrupt().GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED {
			t.Errorf("GetInterrupt = %v, %v", got, err)
		}
		_, err = r.GetInterrupt("other", "i3")
		wantCode(t, err, codes.NotFound, apierr.ReasonInterruptNotFound)
		return nil
	})
	err := s.Update(context.Background(), func(w store.Writer) error {
		return w.PutInterrupt(Interrupt("acme", "absent", "i9", at(0)))
	})
	wantCode(t, err, codes.NotFound, apierr.ReasonTaskNotFound)
}

func testVerdictsAndObligations(t *testing.T, s store.Store) {
	putTasks(t, s, Task("acme", "t1", at(0)))
	update(t, s, func(w store.Writer) error {
		for _, seq := range []int64{7, 3} {
			v := &storagev1.VerdictRecord{Verdict: &agentplanev1.Verdict{VerdictId: fmt.Sprint("v", seq), TaskId: "t1", Sequence: seq}}
			if err := w.PutVerdict("acme", v); err != nil {
				return err
			}
		}
		for ord := int64(1); ord <= 3; ord++ {
			o := &storagev1.ObligationRecord{Ordinal: ord, Obligation: &agentplanev1.Obligation{ObligationId: fmt.Sprint(ord), Text: "fix"}}
			if err := w.PutObligation("acme", "t1", o); err != nil {
				return err
			}
		}
		return nil
	})
	var verdicts, obligations []string
	view(t, s, func(r store.Reader) error {
		if err := r.ScanVerdicts("acme", "t1", 0, func(v *storagev1.VerdictRecord) (bool, error) {
			verdicts = append(verdicts, v.GetVerdict().GetVerdictId())
			return true, nil
		}); err != nil {
			return err
		}
		if err := r.ScanObligations("acme", "t1", 1, func(o *storagev1.ObligationRecord) (bool, error) {
			obligations = append(obligations, o.GetObligation().GetObligationId())
			return true, nil
		}); err != nil {
			return err
		}
		if o, err := r.GetObligation("acme", "t1", 2); err != nil || o.GetOrdinal() != 2 {
			t.Errorf("GetObligation = %v, %v", o, err)
		}
		_, err := r.GetObligation("acme", "t1", 9)
		wantCode(t, err, codes.NotFound, apierr.ReasonObligationNotFound)
		return nil
	})
	equalStrings(t, "verdicts by sequence", verdicts, []string{"v3", "v7"})
	equalStrings(t, "obligations after #1", obligations, []string{"2", "3"})
	for name, fn := range map[string]func(store.Writer) error{
		"verdict of missing task": func(w store.Writer) error {
			return w.PutVerdict("acme", &storagev1.VerdictRecord{Verdict: &agentplanev1.Verdict{TaskId: "absent", Sequence: 1}})
		},
		"obligation of missing task": func(w store.Writer) error {
			return w.PutObligation("acme", "absent", &storagev1.ObligationRecord{Ordinal: 1})
		},
		"obligation ordinal 0": func(w store.Writer) error {
			return w.PutObligation("acme", "t1", &storagev1.ObligationRecord{})
		},
	} {
		t.Run(name, func(t *testing.T) {
			if err := s.Update(context.Background(), fn); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func testDeleteTask(t *testing.T, s store.Store) {
	doomed := Task("acme", "doomed", at(0))
	doomed.RequestId = "req"
	doomed.State, doomed.EndTime = agentplanev1.TaskState_TASK_STATE_CANCELED, timestamppb.New(at(9))
	doomed.Lease = &storagev1.LeaseRecord{LeaseId: "L", Epoch: 1, Deadline: timestamppb.New(at(30))}
	kept := Task("acme", "kept", at(1))
	kept.QueueTime = timestamppb.New(at(1))
	putTasks(t, s, doomed, kept)
	update(t, s, func(w store.Writer) error {
		for _, id := range []string{"doomed", "kept"} {
			if err := w.PutTaskSpec("acme", id, &storagev1.TaskSpecRecord{Input: textMessage(id)}); err != nil {
				return err
			}
			if err := w.AppendEvents("acme", id, Event(1, "a"), Event(2, "b")); err != nil {
				return err
			}
			in := Interrupt("acme", id, "i-"+id, at(2))
			in.Interrupt.Deadline = timestamppb.New(at(3))
			if err := w.PutInterrupt(in); err != nil {
				return err
			}
			if err := w.PutVerdict("acme", &storagev1.VerdictRecord{Verdict: &agentplanev1.Verdict{TaskId: id, Sequence: 2}}); err != nil {
				return err
			}
			if err := w.PutObligation("acme", id, &storagev1.ObligationRecord{Ordinal: 1}); err != nil {
				return err
			}
		}
		return nil
	})
	var d store.Deleted
	update(t, s, func(w store.Writer) error {
		var err error
		d, err = w.DeleteTask("acme", "doomed")
		return err
	})
	if d != (store.Deleted{Events: 2, Interrupts: 1, Verdicts: 1, Obligations: 1}) {
		t.Fatalf("Deleted = %+v", d)
	}
	_, err := getTask(t, s, "acme", "doomed")
	wantCode(t, err, codes.NotFound, apierr.ReasonTaskNotFound)
	equalStrings(t, "listing", taskIDs(t, s, "acme", store.TaskRange{}), []string{"kept"})
	equalStrings(t, "inbox", indexIDs(t, s, store.IndexPendingInterrupts, "acme", time.Time{}), []string{"i-kept"})
	equalStrings(t, "interrupt deadlines", indexIDs(t, s, store.IndexInterruptDeadlines, "acme", time.Time{}), []string{"i-kept"})
	equalStrings(t, "lease deadlines", indexIDs(t, s, store.IndexLeaseDeadlines, "acme", time.Time{}), nil)
	equalStrings(t, "ended", indexIDs(t, s, store.IndexEnded, "acme", time.Time{}), nil)
	equalStrings(t, "queue", queueIDs(t, s, "acme", store.DefaultQueue, time.Time{}), []string{"kept"})
	view(t, s, func(r store.Reader) error {
		if id, _ := r.TaskForRequest("acme", "req"); id != "" {
			t.Errorf("request index still names %q", id)
		}
		if _, err := r.GetTaskSpec("acme", "doomed"); !store.IsNotFound(err) {
			t.Errorf("spec survived: %v", err)
		}
		if _, err := r.GetInterrupt("acme", "i-doomed"); !store.IsNotFound(err) {
			t.Errorf("interrupt survived: %v", err)
		}
		n := 0
		_ = r.ScanEvents("acme", "doomed", 0, func(*storagev1.EventRecord) (bool, error) { n++; return true, nil })
		_ = r.ScanVerdicts("acme", "doomed", 0, func(*storagev1.VerdictRecord) (bool, error) { n++; return true, nil })
		_ = r.ScanObligations("acme", "doomed", 0, func(*storagev1.ObligationRecord) (bool, error) { n++; return true, nil })
		if n != 0 {
			t.Errorf("%d children survived", n)
		}
		return nil
	})
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Events != 2 || st.PendingInterrupts != 1 || st.ActiveLeases != 0 ||
		st.TasksByState[agentplanev1.TaskState_TASK_STATE_CANCELED] != 0 || st.TasksByState[agentplanev1.TaskState_TASK_STATE_SUBMITTED] != 1 {
		t.Fatalf("stats after delete = %+v", st)
	}
	err = s.Update(context.Background(), func(w store.Writer) error { _, err := w.DeleteTask("acme", "doomed"); return err })
	wantCode(t, err, codes.NotFound, apierr.ReasonTaskNotFound)
	again := Task("acme", "again", at(5))
	again.RequestId = "req"
	putTasks(t, s, again) // the request id is free again
}

var errBoom = errors.New("boom")

func testUpdateAtomic(t *testing.T, s store.Store) {
	err := s.Update(context.Background(), func(w store.Writer) error {
		if err := w.PutTask(Task("acme", "t1", at(0))); err != nil {
			return err
		}
		if err := w.AppendEvents("acme", "t1", Event(1, "a")); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update = %v, want the function's error", err)
	}
	if _, err := getTask(t, s, "acme", "t1"); !store.IsNotFound(err) {
		t.Fatalf("a failed Update left its task behind: %v", err)
	}
	if ids := taskIDs(t, s, "acme", store.TaskRange{}); len(ids) != 0 {
		t.Fatalf("a failed Update left index entries: %v", ids)
	}
	st, _ := s.Stats(context.Background())
	if st.Events != 0 || len(nonZero(st.TasksByState)) != 0 {
		t.Fatalf("a failed Update moved counters: %+v", st)
	}
}

func nonZero(m map[agentplanev1.TaskState]int64) map[agentplanev1.TaskState]int64 {
	out := map[agentplanev1.TaskState]int64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

func testOnCommit(t *testing.T, s store.Store) {
	var seen []string
	err := s.Update(context.Background(), func(w store.Writer) error {
		if err := w.PutTask(Task("acme", "t1", at(0))); err != nil {
			return err
		}
		w.OnCommit(func() {
			// The write is durable and visible when the hook runs.
			_, err := getTask(t, s, "acme", "t1")
			seen = append(seen, fmt.Sprint("committed:", err))
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	equalStrings(t, "hooks", seen, []string{"committed:<nil>"})
	_ = s.Update(context.Background(), func(w store.Writer) error {
		w.OnCommit(func() { seen = append(seen, "failed") })
		_ = w.PutTask(Task("acme", "t2", at(0)))
		return errBoom
	})
	equalStrings(t, "hooks after a failure", seen, []string{"committed:<nil>"})
}

// testConcurrentFailures runs many Updates at once, some failing before writing and
// some after, and checks that exactly the successful ones took effect.
func testConcurrentFailures(t *testing.T, s store.Store) {
	const n = 96
	var wg sync.WaitGroup
	errs := make([]error, n)
	hooks := make([]int, n)
	var mu sync.Mutex
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("t%03d", i)
			errs[i] = s.Update(context.Background(), func(w store.Writer) error {
				if i%7 == 3 {
					return errBoom // fails before writing
				}
				if err := w.PutTask(Task("acme", id, at(i))); err != nil {
					return err
				}
				if err := w.AppendEvents("acme", id, Event(1, id)); err != nil {
					return err
				}
				if i%5 == 1 {
					return errBoom // fails after writing: its batch-mates must survive it
				}
				w.OnCommit(func() { mu.Lock(); hooks[i]++; mu.Unlock() })
				return nil
			})
		})
	}
	wg.Wait()
	want := 0
	for i := range n {
		id := fmt.Sprintf("t%03d", i)
		fails := i%7 == 3 || i%5 == 1
		_, err := getTask(t, s, "acme", id)
		switch {
		case fails && !errors.Is(errs[i], errBoom):
			t.Errorf("%s: Update = %v, want its own error", id, errs[i])
		case fails && !store.IsNotFound(err):
			t.Errorf("%s failed but was written", id)
		case !fails && (errs[i] != nil || err != nil):
			t.Errorf("%s: Update = %v, read = %v", id, errs[i], err)
		case !fails && hooks[i] != 1:
			t.Errorf("%s: OnCommit ran %d times", id, hooks[i])
		case fails && hooks[i] != 0:
			t.Errorf("%s: OnCommit of a failed Update ran", id)
		}
		if !fails {
			want++
		}
	}
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Events != int64(want) || st.TasksByState[agentplanev1.TaskState_TASK_STATE_SUBMITTED] != int64(want) {
		t.Fatalf("stats = %+v, want %d tasks and events", st, want)
	}
}

// testConcurrentRMW has many callers append to one task's log at once; serializable
// Updates leave a gap-free log with every append.
func testConcurrentRMW(t *testing.T, s store.Store) {
	putTasks(t, s, Task("acme", "t1", at(0)))
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			err := s.Update(context.Background(), func(w store.Writer) error {
				rec, err := w.GetTask("acme", "t1")
				if err != nil {
					return err
				}
				rec.LastSequence++
				if err := w.AppendEvents("acme", "t1", Event(rec.GetLastSequence(), fmt.Sprint(i))); err != nil {
					return err
				}
				return w.PutTask(rec)
			})
			if err != nil {
				t.Errorf("Update: %v", err)
			}
		})
	}
	wg.Wait()
	rec, err := getTask(t, s, "acme", "t1")
	if err != nil || rec.GetLastSequence() != n {
		t.Fatalf("last_sequence = %d, %v; want %d", rec.GetLastSequence(), err, n)
	}
	var seqs []int64
	view(t, s, func(r store.Reader) error {
		return r.ScanEvents("acme", "t1", 0, func(e *storagev1.EventRecord) (bool, error) {
			seqs = append(seqs, e.GetSequence())
			return true, nil
		})
	})
	for i, seq := range seqs {
		if seq != int64(i+1) {
			t.Fatalf("log = %v, not 1..%d", seqs, n)
		}
	}
	if len(seqs) != n {
		t.Fatalf("log has %d events, want %d", len(seqs), n)
	}
}

func testSnapshot(t *testing.T, s store.Store) {
	putTasks(t, s, Task("acme", "before", at(0)))
	snap, err := s.Snapshot(context.Background())
	if !s.Features().HotBackup {
		// A store on a database backed up with its own tools says so, refuses, and
		// stays usable.
		var e *apierr.Error
		if !errors.As(err, &e) || e.Code != codes.FailedPrecondition || e.Reason != apierr.ReasonStoreBackupUnsupported {
			t.Fatalf("Snapshot without HotBackup = %v, want FAILED_PRECONDITION %s", err, apierr.ReasonStoreBackupUnsupported)
		}
		putTasks(t, s, Task("acme", "after", at(1)))
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	// A write while the snapshot is open must not wait for it.
	done := make(chan error, 1)
	go func() {
		done <- s.Update(context.Background(), func(w store.Writer) error { return w.PutTask(Task("acme", "after", at(1))) })
	}()
	if err := <-done; err != nil {
		t.Fatalf("Update during snapshot: %v", err)
	}
	var buf bytes.Buffer
	n, err := snap.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != snap.Size() || int64(buf.Len()) != n || n == 0 {
		t.Fatalf("WriteTo wrote %d bytes (buffer %d), Size says %d", n, buf.Len(), snap.Size())
	}
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
}

func testStats(t *testing.T, s store.Store) {
	running := Task("a", "r", at(0))
	running.State = agentplanev1.TaskState_TASK_STATE_WORKING
	running.Lease = &storagev1.LeaseRecord{LeaseId: "L", Epoch: 1, Deadline: timestamppb.New(at(30))}
	putTasks(t, s, Task("a", "s1", at(0)), Task("b", "s2", at(0)), running)
	update(t, s, func(w store.Writer) error {
		if err := w.AppendEvents("b", "s2", Event(1, "x"), Event(2, "y")); err != nil {
			return err
		}
		return w.PutInterrupt(Interrupt("a", "r", "i", at(1)))
	})
	running.State = agentplanev1.TaskState_TASK_STATE_COMPLETED
	running.Lease = nil
	putTasks(t, s, running)
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[agentplanev1.TaskState]int64{
		agentplanev1.TaskState_TASK_STATE_SUBMITTED: 2,
		agentplanev1.TaskState_TASK_STATE_COMPLETED: 1,
	}
	if fmt.Sprint(nonZero(st.TasksByState)) != fmt.Sprint(want) || st.Events != 2 || st.PendingInterrupts != 1 || st.ActiveLeases != 0 {
		t.Fatalf("stats = %+v", st)
	}
	if st.SchemaVersion < 1 || st.Commits < 1 || st.Updates < st.Commits {
		t.Fatalf("stats header = %+v", st)
	}
	// The log figures are a log's: zero without one, and a log that took these
	// writes holds them until a checkpoint.
	if f := s.Features(); !f.WriteAheadLog && (st.LogBytes != 0 || st.Checkpoints != 0 || st.CheckpointTime != 0) {
		t.Fatalf("store without a write-ahead log reports log figures: %+v", st)
	} else if f.WriteAheadLog && st.LogBytes == 0 && st.Checkpoints == 0 {
		t.Fatalf("store with a write-ahead log reports neither log bytes nor checkpoints after writes: %+v", st)
	}
	if f := s.Features(); f.Backend != store.BackendBolt && f.Backend != store.BackendPostgres {
		t.Fatalf("Features().Backend = %q, want one of the backends", f.Backend)
	}
}

func testCanceledContext(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Update(ctx, func(w store.Writer) error { return w.PutTask(Task("acme", "t1", at(0))) })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Update = %v, want context.Canceled", err)
	}
	if _, err := getTask(t, s, "acme", "t1"); !store.IsNotFound(err) {
		t.Fatalf("canceled Update wrote: %v", err)
	}
}

func testClosed(t *testing.T, s store.Store) {
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.View(context.Background(), func(store.Reader) error { return nil }), codes.Unavailable, apierr.ReasonUnavailable)
	wantCode(t, s.Update(context.Background(), func(store.Writer) error { return nil }), codes.Unavailable, apierr.ReasonUnavailable)
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

// textMessage is a user message of one text part.
func textMessage(text string) *agentplanev1.Message {
	return &agentplanev1.Message{Role: agentplanev1.MessageRole_MESSAGE_ROLE_USER, Parts: []*agentplanev1.Part{{Kind: &agentplanev1.Part_Text{Text: text}}}}
}
