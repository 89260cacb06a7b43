package pgstore

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"
	"google.golang.org/grpc/codes"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
)

// Options configure Open.
type Options struct {
	// MaxConns is the connection pool size (0: pgxpool's default, the larger of 4 and
	// the number of CPUs).
	MaxConns int32
	// ConnectTimeout bounds establishing one connection (0: 10s).
	ConnectTimeout time.Duration
	// StatementTimeout, when set, is the server-side statement_timeout of every
	// connection.
	StatementTimeout time.Duration
	// MaxRetries bounds how often one Update is run again alone after its own
	// statement failed for a reason worth retrying: a unique key taken by a concurrent
	// insert, a deadlock, a serialization failure (0: 20).
	MaxRetries int
	// Writers is the most write transactions open at once, each carrying a batch of
	// Updates (0: 2; never more than the pool less one, which keeps a connection for
	// reads). Fewer make larger batches: fewer commits and statements per write.
	Writers int
	// MaxBatch is the most Updates one transaction carries (0: 64; store.max_batch,
	// whose default is 256, when set through the configuration).
	MaxBatch int
	// PollInterval is how often, while the notification connection is down, every
	// waiter is told to look again (0: 1s). See notify.go.
	PollInterval time.Duration
	// OnHealth, when set, is called with the store's failure when it loses the
	// database, and with nil when it has it again (see Store.Health).
	OnHealth func(error)
	// Logger defaults to slog.Default.
	Logger *slog.Logger
}

// Store is a store.Store on PostgreSQL.
type Store struct {
	pool     *pgxpool.Pool
	where    string
	version  int
	tokenKey []byte
	retries  int

	// commitMu orders commits with their OnCommit hooks: hooks run in commit order
	// across the transactions of this process, as the Store contract requires.
	commitMu sync.Mutex

	// Group commit (commit.go): queue holds the Updates waiting for a write slot;
	// running counts the slots in use, at most writers.
	qmu      sync.Mutex
	queue    []*call
	running  int
	writers  int
	maxBatch int
	// listener wakes this process's waiters for the other replicas' writes, and is
	// the store's health.
	listener *listener

	mu      sync.RWMutex // held shared by running transactions, exclusively by Close
	closed  bool
	commits atomic.Int64
	updates atomic.Int64
	retried atomic.Int64
}

var _ store.Store = (*Store)(nil)

//go:embed migrations/*.sql
var migrations embed.FS

// Version is the newest schema version this binary knows: the number of embedded
// migrations.
var Version = len(migrationFiles())

func migrationFiles() []string {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		panic(err)
	}
	slices.Sort(names)
	return names
}

// advisoryLock is the pg_advisory_lock key under which replicas migrate.
const advisoryLock = 0x61676e74706c6e // "agntpln"

// Open connects to the database named by dsn, brings its schema up to date under an
// advisory lock, and refuses a database whose schema is newer than this binary knows
// (FailedPrecondition, STORE_SCHEMA_MISMATCH).
func Open(ctx context.Context, dsn string, opt Options) (*Store, error) {
	return open(ctx, dsn, opt, Version)
}

// open is Open, migrating the schema up to version upTo only (tests build older
// schemas with it).
func open(ctx context.Context, dsn string, opt Options, upTo int) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres dsn: %w", err)
	}
	if opt.MaxConns > 0 {
		cfg.MaxConns = opt.MaxConns
	}
	cfg.ConnConfig.ConnectTimeout = cmp(opt.ConnectTimeout, 10*time.Second)
	if opt.StatementTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(opt.StatementTimeout.Milliseconds(), 10)
	}
	replica := newReplicaID()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	s := &Store{pool: pool, where: Redact(dsn), retries: opt.MaxRetries, writers: opt.Writers, maxBatch: opt.MaxBatch, listener: &listener{
		conf: cfg.ConnConfig, pool: pool, replica: replica, poll: cmp(opt.PollInterval, defaultPollInterval),
		log: opt.Logger, onHealth: opt.OnHealth,
	}}
	if s.retries <= 0 {
		s.retries = 20
	}
	if s.writers <= 0 {
		s.writers = 2
	}
	s.writers = max(1, min(s.writers, int(cfg.MaxConns)-1))
	if s.maxBatch <= 0 {
		s.maxBatch = 64
	}
	if err := s.migrate(ctx, upTo); err != nil {
		pool.Close()
		return nil, err
	}
	if err := s.listener.start(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func cmp(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Redact is dsn without its password, for logs and Stats.Path.
func Redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		if u.User != nil {
			if _, ok := u.User.Password(); ok {
				u.User = url.UserPassword(u.User.Username(), "xxxxx")
			}
		}
		return u.String()
	}
	var kept []string
	for _, f := range strings.Fields(dsn) {
		if strings.HasPrefix(f, "password=") {
			f = "password=xxxxx"
		}
		kept = append(kept, f)
	}
	return strings.Join(kept, " ")
}

// stopAllVersion is the schema version from which no older replica may run beside a
// newer one: version 9 moved the replicas' wake-ups from triggers to the store, in a
// new format (notify.go), which an older replica would not understand, nor send.
const stopAllVersion = 9

// migrate applies the embedded migrations newer than the database's version, up to
// upTo, each in its own transaction, holding a session advisory lock so that replicas
// starting together apply each once. It refuses to cross stopAllVersion while another
// replica (an older one: the schema is older) is connected.
func (s *Store) migrate(ctx context.Context, upTo int) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return unavailable(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(advisoryLock)); err != nil {
		return unavailable(err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(advisoryLock)) //nolint:errcheck // the session ends with the connection anyway
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS agentplane_schema (
		version int PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("postgres: creating the schema table: %w", err)
	}
	var have int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM agentplane_schema").Scan(&have); err != nil {
		return fmt.Errorf("postgres: reading the schema version: %w", err)
	}
	files := migrationFiles()
	if have > len(files) {
		return apierr.New(codes.FailedPrecondition, apierr.ReasonStoreSchemaMismatch,
			"the database %s has schema version %d; this binary knows versions up to %d (upgrade agentplane)", s.where, have, len(files))
	}
	if have > 0 && have < stopAllVersion && upTo >= stopAllVersion {
		if err := s.refuseOlderReplicas(ctx, conn, have); err != nil {
			return err
		}
	}
	for v := have + 1; v <= upTo; v++ {
		sql, err := migrations.ReadFile(files[v-1])
		if err != nil {
			return err
		}
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, string(sql)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO agentplane_schema (version) VALUES ($1)", v)
			return err
		}); err != nil {
			return fmt.Errorf("postgres: applying migration %s: %w", files[v-1], err)
		}
	}
	s.version = upTo
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "INSERT INTO meta (name, value) VALUES ('token_key', $1) ON CONFLICT (name) DO NOTHING", key); err != nil {
		return fmt.Errorf("postgres: storing the token key: %w", err)
	}
	if err := conn.QueryRow(ctx, "SELECT value FROM meta WHERE name = 'token_key'").Scan(&s.tokenKey); err != nil {
		return fmt.Errorf("postgres: reading the token key: %w", err)
	}
	return nil
}

// refuseOlderReplicas fails (FailedPrecondition, STORE_SCHEMA_MISMATCH) while another
// control plane is connected to the database: at schema version have, every one is
// older than this binary. A replica is known by its listener connection: its
// application_name (agentplane-listener unless the DSN names one), or its last
// statement, which a listener only ever sends, its LISTEN or pgx's ping, while it
// idles. (Replicas of this version starting beside this one wait for the migration
// lock, in another statement; this process's own connections are not counted.)
func (s *Store) refuseOlderReplicas(ctx context.Context, conn *pgxpool.Conn, have int) error {
	own := []int32{}
	for _, c := range s.pool.AcquireAllIdle(ctx) {
		own = append(own, int32(c.Conn().PgConn().PID()))
		c.Release()
	}
	rows, err := conn.Query(ctx, `SELECT pid, coalesce(application_name, ''), coalesce(client_addr::text, 'local')
		FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND NOT pid = ANY($2)
		  AND (application_name = $1 OR (state = 'idle' AND query IN ('LISTEN `+channel+`', '-- ping')))
		ORDER BY pid`, listenerName, own)
	if err != nil {
		return fmt.Errorf("postgres: looking for older replicas: %w", err)
	}
	var found []string
	var pid int32
	var name, addr string
	if _, err := pgx.ForEachRow(rows, []any{&pid, &name, &addr}, func() error {
		found = append(found, fmt.Sprintf("pid %d (%s from %s)", pid, name, addr))
		return nil
	}); err != nil {
		return fmt.Errorf("postgres: looking for older replicas: %w", err)
	}
	if len(found) == 0 {
		return nil
	}
	return apierr.New(codes.FailedPrecondition, apierr.ReasonStoreSchemaMismatch,
		"the database %s has schema version %d and older control planes are connected to it (%s): "+
			"upgrading it to version %d needs every control plane on it stopped first (see the upgrade notes in docs/operations.md)",
		s.where, have, strings.Join(found, ", "), stopAllVersion)
}

// TokenKey implements store.Store.
func (s *Store) TokenKey() []byte { return s.tokenKey }

// enter marks a transaction running; it fails once the store is closed.
func (s *Store) enter() error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return store.ErrClosed()
	}
	return nil
}

// View implements store.Store: a REPEATABLE READ, READ ONLY transaction.
func (s *Store) View(ctx context.Context, fn func(store.Reader) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return unavailable(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read-only
	return fn(&reader{ctx: ctx, q: viewQuerier{ctx: ctx, tx: tx}})
}

// retryable reports whether err means "run the transaction again".
func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01", "23505": // serialization_failure, deadlock_detected, unique_violation
			return true
		}
	}
	return false
}

// unavailable turns a failure to reach the database (no connection, a connection lost,
// the server shutting down) into UNAVAILABLE (STORE_UNAVAILABLE); other errors are
// returned as they are.
func unavailable(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		if !strings.HasPrefix(pe.Code, "08") && !strings.HasPrefix(pe.Code, "57P") {
			return err
		}
	} else {
		var ce *pgconn.ConnectError
		var ne net.Error
		// SafeToRetry: nothing was sent, the connection was already closed.
		if !errors.As(err, &ce) && !errors.As(err, &ne) && !errors.Is(err, io.EOF) &&
			!errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, puddle.ErrClosedPool) && !pgconn.SafeToRetry(err) {
			return err
		}
	}
	return apierr.New(codes.Unavailable, apierr.ReasonStoreUnavailable, "the database is unreachable: %v", err)
}

// Features implements store.Store: no hot backup (Snapshot), no log of its own
// (PostgreSQL's WAL is the database's, reported by the database).
func (s *Store) Features() store.Features {
	return store.Features{Backend: store.BackendPostgres}
}

// Snapshot implements store.Store. PostgreSQL has its own backups (pg_dump,
// pg_basebackup, a managed service's snapshots), which this store does not duplicate:
// it refuses with FailedPrecondition (STORE_BACKUP_UNSUPPORTED).
func (s *Store) Snapshot(context.Context) (store.Snapshot, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	return nil, apierr.New(codes.FailedPrecondition, apierr.ReasonStoreBackupUnsupported,
		"the store is PostgreSQL (%s): back it up with the database's own tools (pg_dump, pg_basebackup or your provider's snapshots)", s.where)
}

// Stats implements store.Store. Counts are computed by queries over one snapshot.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	st := store.Stats{
		Path:          s.where,
		SchemaVersion: s.version,
		TasksByState:  map[agentplanev1.TaskState]int64{},
		QueueDepth:    map[string]int64{},
		Commits:       s.commits.Load(),
		Updates:       s.updates.Load(),
	}
	err := s.View(ctx, func(r store.Reader) error {
		tx := r.(*reader).q.(viewQuerier).tx
		if err := outboxStats(r.(*reader), &st); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT pg_database_size(current_database()),
			(SELECT count(*) FROM events),
			(SELECT count(*) FROM interrupts WHERE pending_key IS NOT NULL),
			(SELECT count(*) FROM tasks WHERE lease_key IS NOT NULL)`).
			Scan(&st.SizeBytes, &st.Events, &st.PendingInterrupts, &st.ActiveLeases); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT state, count(*) FROM tasks GROUP BY state")
		if err != nil {
			return err
		}
		var state int32
		var n int64
		if _, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error {
			st.TasksByState[agentplanev1.TaskState(state)] = n
			return nil
		}); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, "SELECT queue, count(*) FROM tasks WHERE queue_key IS NOT NULL GROUP BY queue")
		if err != nil {
			return err
		}
		var q string
		_, err = pgx.ForEachRow(rows, []any{&q, &n}, func() error {
			st.QueueDepth[q] = n
			return nil
		})
		return err
	})
	if err != nil {
		return store.Stats{}, unavailable(err)
	}
	return st, nil
}

// Close implements store.Store: it waits for running transactions and closes the pool.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.listener.stop()
	s.pool.Close()
	return nil
}

// TaskTenants lists, in key order, every tenant that has a task, for a whole-store walk
// (package storecopy).
func (s *Store) TaskTenants(ctx context.Context, fn func(tenant string) (bool, error)) error {
	return s.View(ctx, func(r store.Reader) error {
		return r.(*reader).tenants("tasks", "create_key", "", fn)
	})
}

// AuditTenants lists every tenant that has an audit record, in key order.
func (s *Store) AuditTenants(ctx context.Context, fn func(tenant string) (bool, error)) error {
	return s.View(ctx, func(r store.Reader) error {
		return r.(*reader).tenants("audit", "id_key", "", fn)
	})
}
