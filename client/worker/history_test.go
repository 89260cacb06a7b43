package worker

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentplane/agentplane/client/worker/workertest"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// TestHistoryPagesUnderTheLease: Task.History reads the log through ReadTaskHistory
// pages (the fake's are 256 events), within its bounds, and stops when fn says so;
// it sends the lease, and the queues the worker serves reach LeaseTasks.
func TestHistoryPagesUnderTheLease(t *testing.T) {
	f := workertest.New(t)
	f.Do(func(s *workertest.State) {
		for i := range 600 {
			s.Events["t1"] = append(s.Events["t1"], &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_Note{
				Note: &agentplanev1.RuntimeNote{Text: fmt.Sprint(i + 1)}}})
		}
	})
	f.Enqueue("t1", func(l *agentplanev1.Lease) { l.Task.Queue = "history" })
	type read struct{ after, until, stopAt, want, first, last int64 }
	reads := []read{
		{0, 0, 0, 600, 1, 600},       // everything, three pages
		{100, 300, 0, 200, 101, 300}, // a window across a page boundary
		{0, 0, 257, 257, 1, 257},     // fn stops it
		{600, 0, 0, 0, 0, 0},         // nothing after the end
	}
	r := startWorker(t, f.Runtime(), func(ctx context.Context, task *Task) error {
		for _, rd := range reads {
			var got []int64
			err := task.History(ctx, rd.after, rd.until, func(ev *agentplanev1.TaskEvent) bool {
				got = append(got, ev.GetSequence())
				if ev.GetNote().GetText() != fmt.Sprint(ev.GetSequence()) {
					t.Errorf("event %d carries note %q", ev.GetSequence(), ev.GetNote().GetText())
				}
				return int64(len(got)) != rd.stopAt
			})
			if err != nil {
				return err
			}
			if int64(len(got)) != rd.want || len(got) > 0 && (got[0] != rd.first || got[len(got)-1] != rd.last) {
				t.Errorf("History(%d, %d) read %d events %v..., want %d from %d to %d", rd.after, rd.until, len(got), got[:min(3, len(got))], rd.want, rd.first, rd.last)
			}
		}
		return task.Complete(ctx, nil)
	}, func(o *Options) { o.MaxTasks, o.Queues = 1, []string{"history"} })
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	if s := snapshot(f); s.Ends["t1"] != workertest.Completed {
		t.Fatalf("ended %q (failure %v)", s.Ends["t1"], s.Failures["t1"])
	}
}
