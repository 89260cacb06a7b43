package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/pgstore"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
	"github.com/agentplane/agentplane/server/store/storetest"
)

// changes collects what a store reports through OnChange.
func changes(s *pgstore.Store) <-chan store.Change {
	ch := make(chan store.Change, 1024)
	s.OnChange(func(c store.Change) {
		select {
		case ch <- c:
		default:
		}
	})
	return ch
}

// next waits for the first change of kind, skipping others.
func next(t *testing.T, ch <-chan store.Change, kind store.ChangeKind) store.Change {
	t.Helper()
	deadline := time.After(testutil.WaitLimit)
	for {
		select {
		case c := <-ch:
			if c.Kind == kind {
				return c
			}
		case <-deadline:
			t.Fatalf("no change of kind %d within %s", kind, testutil.WaitLimit)
		}
	}
}

// TestChangesReachOtherReplicas: what one store commits is reported to another store
// on the same database (events by task, a queued task by queue, an interrupt decided,
// a new deadline), and not to the store that wrote it.
func TestChangesReachOtherReplicas(t *testing.T) {
	a, b, _ := twoStores(t)
	fromA, fromB := changes(a), changes(b)
	ctx := context.Background()

	rec := storetest.Task("acme", "t1", time.Now())
	rec.Queue = "gpu"
	rec.QueueTime = timestamppb.Now()
	in := storetest.Interrupt("acme", "t1", "i1", time.Now())
	in.Interrupt.Deadline = timestamppb.New(time.Now().Add(time.Hour))
	if err := a.Update(ctx, func(w store.Writer) error {
		if err := w.PutTask(rec); err != nil {
			return err
		}
		if err := w.AppendEvents("acme", "t1", storetest.Event(1, "one"), storetest.Event(2, "two")); err != nil {
			return err
		}
		return w.PutInterrupt(in)
	}); err != nil {
		t.Fatal(err)
	}
	if c := next(t, fromB, store.ChangeQueued); c.Queue != "gpu" {
		t.Fatalf("queued change %+v, want queue gpu", c)
	}
	if c := next(t, fromB, store.ChangeEvents); c.Tenant != "acme" || c.TaskID != "t1" {
		t.Fatalf("events change %+v, want acme/t1", c)
	}
	next(t, fromB, store.ChangeDeadline)

	in.Interrupt.State = agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED
	if err := b.Update(ctx, func(w store.Writer) error { return w.PutInterrupt(in) }); err != nil {
		t.Fatal(err)
	}
	if c := next(t, fromA, store.ChangeDecided); c.Tenant != "acme" || c.InterruptID != "i1" {
		t.Fatalf("decided change %+v, want acme/i1", c)
	}
	// B is not told of its own decision: notifications arrive in commit order, so
	// everything B hears before A's next write is what B wrote itself.
	if err := a.Update(ctx, func(w store.Writer) error {
		return w.AppendEvents("acme", "t1", storetest.Event(3, "three"))
	}); err != nil {
		t.Fatal(err)
	}
	for {
		c := testutil.Within(t, fromB, "store B hearing of A's last write")
		if c.Kind == store.ChangeDecided {
			t.Fatalf("store B was told of its own write: %+v", c)
		}
		if c.Kind == store.ChangeEvents {
			break
		}
	}
}

// TestEscalationStepReachesOtherReplicas: an interrupt under an approval rule with no
// deadline of its own, given an escalation step (or its next step) by one store, wakes
// the other store's timer loop (ChangeDeadline), as the triggers of version 6 did.
func TestEscalationStepReachesOtherReplicas(t *testing.T) {
	a, b, _ := twoStores(t)
	fromB := changes(b)
	ctx := context.Background()

	in := storetest.Interrupt("acme", "t1", "i1", time.Now())
	in.Interrupt.Requirement = &agentplanev1.ApprovalRequirement{Rule: "two", Group: "finance", Quorum: 2,
		RemindTime: timestamppb.New(time.Now().Add(time.Hour)), EscalateTime: timestamppb.New(time.Now().Add(2 * time.Hour))}
	if err := a.Update(ctx, func(w store.Writer) error {
		if err := w.PutTask(storetest.Task("acme", "t1", time.Now())); err != nil {
			return err
		}
		return w.PutInterrupt(in)
	}); err != nil {
		t.Fatal(err)
	}
	next(t, fromB, store.ChangeDeadline)

	// The reminder sent: the next step is the escalation.
	in.Interrupt.Requirement.Reminded = true
	if err := a.Update(ctx, func(w store.Writer) error { return w.PutInterrupt(in) }); err != nil {
		t.Fatal(err)
	}
	next(t, fromB, store.ChangeDeadline)
}

// TestDatabaseOutage cuts the connection between a store and PostgreSQL: its health
// turns to UNAVAILABLE (STORE_UNAVAILABLE), reported through OnHealth, and calls fail
// with the same reason; when the database is back the store recovers by itself,
// reports healthy, tells its waiters to look again (ChangeAll) and serves calls.
func TestDatabaseOutage(t *testing.T) {
	dsn := pgtest.DSN(t)
	proxy := pgtest.NewProxy(t, pgtest.AdminAddr(t))
	health := make(chan error, 16)
	s, err := pgstore.Open(context.Background(), proxy.DSN(t, dsn), pgstore.Options{
		MaxConns: 2, ConnectTimeout: time.Second, PollInterval: 50 * time.Millisecond,
		OnHealth: func(err error) { health <- err },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ch := changes(s)
	if err := s.Health(); err != nil {
		t.Fatalf("Health at start = %v", err)
	}
	ctx := context.Background()

	proxy.Cut()
	err = testutil.Within(t, health, "the store reporting the outage")
	if apierr.ReasonOf(err) != apierr.ReasonStoreUnavailable || s.Health() == nil {
		t.Fatalf("OnHealth(%v), Health() = %v; want STORE_UNAVAILABLE", err, s.Health())
	}
	next(t, ch, store.ChangeAll)
	err = s.View(ctx, func(r store.Reader) error { _, err := r.GetTask("acme", "t1"); return err })
	if e := (*apierr.Error)(nil); !errors.As(err, &e) || e.Code != codes.Unavailable || e.Reason != apierr.ReasonStoreUnavailable {
		t.Fatalf("View during the outage = %v; want UNAVAILABLE STORE_UNAVAILABLE", err)
	}
	// A write during the outage fails too: it is not dropped and reported done.
	err = s.Update(ctx, func(w store.Writer) error { return w.PutTask(storetest.Task("acme", "t0", time.Now())) })
	if e := (*apierr.Error)(nil); !errors.As(err, &e) || e.Code != codes.Unavailable {
		t.Fatalf("Update during the outage = %v; want UNAVAILABLE", err)
	}

	proxy.Restore()
	if err := testutil.Within(t, health, "the store reporting recovery"); err != nil || s.Health() != nil {
		t.Fatalf("OnHealth(%v), Health() = %v after the database came back", err, s.Health())
	}
	next(t, ch, store.ChangeAll)
	// The first call after recovery succeeds: the pool was reset, no dead connection
	// is handed out.
	if err := s.Update(ctx, func(w store.Writer) error { return w.PutTask(storetest.Task("acme", "t1", time.Now())) }); err != nil {
		t.Fatalf("Update after recovery: %v", err)
	}
}

// TestListenerReconnects: when the database ends the listener's connection (an
// administrator's pg_terminate_backend, a failover), the store reconnects by itself,
// tells its waiters to look again (ChangeAll), and hears the other replicas' writes
// as before.
func TestListenerReconnects(t *testing.T) {
	a, b, dsn := twoStores(t)
	fromB := changes(b)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'agentplane-listener'`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("terminated %d listeners (%v); want both stores'", n, err)
	}
	next(t, fromB, store.ChangeAll)
	// Reconnected: A's next write reaches B. (Until B listens again a write may go
	// unheard; the ChangeAll after the reconnect covers those.)
	for i := 1; ; i++ {
		rec := storetest.Task("acme", fmt.Sprintf("t%d", i), time.Now())
		rec.QueueTime = timestamppb.Now()
		if err := a.Update(ctx, func(w store.Writer) error { return w.PutTask(rec) }); err != nil {
			t.Fatal(err)
		}
		select {
		case c := <-fromB:
			if c.Kind == store.ChangeQueued {
				if b.Health() != nil {
					t.Fatalf("B hears A again but reports %v", b.Health())
				}
				return
			}
		case <-time.After(200 * time.Millisecond):
		}
		if i > 150 {
			t.Fatal("B does not hear A's writes after its listener was terminated")
		}
	}
}

// listen is a bare connection LISTENing on the replicas' channel, with
// application_name app ("" leaves pgx's default).
func listen(t *testing.T, dsn, app string) *pgx.Conn {
	t.Helper()
	conf, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if app != "" {
		conf.RuntimeParams["application_name"] = app
	}
	conn, err := pgx.ConnectConfig(context.Background(), conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(context.Background(), "LISTEN agentplane"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestOneNoticePerCommit: a transaction that starts 64 queued tasks (ids as long as the
// control plane's, 26 characters) and appends to their logs sends one notification
// naming all of them (the triggers of schema version 3 sent one per task and one per
// queue), and PostgreSQL delivers it at COMMIT: the broadcast sent after the commit is
// the next notification.
func TestOneNoticePerCommit(t *testing.T) {
	dsn := pgtest.DSN(t)
	a := open(t, dsn)
	defer a.Close()
	raw := listen(t, dsn, "")
	ctx := context.Background()
	var want []string
	for i := range 64 {
		want = append(want, "acme", fmt.Sprintf("t%025d", i))
	}
	if err := a.Update(ctx, func(w store.Writer) error {
		for i := 1; i < len(want); i += 2 {
			id := want[i]
			rec := storetest.Task("acme", id, time.Now())
			rec.Queue = "gpu"
			rec.QueueTime = timestamppb.Now()
			if err := w.PutTask(rec); err != nil {
				return err
			}
			if err := w.AppendEvents("acme", id, storetest.Event(1, "one"), storetest.Event(2, "two")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := a.Broadcast(ctx, "acme", "t1", []byte("after")); err != nil {
		t.Fatal(err)
	}
	wait := func() string {
		wctx, cancel := context.WithTimeout(ctx, testutil.WaitLimit)
		defer cancel()
		n, err := raw.WaitForNotification(wctx)
		if err != nil {
			t.Fatal(err)
		}
		return n.Payload
	}
	var got struct {
		Events  []string `json:"e"`
		Queues  []string `json:"q"`
		Message []string `json:"m"`
	}
	first := wait()
	if err := json.Unmarshal([]byte(first), &got); err != nil {
		t.Fatalf("notice %q: %v", first, err)
	}
	if !slices.Equal(got.Events, want) || !slices.Equal(got.Queues, []string{"gpu"}) {
		t.Fatalf("the commit's notice is %s; want events %q and queue gpu in one", first, want)
	}
	second := wait()
	got.Message = nil
	if err := json.Unmarshal([]byte(second), &got); err != nil || len(got.Message) != 3 {
		t.Fatalf("the notification after the commit's is %s, want the broadcast: the commit sent more than one", second)
	}
}

// TestLargeCommitReachesOtherReplicas: a commit whose changes do not fit one
// notification (PostgreSQL's 8000 bytes) reaches the other replica whole, over
// several.
func TestLargeCommitReachesOtherReplicas(t *testing.T) {
	a, b, _ := twoStores(t)
	fromA := changes(b)
	want := map[string]bool{}
	if err := a.Update(context.Background(), func(w store.Writer) error {
		for i := range 120 {
			id := fmt.Sprintf("%s-%03d", strings.Repeat("t", 150), i)
			want[id] = true
			if err := w.PutTask(storetest.Task("acme", id, time.Now())); err != nil {
				return err
			}
			if err := w.AppendEvents("acme", id, storetest.Event(1, "one")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for len(want) > 0 {
		c := next(t, fromA, store.ChangeEvents)
		delete(want, c.TaskID)
	}
}

// TestUpgradeWaitsForOlderReplicas: schema version 9 changed the replicas'
// notifications, so a database at version 8 is not migrated while an older control
// plane is connected (known by its listener's application_name, or by its LISTEN):
// Open fails with STORE_SCHEMA_MISMATCH and leaves the schema as it was. Once they are
// gone new replicas starting together migrate it, and the triggers of version 3 are
// gone.
func TestUpgradeWaitsForOlderReplicas(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	old, err := pgstore.OpenAt(ctx, dsn, 8, pgstore.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	old.Close()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	version := func() (v int, triggers int) {
		t.Helper()
		if err := admin.QueryRow(ctx, `SELECT (SELECT max(version) FROM agentplane_schema),
			(SELECT count(*) FROM pg_trigger WHERE tgname IN ('events_notify', 'tasks_queued_insert', 'tasks_queued_update', 'interrupts_notify'))`).
			Scan(&v, &triggers); err != nil {
			t.Fatal(err)
		}
		return v, triggers
	}
	for _, app := range []string{"agentplane-listener", "some-name"} {
		conn := listen(t, dsn, app)
		_, err := pgstore.Open(ctx, dsn, pgstore.Options{MaxConns: 2})
		var e *apierr.Error
		if !errors.As(err, &e) || e.Code != codes.FailedPrecondition || e.Reason != apierr.ReasonStoreSchemaMismatch ||
			!strings.Contains(e.Error(), fmt.Sprint(conn.PgConn().PID())) {
			t.Fatalf("Open beside an older replica's listener (%s) = %v, want FAILED_PRECONDITION STORE_SCHEMA_MISMATCH naming its pid", app, err)
		}
		if v, n := version(); v != 8 || n != 4 {
			t.Fatalf("after the refusal the schema is at version %d with %d notify triggers, want 8 with 4", v, n)
		}
		_ = conn.Close(ctx)
	}
	// Replicas of the new version starting together do not take each other for older
	// ones, also when the DSN names the application (as the old listener's would be).
	named := dsn + "&application_name=cp"
	if !strings.Contains(dsn, "?") {
		named = dsn + "?application_name=cp"
	}
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			s, err := pgstore.Open(ctx, named, pgstore.Options{MaxConns: 2})
			if err == nil {
				t.Cleanup(func() { _ = s.Close() })
			}
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatalf("Open once the older replicas are gone: %v", err)
		}
	}
	if v, n := version(); v != pgstore.Version || n != 0 {
		t.Fatalf("after the upgrade the schema is at version %d with %d notify triggers, want %d with none", v, n, pgstore.Version)
	}
}
