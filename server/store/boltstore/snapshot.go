package boltstore

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/schema"
)

// snapshot holds a read transaction: bbolt's MVCC keeps its pages intact while writers
// go on, so WriteTo streams a consistent copy without stopping them.
type snapshot struct {
	tx   *bolt.Tx
	once sync.Once
	s    *Store
}

// Features implements store.Store: a hot backup is a read transaction's copy of the
// file; the write-ahead log is the WAL mode's.
func (s *Store) Features() store.Features {
	return store.Features{Backend: store.BackendBolt, HotBackup: true, WriteAheadLog: s.opts.WAL}
}

// Snapshot implements store.Store. The store cannot close until the snapshot is closed.
func (s *Store) Snapshot(ctx context.Context) (store.Snapshot, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		s.leave()
		return nil, err
	}
	tx, seen, err := s.beginSettled()
	if err == nil {
		// A backup never holds a write that might yet fail.
		if err = s.settleRead(seen); err != nil {
			_ = tx.Rollback()
		}
	}
	if err != nil {
		s.leave()
		return nil, fmt.Errorf("store: snapshot: %w", err)
	}
	return &snapshot{tx: tx, s: s}, nil
}

// beginSettled begins the snapshot's read transaction under commitMu, so that every
// batch it sees has finished committing and only its fdatasync may be pending: the
// wait for it (holding the transaction, which must outlive it) cannot stall on a
// commit that needs to remap the file, which an open read transaction would block.
func (s *Store) beginSettled() (*bolt.Tx, uint64, error) {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	tx, err := s.db.Begin(false)
	return tx, s.dur.applied.Load(), err
}

func (sn *snapshot) Size() int64 { return sn.tx.Size() }

// WriteTo writes a complete bbolt file. A writer error (a client that went away) stops
// it.
func (sn *snapshot) WriteTo(w io.Writer) (int64, error) { return sn.tx.WriteTo(w) }

func (sn *snapshot) Close() error {
	var err error
	sn.once.Do(func() {
		err = sn.tx.Rollback()
		sn.s.leave()
	})
	return err
}

// Stats implements store.Store.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	st := store.Stats{
		Path:          s.path,
		SchemaVersion: schema.Version,
		TasksByState:  map[agentplanev1.TaskState]int64{},
		QueueDepth:    map[string]int64{},
		Commits:       s.commits.Load(),
		Updates:       s.updates.Load(),
	}
	// s.wal is read as an operation (a recovery replaces it), and not inside the View:
	// commitMu must not be awaited holding a read transaction, which a commit that
	// remaps the file waits for.
	if err := s.enter(); err != nil {
		return st, err
	}
	if ws := s.wal; ws != nil {
		s.commitMu.Lock()
		st.LogBytes = ws.log.size
		s.commitMu.Unlock()
		st.Checkpoints = ws.checkpoints.Load()
		st.CheckpointTime = time.Duration(ws.checkpointNanos.Load())
	}
	s.leave()
	err := s.View(ctx, func(r store.Reader) error {
		tx := r.(reader).tx
		st.SizeBytes = tx.Size()
		if err := outboxStats(r.(reader), &st); err != nil {
			return err
		}
		return tx.Bucket(schema.Counters).ForEach(func(k, v []byte) error {
			_, rest, ok := schema.SplitTenant(k)
			if !ok {
				return fmt.Errorf("store: malformed counter key %x", k)
			}
			n := schema.DecodeCount(v)
			switch name := string(rest); {
			case name == schema.CounterEvents:
				st.Events += n
			case name == schema.CounterActiveLeases:
				st.ActiveLeases += n
			case name == schema.CounterPendingInterrupts:
				st.PendingInterrupts += n
			case name == schema.CounterOutboxPending:
				st.OutboxPending += n
			case name == schema.CounterOutboxDead:
				st.OutboxDead += n
			case strings.HasPrefix(name, schema.CounterQueueDepth):
				if n != 0 {
					st.QueueDepth[strings.TrimPrefix(name, schema.CounterQueueDepth)] += n
				}
			case strings.HasPrefix(name, schema.CounterTasksInState):
				state, err := strconv.Atoi(strings.TrimPrefix(name, schema.CounterTasksInState))
				if err != nil {
					return fmt.Errorf("store: malformed counter %q", name)
				}
				st.TasksByState[agentplanev1.TaskState(state)] += n
			}
			return nil
		})
	})
	return st, err
}
