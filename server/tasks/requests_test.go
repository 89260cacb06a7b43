package tasks

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

func request(t *testing.T, m proto.Message) Request {
	t.Helper()
	r, err := NewRequest(m)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestContinueIDOutlivesABusyTurn: the request id of a ContinueTask is still known
// after the runtime's next turn made more keyed writes than a task remembers, so a
// retry that arrives then is not delivered as the next turn's message.
func TestContinueIDOutlivesABusyTurn(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	l := h.lease(t, "rt")
	if _, _, err := h.m.Pause(ctx, ref(l), Request{}, nil, "main", nil); err != nil {
		t.Fatal(err)
	}
	cont := &agentplanev1.ContinueTaskRequest{TaskId: task.GetTaskId(), Input: &agentplanev1.ContinueTaskRequest_Message{Message: userText("go on")}, RequestId: "u1"}
	if _, err := h.m.Continue(ctx, "acme", task.GetTaskId(), "owner", cont.GetMessage(), nil, request(t, cont)); err != nil {
		t.Fatal(err)
	}
	l = h.lease(t, "rt")
	for i := range 2 * maxAppliedRequests {
		rep := &agentplanev1.ReportEventsRequest{Lease: ref(l), Events: []*agentplanev1.RuntimeEvent{note("n")}, RequestId: fmt.Sprint("r", i)}
		if _, err := h.m.ReportEvents(ctx, ref(l), request(t, rep), rep.GetEvents()); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := h.m.Pause(ctx, ref(l), Request{}, nil, "main", nil); err != nil {
		t.Fatal(err)
	}
	before := h.get(t, "acme", task.GetTaskId())
	got, err := h.m.Continue(ctx, "acme", task.GetTaskId(), "owner", cont.GetMessage(), nil, request(t, cont))
	if err != nil {
		t.Fatalf("retried Continue: %v", err)
	}
	if got.GetState() != agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED || got.GetLastSequence() != before.GetLastSequence() {
		t.Fatalf("the retry was delivered: %s at sequence %d (was %d)", got.GetState(), got.GetLastSequence(), before.GetLastSequence())
	}
	if n := len(h.record(t, "acme", task.GetTaskId()).GetAppliedRequests()); n != 1+maxAppliedRequests {
		t.Fatalf("the task remembers %d request ids, want %d", n, 1+maxAppliedRequests)
	}
}

func TestRequestIDBounds(t *testing.T) {
	_, err := NewRequest(&agentplanev1.CancelTaskRequest{TaskId: "t", RequestId: strings.Repeat("x", maxIDBytes+1)})
	wantErr(t, err, codes.InvalidArgument, apierr.ReasonInvalidArgument)
	a := request(t, &agentplanev1.CancelTaskRequest{TaskId: "t", RequestId: "same"})
	b := request(t, &agentplanev1.CancelTaskRequest{TaskId: "t", Reason: "other", RequestId: "same"})
	c := request(t, &agentplanev1.ContinueTaskRequest{TaskId: "t", RequestId: "same"})
	if string(a.Digest) == string(b.Digest) || string(a.Digest) == string(c.Digest) {
		t.Fatal("different requests under one id have the same digest")
	}
	if r := request(t, &agentplanev1.CancelTaskRequest{TaskId: "t"}); r.ID != "" {
		t.Fatal("a request without an id is keyed")
	}
}

// record reads a task's stored record.
func (h *harness) record(t testing.TB, tenant, id string) *storagev1.TaskRecord {
	t.Helper()
	var rec *storagev1.TaskRecord
	if err := h.store.View(ctx, func(r store.Reader) error {
		var err error
		rec, err = r.GetTask(tenant, id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return rec
}
