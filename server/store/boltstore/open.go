package boltstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

// ErrLocked is wrapped by Open's error when another process holds the file.
var ErrLocked = errors.New("store file is locked by another process")

// Options tune Open. Zero values take the defaults.
type Options struct {
	// OpenTimeout bounds the wait for the file lock (default 2s).
	OpenTimeout time.Duration
	// MaxBatch is the most Updates one commit carries (default 256).
	MaxBatch int
	// InitialMmapSize is the initial size of the memory map in bytes (default 256 MiB).
	// Growing the map blocks new read transactions while it happens, so a map that
	// fits the working set keeps readers from ever waiting on writers.
	InitialMmapSize int
	// MaxLinger bounds how long a commit leader waits for more callers when recent
	// concurrency says they are about to arrive (default 5ms; negative: never wait); the
	// wait is also never more than half the recent commit time.
	// See Store.plan.
	MaxLinger time.Duration
	// Logger receives errors that have no caller to return to (default slog.Default).
	Logger *slog.Logger
	// WAL turns on the write-ahead log mode: a commit appends its batch to a log and
	// fsyncs that once, instead of bbolt's two fsyncs; checkpoints bound the log. See
	// docs/store.md. Opening without it a store last used with it replays
	// the log (if the shutdown was unclean) and removes the log's files.
	WAL bool
	// CheckpointInterval is how often the WAL mode considers a checkpoint while
	// writes happen (default 5m); it runs if the log holds at least 1/64 of the store.
	CheckpointInterval time.Duration
	// CheckpointBytes starts a checkpoint sooner once the log has grown by this many
	// bytes, or by an eighth of the store's size if that is more (default 64 MiB).
	CheckpointBytes int64
	// RecoverInterval is the first wait of a failed store before it probes the disk
	// and tries to recover (default 1s; it doubles up to 16 times that between
	// attempts); negative: a failed store stays failed until it is reopened. See
	// Health.
	RecoverInterval time.Duration
	// OnHealth, if set, is called with the failure when the store starts refusing
	// writes and with nil once it has recovered, in that order. It must return quickly
	// and must not call the store.
	OnHealth func(failure error)
}

// Store is the bbolt store.Store.
type Store struct {
	// db, wal and dur are replaced when a failed store recovers (under closeMu held
	// exclusively); db is nil while a recovery has not managed to reopen the file.
	db       *bolt.DB
	path     string
	opts     Options
	tokenKey []byte
	maxBatch int
	log      *slog.Logger
	// failure is the failed state: see Health.
	failure failure

	// closeMu is held shared by every operation and exclusively by Close, so Close
	// waits for operations in flight and later ones see closed.
	closeMu sync.RWMutex
	closed  bool

	// commitMu is held by a batch from its transaction's start to its log append, and
	// by a checkpoint while it starts its read transaction and a new log segment.
	commitMu sync.Mutex
	// wal is the write-ahead log mode's state, nil when it is off.
	wal *walState
	// dur tracks which committed batches are durable.
	dur *durability

	// mu guards the group-commit queue and its tuning.
	mu      sync.Mutex
	queue   []*call
	leading bool
	// peak is the recent peak of concurrent Updates (decaying), the batch size a
	// leader waits for; commitAvg is the recent mean commit duration and batchAvg
	// the recent mean batch size.
	peak      int
	commitAvg time.Duration
	batchAvg  float64
	maxLinger time.Duration
	// inflight counts Update calls in progress; arrive is signalled when one queues.
	inflight atomic.Int64
	arrive   chan struct{}

	commits atomic.Int64
	updates atomic.Int64
}

var _ store.Store = (*Store)(nil)

// Open opens or creates the store file at path (creating its directory), taking the
// file lock within OpenTimeout. A new file gets the current schema; an existing one
// must carry schema.Version, or an older one from schema.OldestUpgradable on, which
// Open upgrades; any other fails with reason STORE_SCHEMA_MISMATCH.
func Open(path string, opts Options) (*Store, error) {
	if opts.OpenTimeout <= 0 {
		opts.OpenTimeout = 2 * time.Second
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	if opts.InitialMmapSize <= 0 {
		opts.InitialMmapSize = 256 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxLinger == 0 {
		opts.MaxLinger = 5 * time.Millisecond
	}
	if opts.CheckpointInterval <= 0 {
		opts.CheckpointInterval = 5 * time.Minute
	}
	if opts.CheckpointBytes <= 0 {
		opts.CheckpointBytes = 64 << 20
	}
	if opts.RecoverInterval == 0 {
		opts.RecoverInterval = time.Second
	}
	if err := makeDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("store directory: %w", err)
	}
	ws, replay, err := prepareWAL(path, opts)
	if err != nil {
		return nil, err
	}
	s, err := open(path, opts, ws, replay)
	if err != nil && ws != nil {
		_ = ws.lock.Close()
	}
	return s, err
}

func open(path string, opts Options, ws *walState, replay []uint64) (*Store, error) {
	s := &Store{path: path, opts: opts, maxBatch: opts.MaxBatch, log: opts.Logger,
		maxLinger: max(opts.MaxLinger, 0), arrive: make(chan struct{}, 1)}
	if err := s.openFile(ws, replay); err != nil {
		return nil, err
	}
	return s, nil
}

// openFile opens the bbolt file, checks its schema and starts the write-ahead log mode
// (replaying what prepareWAL found), setting s.db, s.dur and s.wal: at Open, and when a
// failed store recovers.
func (s *Store) openFile(ws *walState, replay []uint64) error {
	path, opts := s.path, s.opts
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: opts.OpenTimeout,
		// The freelist is rebuilt by scanning at open instead of being written at every
		// commit: fewer pages per commit, for a slower open (etcd does the same).
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: opts.InitialMmapSize,
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return fmt.Errorf("%w: could not lock %s within %s; is another agentplane process using this data directory?",
			ErrLocked, path, opts.OpenTimeout)
	}
	if err != nil {
		return fmt.Errorf("opening store %s: %w", path, err)
	}
	s.db, s.dur, s.wal = db, newDurability(), nil
	fail := func(err error) error {
		_ = db.Close()
		s.db = nil
		return err
	}
	trace("open", path)
	// The file's entry may be new (or left unsynced by an Open that crashed): make it
	// durable before the first write is acknowledged.
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fail(fmt.Errorf("opening store %s: %w", path, err))
	}
	info, err := s.initSchema()
	if err != nil {
		return fail(err)
	}
	s.tokenKey = info.GetTokenKey()
	if ws != nil {
		err = s.startWAL(ws, replay, opts) // upgrades after the replay
	} else {
		_, err = s.upgrade()
	}
	if err != nil {
		return fail(err)
	}
	return nil
}

// makeDir creates dir and its missing parents, and makes their entries durable: each
// new directory is synced into its parent, and dir's own entry always is (an earlier
// Open may have created it and crashed before syncing it).
func makeDir(dir string) error {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		ok, err := exists(d)
		if err != nil {
			return err
		}
		if ok || filepath.Dir(d) == d {
			break
		}
		missing = append(missing, d)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	parents := []string{filepath.Dir(dir)}
	for _, d := range missing[min(1, len(missing)):] { // missing[0] is dir
		parents = append(parents, filepath.Dir(d))
	}
	for _, d := range parents {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// initSchema creates the buckets and header of a new file, or checks those of an
// existing one.
func (s *Store) initSchema() (*storagev1.SchemaInfo, error) {
	var info *storagev1.SchemaInfo
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		info, err = s.readSchema(tx)
		return err
	})
	if err != nil || info != nil {
		return info, err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		var err error
		if info, err = s.readSchema(tx); err != nil || info != nil {
			return err
		}
		empty := true
		_ = tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
		if !empty {
			return fmt.Errorf("%s is a bbolt file but not an agentplane store (no schema header)", s.path)
		}
		for _, name := range schema.Buckets {
			if _, err := tx.CreateBucket(name); err != nil {
				return fmt.Errorf("creating bucket %s: %w", name, err)
			}
		}
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return err
		}
		info = &storagev1.SchemaInfo{Version: schema.Version, CreateTime: timestamppb.Now(), TokenKey: key}
		v, err := proto.Marshal(info)
		if err != nil {
			return err
		}
		return tx.Bucket(schema.Meta).Put(schema.MetaSchemaKey, v)
	})
	return info, err
}

// readSchema returns nil, nil for a file without a header.
func (s *Store) readSchema(tx *bolt.Tx) (*storagev1.SchemaInfo, error) {
	meta := tx.Bucket(schema.Meta)
	if meta == nil {
		return nil, nil
	}
	v := meta.Get(schema.MetaSchemaKey)
	if v == nil {
		return nil, fmt.Errorf("store %s has a meta bucket but no schema header; the file is damaged or not an agentplane store", s.path)
	}
	info := &storagev1.SchemaInfo{}
	if err := proto.Unmarshal(v, info); err != nil {
		return nil, fmt.Errorf("store %s: reading schema header: %w", s.path, err)
	}
	if v := info.GetVersion(); v < schema.OldestUpgradable || v > schema.Version {
		return nil, apierr.FailedPrecondition(apierr.ReasonStoreSchemaMismatch,
			"store %s has schema version %d but this binary reads version %d: run a matching agentplane version, or restore a backup made by this one",
			s.path, info.GetVersion(), schema.Version)
	}
	for _, name := range schema.Buckets {
		if info.GetVersion() < schema.Version {
			break // upgrade checks and creates what it needs
		}
		if tx.Bucket(name) == nil {
			return nil, fmt.Errorf("store %s (schema %d) lacks bucket %s; the file is damaged", s.path, info.GetVersion(), name)
		}
	}
	if len(info.GetTokenKey()) < 16 {
		return nil, fmt.Errorf("store %s: schema header has no token key; the file is damaged", s.path)
	}
	return info, nil
}

// Path is the store file.
func (s *Store) Path() string { return s.path }

// TokenKey implements store.Store.
func (s *Store) TokenKey() []byte { return bytes.Clone(s.tokenKey) }

// enter registers an operation; it fails once the store is closed, and while it is
// failed (see Health).
func (s *Store) enter() error {
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return store.ErrClosed()
	}
	if err := s.failure.get(); err != nil {
		s.closeMu.RUnlock()
		return err
	}
	return nil
}

func (s *Store) leave() { s.closeMu.RUnlock() }

// Close implements store.Store.
func (s *Store) Close() error {
	s.failure.stopRecovery()
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.db == nil {
		return nil // a recovery closed it and could not reopen it
	}
	if s.failedErr() != nil {
		return s.closeFailed(true)
	}
	var err error
	if s.wal != nil {
		err = s.closeWAL()
	}
	err = errors.Join(err, s.db.Close())
	if s.wal != nil {
		err = errors.Join(err, s.wal.lock.Close())
	}
	return err
}

// View implements store.Store.
func (s *Store) View(ctx context.Context, fn func(store.Reader) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	if err := ctx.Err(); err != nil {
		return err
	}
	var seen uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		seen = s.dur.applied.Load()
		return fn(reader{tx: tx})
	})
	// After the transaction: bbolt cannot remap a growing file while one is open, and
	// the batch waited for may be the one that needs to.
	if werr := s.settleRead(seen); werr != nil {
		return werr
	}
	return err
}

// settleRead waits, in the write-ahead log mode, until the batches a reader may have
// seen (up to seen) are durable, so that nothing a crash could take back is ever
// returned; it costs a reader at most the fdatasync in flight. In the default mode a
// batch is visible only once bbolt has synced it. A caller must not hold a read
// transaction while it waits for a batch that may still be committing (see View).
func (s *Store) settleRead(seen uint64) error {
	if s.wal == nil {
		return nil
	}
	if err := s.dur.wait(seen); err != nil {
		return s.fail(err)
	}
	return nil
}

// Check runs bbolt's consistency check over the whole file and returns every problem
// it finds, joined; nil means the file is sound.
func (s *Store) Check(ctx context.Context) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(func(tx *bolt.Tx) error {
		var errs []error
		// Drain the channel fully: the checker goroutine stops only when it is done.
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
}
