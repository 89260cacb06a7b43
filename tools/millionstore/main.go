// Command millionstore writes a bbolt store of many tasks, quickly, for the "a million
// tasks" figures (docs/performance.md): it calls the store's own Writer (PutTask,
// PutTaskSpec, AppendEvents) in large Updates, not the API, so every index and counter
// is the one the control plane keeps, and the result is a store it opens as it is.
//
//	go run ./tools/millionstore --data-dir /tmp/million --tasks 1000000
//	go run ./cmd/controlplane --data-dir /tmp/million
//
// The mix: half the tasks in tenant "default" (what a single-user control plane
// lists), the rest spread over tenants tenant-01 to tenant-09; by state, 70%
// completed, 8% failed, 4% canceled, 10% submitted (queued on one of the work-N
// queues), 8% working (leased, the lease good for a day from now); each task has
// labels env (prod 60%, staging, dev), team (team-00 to team-49) and customer
// (c-0000 to c-9999), an inline agent spec, a request id, and 3 to 7 events (its
// submission, the lease, the assistant's messages, its end). Creation times are
// spread over the last --span, oldest first, as the control plane's ids are.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/boltstore"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/tasks"
)

func main() {
	var o options
	fs := flag.NewFlagSet("millionstore", flag.ExitOnError)
	fs.StringVar(&o.dataDir, "data-dir", "", "the control plane's data directory to create (the store is DIR/agentplane.db); must not hold a store")
	fs.IntVar(&o.tasks, "tasks", 1_000_000, "how many tasks to write")
	fs.IntVar(&o.batch, "batch", 2000, "tasks per store Update")
	fs.DurationVar(&o.span, "span", 30*24*time.Hour, "creation times are spread over this much time before now")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the mix (ids stay random)")
	_ = fs.Parse(os.Args[1:])
	if o.dataDir == "" {
		fmt.Fprintln(os.Stderr, "millionstore: --data-dir is required")
		os.Exit(2)
	}
	start := time.Now()
	sum, err := generate(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "millionstore:", err)
		os.Exit(1)
	}
	fi, err := os.Stat(filepath.Join(o.dataDir, "agentplane.db"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "millionstore:", err)
		os.Exit(1)
	}
	fmt.Printf("millionstore: %d tasks (%d in tenant default: %d working, %d submitted), %d events in %s; %s is %.0f MiB\n",
		sum.tasks, sum.defaultTasks, sum.defaultWorking, sum.defaultSubmitted, sum.events, time.Since(start).Round(time.Millisecond),
		fi.Name(), float64(fi.Size())/(1<<20))
}

type options struct {
	dataDir string
	tasks   int
	batch   int
	span    time.Duration
	seed    uint64
}

// summary counts what generate wrote.
type summary struct {
	tasks, events                                  int64
	defaultTasks, defaultWorking, defaultSubmitted int64
}

// task is one task's records, built ahead of the Update that writes them.
type task struct {
	rec    *storagev1.TaskRecord
	spec   *storagev1.TaskSpecRecord
	events []*storagev1.EventRecord
}

// generate writes o.tasks tasks into a new store under o.dataDir. The records are
// built on one goroutine while the previous batch is written on another.
func generate(ctx context.Context, o options) (summary, error) {
	var sum summary
	if o.batch <= 0 {
		o.batch = 2000
	}
	cfg := config.Config{DataDir: o.dataDir}
	if _, err := os.Stat(cfg.StorePath()); err == nil {
		return sum, fmt.Errorf("%s exists: give a data directory without a store", cfg.StorePath())
	} else if !errors.Is(err, os.ErrNotExist) {
		return sum, err
	}
	// Without the write-ahead log: the batches go straight to bbolt, written once.
	st, err := boltstore.Open(cfg.StorePath(), boltstore.Options{InitialMmapSize: 1 << 30})
	if err != nil {
		return sum, err
	}
	g := &gen{rng: mrand.New(mrand.NewPCG(o.seed, o.seed^0x9e3779b97f4a7c15)), now: time.Now().UTC(), span: o.span, n: o.tasks}
	batches := make(chan []task, 2)
	go func() {
		defer close(batches)
		for i := 0; i < o.tasks; {
			n := min(o.batch, o.tasks-i)
			b := make([]task, n)
			for j := range b {
				b[j] = g.task(i + j)
			}
			i += n
			select {
			case batches <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	for b := range batches {
		if err := st.Update(ctx, func(w store.Writer) error {
			for _, t := range b {
				if err := w.PutTask(t.rec); err != nil {
					return err
				}
				if err := w.PutTaskSpec(t.rec.GetTenant(), t.rec.GetTaskId(), t.spec); err != nil {
					return err
				}
				if err := w.AppendEvents(t.rec.GetTenant(), t.rec.GetTaskId(), t.events...); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			st.Close()
			return sum, err
		}
		for _, t := range b {
			sum.tasks++
			sum.events += int64(len(t.events))
			if t.rec.GetTenant() == "default" {
				sum.defaultTasks++
				switch t.rec.GetState() {
				case agentplanev1.TaskState_TASK_STATE_WORKING:
					sum.defaultWorking++
				case agentplanev1.TaskState_TASK_STATE_SUBMITTED:
					sum.defaultSubmitted++
				}
			}
		}
	}
	if err := ctx.Err(); err != nil {
		st.Close()
		return sum, err
	}
	return sum, st.Close()
}

// gen builds the tasks, the i-th of n created at an even step from now-span to now.
type gen struct {
	rng  *mrand.Rand
	now  time.Time
	span time.Duration
	n    int
}

func (g *gen) pick(weights ...int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	x := g.rng.IntN(total)
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(weights) - 1
}

func (g *gen) task(i int) task {
	created := g.now.Add(-g.span + time.Duration(float64(g.span)*float64(i)/float64(max(g.n, 1))))
	tenant := "default"
	if g.rng.IntN(2) == 1 {
		tenant = fmt.Sprintf("tenant-%02d", 1+g.rng.IntN(9))
	}
	id := tasks.NewIDAt(created)
	digest := make([]byte, 32)
	_, _ = rand.Read(digest)
	input := client.UserText(fmt.Sprintf("Please look into ticket %d for customer %d.", i, g.rng.IntN(10000)))
	rec := &storagev1.TaskRecord{
		TaskId:        id,
		Tenant:        tenant,
		State:         agentplanev1.TaskState_TASK_STATE_SUBMITTED,
		RequestId:     "req-" + id,
		RequestDigest: digest,
		Labels: map[string]string{
			"env":      []string{"prod", "staging", "dev"}[g.pick(60, 25, 15)],
			"team":     fmt.Sprintf("team-%02d", g.rng.IntN(50)),
			"customer": fmt.Sprintf("c-%04d", g.rng.IntN(10000)),
		},
		CreateTime: timestamppb.New(created),
		CreatedBy:  "owner",
		SpecKind:   tasks.KindAgent,
		Queue:      fmt.Sprintf("work-%d", g.rng.IntN(8)),
	}
	spec := &storagev1.TaskSpecRecord{
		Spec: &storagev1.TaskSpecRecord_Agent{Agent: &agentplanev1.AgentSpec{
			ApiVersion:   "qar/v1",
			Kind:         tasks.KindAgent,
			Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "You are a support agent. Be brief and cite the ticket."}},
			Model:        "gpt-4.1-mini",
		}},
		Input: input,
	}
	t := task{rec: rec, spec: spec}
	at := created
	add := func(ev *agentplanev1.TaskEvent, epoch int64) {
		at = at.Add(time.Duration(200+g.rng.IntN(3000)) * time.Millisecond)
		rec.LastSequence++
		rec.HistoryBytes += int64(proto.Size(ev))
		t.events = append(t.events, &storagev1.EventRecord{Sequence: rec.GetLastSequence(), Time: timestamppb.New(at), Epoch: epoch, Event: ev})
	}
	state := func(from, to agentplanev1.TaskState, reason string) *agentplanev1.TaskEvent {
		return &agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_StateChanged{StateChanged: &agentplanev1.StateChanged{FromState: from, ToState: to, Reason: reason}}}
	}
	add(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_Submitted{Submitted: &agentplanev1.TaskSubmitted{
		Input: input, Kind: tasks.KindAgent, CreatedBy: "owner"}}}, 0)
	final := []agentplanev1.TaskState{
		agentplanev1.TaskState_TASK_STATE_COMPLETED, agentplanev1.TaskState_TASK_STATE_FAILED,
		agentplanev1.TaskState_TASK_STATE_CANCELED, agentplanev1.TaskState_TASK_STATE_SUBMITTED,
		agentplanev1.TaskState_TASK_STATE_WORKING,
	}[g.pick(70, 8, 4, 10, 8)]
	if final == agentplanev1.TaskState_TASK_STATE_SUBMITTED {
		rec.QueueTime = rec.GetCreateTime()
		rec.UpdateTime = rec.GetCreateTime()
		return t
	}
	// Leased once.
	rec.Epoch, rec.Attempt = 1, 1
	add(state(agentplanev1.TaskState_TASK_STATE_SUBMITTED, agentplanev1.TaskState_TASK_STATE_WORKING, "leased"), 0)
	rec.State = agentplanev1.TaskState_TASK_STATE_WORKING
	rec.Lease = &storagev1.LeaseRecord{LeaseId: tasks.NewIDAt(at), Epoch: 1, RuntimeId: fmt.Sprintf("runtime-%d", g.rng.IntN(100)),
		GrantTime: timestamppb.New(at), Deadline: timestamppb.New(g.now.Add(24 * time.Hour)), Acknowledged: true}
	for range 1 + g.rng.IntN(3) {
		add(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_Message{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT,
			"Checked the ticket's history; the refund was issued on the 3rd and is on its way.")}}, 1)
	}
	end := func(to agentplanev1.TaskState, reason string) {
		add(state(agentplanev1.TaskState_TASK_STATE_WORKING, to, reason), 0)
		rec.State, rec.EndTime = to, timestamppb.New(at)
		rec.Lease.Revoked = true
	}
	switch final {
	case agentplanev1.TaskState_TASK_STATE_COMPLETED:
		out := &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "Done: refund confirmed.")}
		add(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_Output{Output: out}}, 1)
		rec.Output = out
		end(final, "completed")
	case agentplanev1.TaskState_TASK_STATE_FAILED:
		rec.Failure = &agentplanev1.TaskFailure{Reason: "RUNTIME_FAILED", Message: "the model provider returned 503 three times"}
		end(final, "RUNTIME_FAILED")
	case agentplanev1.TaskState_TASK_STATE_CANCELED:
		add(&agentplanev1.TaskEvent{Payload: &agentplanev1.TaskEvent_CancelRequested{CancelRequested: &agentplanev1.CancelRequested{
			Reason: "no longer needed", RequestedBy: "owner"}}}, 0)
		rec.Cancellation = &storagev1.Cancellation{Reason: "no longer needed", RequestedBy: "owner", Time: timestamppb.New(at)}
		end(final, "canceled")
	}
	rec.UpdateTime = timestamppb.New(at)
	return t
}
