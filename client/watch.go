package client

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

const watchMethod = "/agentplane.v1.TaskService/WatchTask"

// Watch follows a task's events after afterSequence (0: from its first event), as
// WatchTask does, and survives a dropped connection or a server restart: when the stream
// breaks with an error Retryable allows for WatchTask (UNAVAILABLE, say), it is reopened
// after the last event it delivered, so the events come with no gap and no duplicate
// (message deltas sent meanwhile are lost; the full message follows as an event). It
// gives up, returning the last error, after WatchReconnects reopenings in a row without
// a message in between, with the backoff of the client's Retry, once they have taken
// at least WatchReconnects times the Retry's longest pause (20 s by default): gRPC
// backs off reconnecting a lost server by itself (1 s, then 1.6 times longer each
// time), and the reopenings it fails at once meanwhile must not use the budget up
// before the channel tries again (a server away for a few seconds, then back, costs
// the watch nothing). Recv returns io.EOF after the task's terminal event; any other
// error (TASK_NOT_FOUND, ...) at once. The same policy as the Python SDK's watch
// (TypeScript's counts the reopenings alone; docs/clients.md, "Retries, request ids
// and reconnection"). Cancel ctx to stop it.
func (c *Client) Watch(ctx context.Context, taskID string, afterSequence int64) (agentplanev1.TaskService_WatchTaskClient, error) {
	w := &taskWatch{c: c, ctx: ctx, taskID: taskID, last: afterSequence}
	if err := w.open(); err != nil && !Retryable(watchMethod, err) {
		return nil, err
	}
	return w, nil
}

// taskWatch is a WatchTask stream that reopens itself; it is what Watch returns.
type taskWatch struct {
	c        *Client
	ctx      context.Context
	taskID   string
	last     int64     // the sequence of the last event delivered
	failures int       // reopenings in a row without a message
	failing  time.Time // when the first of them failed

	mu      sync.Mutex
	stream  agentplanev1.TaskService_WatchTaskClient // nil while broken
	openErr error                                    // why the last open failed
}

func (w *taskWatch) open() error {
	s, err := w.c.Tasks.WatchTask(w.ctx, &agentplanev1.WatchTaskRequest{TaskId: w.taskID, AfterSequence: w.last})
	w.mu.Lock()
	w.stream, w.openErr = s, err
	if err != nil {
		w.stream = nil
	}
	w.mu.Unlock()
	return err
}

func (w *taskWatch) current() agentplanev1.TaskService_WatchTaskClient {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stream
}

func (w *taskWatch) retry() Retry {
	if w.c.retry.Attempts == 0 {
		return Retry{}.withDefaults()
	}
	return w.c.retry
}

// Recv returns the next message: an event after the last one delivered, a caught_up
// marker, a keepalive or a message delta.
func (w *taskWatch) Recv() (*agentplanev1.WatchTaskResponse, error) {
	for {
		var err error
		if s := w.current(); s != nil {
			var m *agentplanev1.WatchTaskResponse
			m, err = s.Recv()
			if err == nil {
				w.failures = 0
				if ev := m.GetEvent(); ev != nil {
					if ev.GetSequence() <= w.last {
						continue // delivered before the stream was reopened
					}
					w.last = ev.GetSequence()
				}
				return m, nil
			}
			if errors.Is(err, io.EOF) || w.ctx.Err() != nil || !Retryable(watchMethod, err) {
				return nil, err
			}
		}
		if err == nil {
			w.mu.Lock()
			err = w.openErr
			w.mu.Unlock()
		}
		r := w.retry()
		if w.failures == 0 {
			w.failing = time.Now()
		}
		if w.failures >= WatchReconnects && time.Since(w.failing) >= WatchReconnects*r.Max {
			return nil, err
		}
		w.failures++
		t := time.NewTimer(r.delay(w.failures, err))
		select {
		case <-w.ctx.Done():
			t.Stop()
			return nil, status.FromContextError(w.ctx.Err()).Err()
		case <-t.C:
		}
		if oerr := w.open(); oerr != nil && !Retryable(watchMethod, oerr) {
			return nil, oerr
		}
	}
}

func (w *taskWatch) Header() (metadata.MD, error) {
	if s := w.current(); s != nil {
		return s.Header()
	}
	return nil, errors.New("client: watch not open")
}

func (w *taskWatch) Trailer() metadata.MD {
	if s := w.current(); s != nil {
		return s.Trailer()
	}
	return nil
}

func (w *taskWatch) CloseSend() error         { return nil }
func (w *taskWatch) Context() context.Context { return w.ctx }
func (w *taskWatch) SendMsg(any) error        { return errors.New("client: a watch sends nothing") }

func (w *taskWatch) RecvMsg(m any) error {
	got, err := w.Recv()
	if err != nil {
		return err
	}
	dst, ok := m.(*agentplanev1.WatchTaskResponse)
	if !ok {
		return errors.New("client: RecvMsg of a watch takes a *WatchTaskResponse")
	}
	proto.Reset(dst)
	proto.Merge(dst, got)
	return nil
}

var _ grpc.ServerStreamingClient[agentplanev1.WatchTaskResponse] = (*taskWatch)(nil)
