package tasks

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

func TestReadHistoryPagesUnderTheLease(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	old := h.lease(t, "rt-1")
	if _, err := h.m.Fail(ctx, ref(old), Request{}, "", "", true); err != nil {
		t.Fatal(err)
	}
	l := h.lease(t, "rt-2")
	var notes []*agentplanev1.RuntimeEvent
	for range 5 {
		notes = append(notes, note("n"))
	}
	last, err := h.m.ReportEvents(ctx, ref(l), Request{}, notes)
	if err != nil {
		t.Fatal(err)
	}

	// Pages of 4 from the start reach the end with no gap and no repeat.
	var seqs []int64
	for after := int64(0); ; {
		page, newest, err := h.m.ReadHistory(ctx, ref(l), after, 4)
		if err != nil {
			t.Fatal(err)
		}
		if newest != last || len(page) > 4 {
			t.Fatalf("page after %d: %d events, newest %d; want at most 4, newest %d", after, len(page), newest, last)
		}
		if len(page) == 0 {
			break
		}
		for _, ev := range page {
			if ev.GetTaskId() != task.GetTaskId() {
				t.Fatalf("event of task %q", ev.GetTaskId())
			}
			seqs = append(seqs, ev.GetSequence())
		}
		after = page[len(page)-1].GetSequence()
	}
	if len(seqs) != int(last) || seqs[0] != 1 || seqs[len(seqs)-1] != last {
		t.Fatalf("read sequences %v; want 1..%d", seqs, last)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("read sequences %v have a gap or a repeat", seqs)
		}
	}
	if page, _, err := h.m.ReadHistory(ctx, ref(l), last-1, 0); err != nil || len(page) != 1 || page[0].GetNote() == nil {
		t.Fatalf("the last event = %v, %v", page, err)
	}
	_, _, err = h.m.ReadHistory(ctx, ref(l), -1, 0)
	wantErr(t, err, codes.InvalidArgument, apierr.ReasonInvalidArgument)

	// Fenced like a write: the earlier lease, a forged one, an expired one.
	_, _, err = h.m.ReadHistory(ctx, ref(old), 0, 0)
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonLeaseLost)
	_, _, err = h.m.ReadHistory(ctx, &agentplanev1.LeaseRef{TaskId: task.GetTaskId(), LeaseId: "bogus", Epoch: l.GetEpoch()}, 0, 0)
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonLeaseLost)
	h.clock.Advance(10 * time.Second)
	_, _, err = h.m.ReadHistory(ctx, ref(l), 0, 0)
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonLeaseLost)

	// Once the task ended under a lease, reads under it say so.
	l = h.lease(t, "rt-3")
	if _, err := h.m.Complete(ctx, ref(l), Request{}, &agentplanev1.TaskOutput{Message: assistantText("done")}); err != nil {
		t.Fatal(err)
	}
	_, _, err = h.m.ReadHistory(ctx, ref(l), 0, 0)
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonTaskTerminal)
}
