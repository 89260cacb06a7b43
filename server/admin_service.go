package server

import (
	"context"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/version"
)

// backupChunk is the size of one Backup message.
const backupChunk = 1 << 20

// Backup streams a consistent snapshot of the store: a read transaction pins one
// version of the file while writers go on.
func (x *adminService) Backup(_ *agentplanev1.BackupRequest, stream grpc.ServerStreamingServer[agentplanev1.BackupResponse]) error {
	ctx := stream.Context()
	snap, err := x.s.domain.store.Snapshot(ctx)
	if err != nil {
		return err
	}
	defer snap.Close()
	w := &chunkWriter{stream: stream, total: snap.Size()}
	if _, err := snap.WriteTo(w); err != nil {
		return err
	}
	if err := w.flush(); err != nil {
		return err
	}
	x.s.log.Info("backup streamed", "bytes", w.total)
	return nil
}

// chunkWriter cuts the snapshot into messages of backupChunk bytes.
type chunkWriter struct {
	stream grpc.ServerStreamingServer[agentplanev1.BackupResponse]
	buf    []byte
	total  int64
	sent   bool
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		take := min(backupChunk-len(w.buf), len(p))
		w.buf = append(w.buf, p[:take]...)
		p = p[take:]
		if len(w.buf) == backupChunk {
			if err := w.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (w *chunkWriter) flush() error {
	if len(w.buf) == 0 && w.sent {
		return nil
	}
	msg := &agentplanev1.BackupResponse{Chunk: w.buf}
	if !w.sent {
		msg.TotalBytes = w.total
	}
	w.sent = true
	w.buf = w.buf[:0:0]
	return w.stream.Send(msg)
}

var _ io.Writer = (*chunkWriter)(nil)

// PurgeTasks deletes terminal tasks older than a cutoff.
func (x *adminService) PurgeTasks(ctx context.Context, req *agentplanev1.PurgeTasksRequest) (*agentplanev1.PurgeTasksResponse, error) {
	older := x.s.cfg.Tasks.Retention.D()
	if d := req.GetOlderThan(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
			return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "older_than must be a non-negative duration")
		}
		older = d.AsDuration()
	}
	if req.GetOlderThan() == nil && older == 0 {
		return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "no retention is configured (tasks.retention); give older_than").
			WithMetadata(apierr.MetaRequiredField, "older_than")
	}
	res, err := x.s.domain.tasks.Purge(ctx, older, req.GetDryRun())
	if err != nil {
		return nil, err
	}
	x.s.log.Info("purge", "older_than", older, "dry_run", req.GetDryRun(), "tasks", res.Tasks, "events", res.Events)
	return &agentplanev1.PurgeTasksResponse{Tasks: res.Tasks, Events: res.Events}, nil
}

// GetStats reports server and store statistics.
func (x *adminService) GetStats(ctx context.Context, _ *agentplanev1.GetStatsRequest) (*agentplanev1.GetStatsResponse, error) {
	st, err := x.s.domain.store.Stats(ctx)
	if err != nil {
		return nil, err
	}
	features := x.s.domain.store.Features()
	byState := map[string]int64{}
	for state, n := range st.TasksByState {
		byState[state.String()] = n
	}
	var budgets []*agentplanev1.BudgetStatus
	if b := x.s.domain.budgets; b != nil {
		if err := x.s.domain.store.View(ctx, func(r store.Reader) (err error) {
			budgets, err = b.Statuses(r, time.Now())
			return err
		}); err != nil {
			return nil, err
		}
	}
	return &agentplanev1.GetStatsResponse{
		ServerVersion:     version.String(),
		StartTime:         timestamppb.New(x.s.start),
		Uptime:            durationpb.New(time.Since(x.s.start)),
		Store:             features.Backend,
		StorePath:         st.Path,
		StoreBytes:        st.SizeBytes,
		TasksByState:      byState,
		Events:            st.Events,
		PendingInterrupts: st.PendingInterrupts,
		ActiveLeases:      st.ActiveLeases,
		SchemaVersion:     int32(st.SchemaVersion),
		LogBytes:          st.LogBytes,
		Checkpoints:       st.Checkpoints,
		Commits:           st.Commits,
		Updates:           st.Updates,
		QueueDepth:        st.QueueDepth,
		WriteAheadLog:     features.WriteAheadLog,
		Budgets:           budgets,
	}, nil
}
