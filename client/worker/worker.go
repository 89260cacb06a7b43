package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Handler runs one leased task. See the package documentation for the contract.
type Handler interface {
	Run(ctx context.Context, t *Task) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, t *Task) error

// Run calls f.
func (f HandlerFunc) Run(ctx context.Context, t *Task) error { return f(ctx, t) }

// Delivery says how a gated tool call waits for its decision.
type Delivery int

const (
	// DeliveryDefault means the worker's Options.Delivery (Interactive unless set).
	DeliveryDefault Delivery = iota
	// Interactive waits on AwaitDecision while heartbeats keep the lease.
	Interactive
	// Durable gives the lease up (SuspendTask); the decision comes with a later lease.
	Durable
)

// Options configure a Worker.
type Options struct {
	// RuntimeID identifies this runtime process to the control plane. Required.
	RuntimeID string
	// Queues are the run queues this runtime serves (at most 16); none means only the
	// default queue. Tasks started on other queues are never leased to it.
	Queues []string
	// Capacity is how many tasks run at once; default 1.
	Capacity int
	// MaxTasks stops leasing after this many leases, then Run returns once they
	// end; 0 means no limit.
	MaxTasks int
	// PollWait is how long one LeaseTasks call waits for work; default 20s (the server
	// caps it at 30s).
	PollWait time.Duration
	// Delivery is how gated tool calls wait by default; default Interactive.
	Delivery Delivery
	// RetryOnError returns a task to the queue (FailTask retry=true) when its handler
	// returns an error that is not a *Failure, instead of failing it.
	RetryOnError bool
	// HeartbeatFraction is the fraction of the time left on the lease after which the
	// next heartbeat is sent; default 1/3, so two heartbeats can fail before expiry.
	HeartbeatFraction float64
	// WriteTimeout bounds the writes the worker makes on its own (failing a task
	// whose handler returned an error, handing tasks back on stop); default 10s.
	WriteTimeout time.Duration
	// DrainTimeout bounds how long Stop lets running tasks finish on their own before
	// it hands them back (a task waiting for a decision is suspended, any other is
	// returned to the queue); default 20s, under the 30s that systemd and Kubernetes
	// leave between SIGTERM and SIGKILL. Stop's context can only shorten it.
	DrainTimeout time.Duration
	// Backoff paces retries of transient errors.
	Backoff Backoff
	// Logger receives the worker's log; default slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.RuntimeID == "" {
		return o, errors.New("worker: Options.RuntimeID is required")
	}
	if o.Capacity < 0 || o.MaxTasks < 0 || o.PollWait < 0 || o.WriteTimeout < 0 || o.DrainTimeout < 0 {
		return o, errors.New("worker: Capacity, MaxTasks, PollWait, WriteTimeout and DrainTimeout must not be negative")
	}
	if o.HeartbeatFraction < 0 || o.HeartbeatFraction >= 1 {
		return o, fmt.Errorf("worker: HeartbeatFraction %v must be in (0, 1)", o.HeartbeatFraction)
	}
	if o.Capacity == 0 {
		o.Capacity = 1
	}
	if o.PollWait == 0 {
		o.PollWait = 20 * time.Second
	}
	if o.Delivery == DeliveryDefault {
		o.Delivery = Interactive
	}
	if o.HeartbeatFraction == 0 {
		o.HeartbeatFraction = 1.0 / 3
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	o.Backoff = o.Backoff.withDefaults()
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// DefaultDrainTimeout is Options.DrainTimeout's default.
const DefaultDrainTimeout = 20 * time.Second

// pollGrace is added to the long-poll wait to form the call's deadline, so a server
// that holds the poll for the full wait is not cut off, and a dead connection is.
const pollGrace = 10 * time.Second

// Worker leases tasks and runs them with a Handler. Create it with New, run it with
// Run, stop it with Stop (graceful) or by canceling Run's context (immediate).
type Worker struct {
	rt  agentplanev1.RuntimeServiceClient
	h   Handler
	o   Options
	log *slog.Logger

	slots chan struct{} // one token per free capacity slot

	started  atomic.Bool
	stopOnce sync.Once
	stopping chan struct{} // closed by Stop: lease no more
	done     chan struct{} // closed when Run returns

	// abort cancels every running task's context with a cause; set by Run.
	abortMu sync.Mutex
	abort   context.CancelCauseFunc

	tasks  sync.WaitGroup
	leased int // leases granted so far; touched only by the poll loop
}

// New returns a worker that leases from rt and runs tasks with h.
func New(rt agentplanev1.RuntimeServiceClient, h Handler, o Options) (*Worker, error) {
	if rt == nil || h == nil {
		return nil, errors.New("worker: nil RuntimeServiceClient or Handler")
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	w := &Worker{
		rt:       rt,
		h:        h,
		o:        o,
		log:      o.Logger.With("runtime_id", o.RuntimeID),
		slots:    make(chan struct{}, o.Capacity),
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
	}
	for range o.Capacity {
		w.slots <- struct{}{}
	}
	return w, nil
}

// Run leases and runs tasks until ctx is done, Stop is called, MaxTasks leases were
// taken, or LeaseTasks fails permanently. It returns after every task goroutine has
// returned. When ctx is done, running tasks are canceled at once (cause ErrStopping)
// and handed back to the queue. The result is nil except for a permanent LeaseTasks
// error. Run may be called once.
func (w *Worker) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("worker: Run called twice")
	}
	defer close(w.done)

	// Task contexts keep ctx's values but not its cancellation: stopping is decided
	// here, so that a handler sees one cause for it.
	base, abort := context.WithCancelCause(context.WithoutCancel(ctx))
	defer abort(nil)
	w.abortMu.Lock()
	w.abort = abort
	w.abortMu.Unlock()

	pollCtx, cancelPoll := context.WithCancel(ctx)
	defer cancelPoll()
	go func() {
		select {
		case <-w.stopping:
		case <-pollCtx.Done():
		}
		cancelPoll()
	}()

	err := w.poll(pollCtx, base)
	if ctx.Err() != nil {
		abort(ErrStopping)
	}
	w.tasks.Wait()
	return err
}

// Stop stops leasing and waits for the running tasks to end on their own, for at
// most Options.DrainTimeout. When that passes, or ctx is done, first, it cancels them
// (cause ErrStopping), which hands them back (see the package documentation), and
// still waits for their handlers to return; it then returns context.DeadlineExceeded
// or ctx's error. Stop before Run is a no-op.
func (w *Worker) Stop(ctx context.Context) error {
	w.stopOnce.Do(func() { close(w.stopping) })
	if !w.started.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.o.DrainTimeout)
	defer cancel()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
	}
	w.abortMu.Lock()
	abort := w.abort
	w.abortMu.Unlock()
	if abort != nil {
		abort(ErrStopping)
	}
	<-w.done
	return ctx.Err()
}

// poll is the lease loop.
func (w *Worker) poll(ctx, base context.Context) error {
	failures := 0
	for w.o.MaxTasks == 0 || w.leased < w.o.MaxTasks {
		n := w.acquire(ctx)
		if n == 0 {
			return nil // stopping
		}
		if w.o.MaxTasks > 0 && n > w.o.MaxTasks-w.leased {
			w.release(n - (w.o.MaxTasks - w.leased))
			n = w.o.MaxTasks - w.leased
		}
		began := time.Now()
		leases, err := w.lease(ctx, n)
		if err != nil {
			w.release(n)
			if ctx.Err() != nil {
				return nil
			}
			if !IsTransient(err) {
				return fmt.Errorf("worker: lease tasks: %w", err)
			}
			failures++
			delay := w.o.Backoff.Delay(failures)
			w.log.Warn("lease tasks failed; retrying", "err", err, "retry_in", delay)
			sleep(ctx, delay)
			continue
		}
		failures = 0
		if len(leases) > n {
			// The server granted more than asked; running them would exceed the
			// capacity the operator chose, so hand the extras back at once.
			for _, l := range leases[n:] {
				w.handBack(newTask(w, l), "runtime.over_capacity", "lease granted beyond the capacity the runtime asked for")
			}
			leases = leases[:n]
		}
		for _, l := range leases {
			w.leased++
			w.start(base, newTask(w, l))
		}
		w.release(n - len(leases))
		// An empty answer well before the wait elapsed means the server does not hold
		// polls; pause so that the loop does not spin.
		if len(leases) == 0 && time.Since(began) < w.o.PollWait/2 {
			sleep(ctx, w.o.Backoff.Initial)
		}
	}
	return nil
}

func (w *Worker) lease(ctx context.Context, n int) ([]*agentplanev1.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, w.o.PollWait+pollGrace)
	defer cancel()
	resp, err := w.rt.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{
		RuntimeId: w.o.RuntimeID,
		MaxTasks:  int32(n),
		Wait:      durationpb.New(w.o.PollWait),
		Queues:    w.o.Queues,
	})
	return resp.GetLeases(), err
}

// acquire blocks until at least one slot is free, takes every free slot and returns
// how many it took; 0 when ctx is done.
func (w *Worker) acquire(ctx context.Context) int {
	select {
	case <-ctx.Done():
		return 0
	case <-w.slots:
	}
	n := 1
	for {
		select {
		case <-w.slots:
			n++
		default:
			return n
		}
	}
}

func (w *Worker) release(n int) {
	for range n {
		w.slots <- struct{}{}
	}
}

// start runs t in its own goroutine; its slot is released when it ends.
func (w *Worker) start(base context.Context, t *Task) {
	w.tasks.Add(1)
	go func() {
		defer w.tasks.Done()
		defer w.release(1)
		w.runTask(base, t)
	}()
}

func (w *Worker) runTask(base context.Context, t *Task) {
	ctx, cancel := context.WithCancelCause(base)
	defer cancel(nil)
	t.cancel = cancel
	t.log.Debug("task leased", "attempt", t.lease.GetAttempt(), "deadline", t.Deadline())
	// Acknowledge the lease first. A task found canceled or lost by it still goes to
	// the handler, whose context is then done with the cause.
	w.acknowledge(ctx, t)

	hbCtx, stopHeartbeat := context.WithCancel(ctx)
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		w.heartbeat(hbCtx, t)
	}()

	err := w.callHandler(ctx, t)
	stopHeartbeat()
	<-hbDone
	w.finish(ctx, t, err)
}

// callHandler runs the handler, turning a panic into an error so that one bad task
// does not take the runtime down.
func (w *Worker) callHandler(ctx context.Context, t *Task) (err error) {
	defer func() {
		if p := recover(); p != nil {
			t.log.Error("handler panicked", "panic", p, "stack", string(debug.Stack()))
			err = &Failure{Reason: "runtime.panic", Message: fmt.Sprint("handler panicked: ", p), Retry: w.o.RetryOnError}
		}
	}()
	return w.h.Run(ctx, t)
}

// finish applies the handler contract once the handler returned.
func (w *Worker) finish(ctx context.Context, t *Task, err error) {
	if end := t.endedAs(); end != "" {
		if err != nil && !errors.Is(err, ErrSuspended) {
			t.log.Debug("handler returned an error after the task ended", "ended", end, "err", err)
		}
		return
	}
	if cause := context.Cause(ctx); cause != nil {
		switch {
		case errors.Is(cause, ErrStopping) && t.stoppedWaiting():
			// Suspended, not failed: the task waits for its decision without a lease and
			// without counting an attempt, and whichever runtime is up when the decision
			// comes resumes it.
			w.suspendOnStop(t)
		case errors.Is(cause, ErrStopping):
			w.handBack(t, "runtime.stopping", "the runtime stopped before the task ended")
		default:
			// Canceled or lease lost: the task is not ours to write to any more.
			t.log.Info("task stopped", "cause", cause)
		}
		return
	}
	if err == nil {
		t.log.Warn("handler returned without completing, failing, pausing or suspending the task; its lease will expire and the task will be queued again")
		return
	}
	f := &Failure{Reason: "runtime.error", Message: err.Error(), Retry: w.o.RetryOnError}
	if errors.As(err, &f) && f.Reason == "" {
		f = &Failure{Reason: "runtime.error", Message: f.Message, Retry: f.Retry}
	}
	wctx, cancel := w.writeContext(ctx)
	defer cancel()
	if ferr := t.Fail(wctx, f.Reason, f.Message, f.Retry); ferr != nil {
		t.log.Error("could not fail the task after its handler returned an error", "handler_err", err, "err", ferr)
	}
}

// handBack returns a task to the queue with FailTask(retry=true).
func (w *Worker) handBack(t *Task, reason, message string) {
	ctx, cancel := w.writeContext(context.Background())
	defer cancel()
	if err := t.Fail(ctx, reason, message, true); err != nil {
		t.log.Warn("could not hand the task back; its lease will expire", "err", err)
	}
}

// suspendOnStop gives up the lease of a task stopped while it waited for a decision
// (SuspendTask): the task waits in INPUT_REQUIRED, and the decision queues it again.
func (w *Worker) suspendOnStop(t *Task) {
	ctx, cancel := w.writeContext(context.Background())
	defer cancel()
	if err := t.Suspend(ctx); err != nil {
		t.log.Warn("could not suspend the task; its lease will expire", "err", err)
		return
	}
	t.log.Info("task suspended on stop: it resumes once its decision is made")
}

// writeContext is for writes the worker makes after the task's context may be done.
func (w *Worker) writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), w.o.WriteTimeout)
}
