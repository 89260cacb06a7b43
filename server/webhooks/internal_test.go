package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/boltstore"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/storetest"
)

// The wait after the n-th failed attempt doubles from initial_backoff up to
// max_backoff and is jittered into [d/2, d], also after very many attempts (where
// doubling on without the cap would overflow).
//
// Mutants: backoff's loop condition as ||, its jitter's halving changed.
func TestBackoffDoublesUpToTheCap(t *testing.T) {
	s := &Service{cfg: config.Notifications{InitialBackoff: config.Duration(time.Second), MaxBackoff: config.Duration(time.Minute)}}
	for attempts, d := range map[int32]time.Duration{
		1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 6: 32 * time.Second, 7: time.Minute, 100: time.Minute, 1 << 30: time.Minute,
	} {
		for range 200 {
			if got := s.backoff(attempts); got < d/2 || got > d {
				t.Fatalf("backoff(%d) = %s, want within [%s, %s]", attempts, got, d/2, d)
			}
		}
	}
}

// The text of a Slack message says what happened: an expired approval as expired, a
// failed task with its failure message, and nothing dangling when there is none.
//
// Mutants: the expired verb's condition flipped, the failure message's condition as ||.
func TestSlackTextSaysWhatHappened(t *testing.T) {
	text := func(m Message) string {
		t.Helper()
		body := slackBody(m, false)
		var out struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatal(err)
		}
		return out.Text
	}
	for _, c := range []struct {
		m         Message
		want, not string
	}{
		{Message{Type: config.EventInterruptExpired, Data: Data{Tenant: "acme", TaskID: "t1", Tool: "refund"}}, "Approval expired: `refund` on task `t1`", "resolved"},
		{Message{Type: config.EventInterruptResolved, Data: Data{Tenant: "acme", TaskID: "t1", Tool: "refund"}}, "Approval resolved: `refund` on task `t1`", "expired"},
		{Message{Type: config.EventTaskEnded, Data: Data{Tenant: "acme", TaskID: "t1", State: "failed", Failure: &Failure{Reason: "model.error", Message: "no model"}}}, "Task `t1` failed: `no model`", ""},
		{Message{Type: config.EventTaskEnded, Data: Data{Tenant: "acme", TaskID: "t1", State: "failed", Failure: &Failure{Reason: "model.error"}}}, "Task `t1` failed [tenant `acme`]", "failed:"},
	} {
		got := text(c.m)
		if !strings.Contains(got, c.want) || (c.not != "" && strings.Contains(got, c.not)) {
			t.Errorf("%s: text %q, want %q", c.m.Type, got, c.want)
		}
	}
}

// An interrupt's notification carries its deadline when it has one, and none when it
// has none.
//
// Mutant: interruptData's deadline condition flipped.
func TestInterruptDataDeadline(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := storetest.Interrupt("acme", "t1", "i1", at)
	rec.Interrupt.Deadline = nil
	if d := interruptData(rec, ""); d.Deadline != nil {
		t.Errorf("no deadline, yet the data says %v", d.Deadline)
	}
	rec.Interrupt.Deadline = timestamppb.New(at.Add(time.Hour))
	if d := interruptData(rec, ""); d.Deadline == nil || !d.Deadline.Equal(at.Add(time.Hour)) {
		t.Errorf("deadline %v, want %v", d.Deadline, at.Add(time.Hour))
	}
}

// windowStore is a store whose next Update first runs before: what another caller
// does between the dead-letter sweep's scan (a View) and its deleting transaction.
// It also counts the DeleteOutbox calls of each Update's last run.
type windowStore struct {
	store.Store
	before  func()
	deletes []int
	// failScan, when set, is what the writers' ScanOutbox fails with.
	failScan error
	// puts are the records the Updates' writers put, in order.
	puts []*storagev1.OutboxRecord
	// each, when set, runs at the start of every Update.
	each func()
}

func (s *windowStore) Update(ctx context.Context, fn func(store.Writer) error) error {
	if s.each != nil {
		s.each()
	}
	if f := s.before; f != nil {
		s.before = nil
		f()
	}
	s.deletes = append(s.deletes, 0)
	n := &s.deletes[len(s.deletes)-1]
	return s.Store.Update(ctx, func(w store.Writer) error {
		*n = 0
		return fn(watchedWriter{w, n, s})
	})
}

type watchedWriter struct {
	store.Writer
	deletes *int
	s       *windowStore
}

func (w watchedWriter) DeleteOutbox(id string) error { *w.deletes++; return w.Writer.DeleteOutbox(id) }

func (w watchedWriter) PutOutbox(rec *storagev1.OutboxRecord) error {
	w.s.puts = append(w.s.puts, proto.Clone(rec).(*storagev1.OutboxRecord))
	return w.Writer.PutOutbox(rec)
}

func (w watchedWriter) ScanOutbox(state storagev1.OutboxState, after string, fn func(*storagev1.OutboxRecord) (bool, error)) error {
	if w.s.failScan != nil {
		return w.s.failScan
	}
	return w.Writer.ScanOutbox(state, after, fn)
}

// sweepFixture is a Service over a windowStore holding n dead letters that died an
// hour before now.
func sweepFixture(t *testing.T, n int) (*Service, *windowStore, time.Time) {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "agentplane.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	died := now.Add(-time.Hour)
	if err := st.Update(context.Background(), func(w store.Writer) error {
		for i := range n {
			rec := storetest.Outbox("default", fmt.Sprintf("msg_%04d", i), died, died)
			rec.State, rec.DeadTime = storagev1.OutboxState_OUTBOX_STATE_DEAD, timestamppb.New(died)
			if err := w.PutOutbox(rec); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ws := &windowStore{Store: st}
	svc, err := New(Options{Store: ws})
	if err != nil {
		t.Fatal(err)
	}
	return svc, ws, now
}

// A dead letter retried between the retention sweep's scan and its deleting
// transaction is a notification waiting for delivery again, and one retried that died
// again since (later than the cutoff) is a new dead letter: the sweep leaves both.
//
// Mutants: either && of expired as || (a revived record, whose dead time is cleared,
// or one that died after the cutoff, then counted as expired and deleted).
func TestDeadLetterRetriedDuringTheSweepIsKept(t *testing.T) {
	svc, ws, now := sweepFixture(t, 2)
	ws.before = func() {
		for _, id := range []string{"msg_0000", "msg_0001"} {
			if err := svc.RetryDeadLetter(context.Background(), id); err != nil {
				t.Errorf("retry: %v", err)
			}
		}
		if err := ws.Update(context.Background(), func(w store.Writer) error {
			rec, err := w.GetOutbox("msg_0001")
			if err != nil {
				return err
			}
			rec.State, rec.DeadTime = storagev1.OutboxState_OUTBOX_STATE_DEAD, timestamppb.New(now)
			return w.PutOutbox(rec)
		}); err != nil {
			t.Errorf("dying again: %v", err)
		}
	}
	n, err := svc.expireDeadLetters(context.Background(), now)
	if err != nil || n != 0 {
		t.Fatalf("expireDeadLetters = %d, %v; want nothing deleted", n, err)
	}
	for id, want := range map[string]storagev1.OutboxState{
		"msg_0000": storagev1.OutboxState_OUTBOX_STATE_PENDING, "msg_0001": storagev1.OutboxState_OUTBOX_STATE_DEAD,
	} {
		if err := ws.View(context.Background(), func(r store.Reader) error {
			rec, err := r.GetOutbox(id)
			if err == nil && rec.GetState() != want {
				err = fmt.Errorf("state %s, want %s", rec.GetState(), want)
			}
			return err
		}); err != nil {
			t.Errorf("the retried notification %s: %v", id, err)
		}
	}
}

// A sweep whose scan fails in RetryDeadLetters is an error, not "no dead letters".
//
// Mutant: RetryDeadLetters's scan error return skipped.
func TestRetryDeadLettersScanErrorSurfaces(t *testing.T) {
	svc, ws, _ := sweepFixture(t, 1)
	ws.failScan = errors.New("scan failed")
	if n, err := svc.RetryDeadLetters(context.Background(), ""); !errors.Is(err, ws.failScan) || n != 0 {
		t.Fatalf("RetryDeadLetters = %d, %v; want the scan's error", n, err)
	}
}

// A sender's claim on a notification lasts 2 × delivery_timeout + 1s (as
// docs/notifications.md says): after that another sender takes it again. A pass
// returns once its attempts' outcomes are recorded (here a dead letter: the
// notification's endpoint is no longer configured).
//
// Mutants: the claim's duration changed; pass not waiting for its attempts.
func TestClaimLastsTwiceTheDeliveryTimeoutAndASecond(t *testing.T) {
	svc, ws, now := sweepFixture(t, 0)
	svc.cfg.DeliveryTimeout, svc.cfg.Concurrency = config.Duration(10*time.Second), 1
	svc.now = func() time.Time { return now }
	if err := ws.Update(context.Background(), func(w store.Writer) error {
		return w.PutOutbox(storetest.Outbox("default", "msg_due", now.Add(-time.Minute), now.Add(-time.Minute)))
	}); err != nil {
		t.Fatal(err)
	}
	ws.puts = nil
	if n, err := svc.pass(context.Background()); err != nil || n != 1 {
		t.Fatalf("pass = %d, %v; want the due notification claimed", n, err)
	}
	if len(ws.puts) == 0 {
		t.Fatal("the pass put no claim")
	}
	if got := ws.puts[0].GetNextAttemptTime().AsTime().Sub(now); got != 21*time.Second {
		t.Fatalf("the claim lasts %s, want 2 × 10s + 1s", got)
	}
	if len(ws.puts) != 2 || ws.puts[1].GetState() != storagev1.OutboxState_OUTBOX_STATE_DEAD {
		t.Fatalf("the pass returned with %d puts, want the claim and its outcome (a dead letter)", len(ws.puts))
	}
}

// The sweep deletes in transactions of at most 256 dead letters, so that one sweep of
// a full outbox does not hold one huge write transaction; together they delete all.
//
// Mutant: the batch size changed.
func TestDeadLetterSweepDeletesInBatches(t *testing.T) {
	const batch = 256
	svc, ws, now := sweepFixture(t, batch+1)
	n, err := svc.expireDeadLetters(context.Background(), now)
	if err != nil || n != batch+1 {
		t.Fatalf("expireDeadLetters = %d, %v; want all %d deleted", n, err, batch+1)
	}
	if fmt.Sprint(ws.deletes) != fmt.Sprint([]int{batch, 1}) {
		t.Fatalf("deletes per transaction %v, want [%d 1]", ws.deletes, batch)
	}
}

// Retrying a notification that is not dead is refused (NOT_FOUND) and leaves it as it
// is: its attempts count toward its endpoint's max_attempts.
//
// Mutant: RetryDeadLetter without its dead-letter check (a pending notification
// revived, its attempts reset).
func TestRetryOfAPendingNotificationIsRefused(t *testing.T) {
	svc, ws, now := sweepFixture(t, 0)
	rec := storetest.Outbox("default", "msg_pending", now, now.Add(time.Hour))
	rec.Attempts = 3
	if err := ws.Update(context.Background(), func(w store.Writer) error { return w.PutOutbox(rec) }); err != nil {
		t.Fatal(err)
	}
	if err := svc.RetryDeadLetter(context.Background(), "msg_pending"); !apierr.HasReason(err, apierr.ReasonWebhookDeliveryNotFound) {
		t.Fatalf("RetryDeadLetter of a pending notification = %v, want NOT_FOUND", err)
	}
	if err := ws.View(context.Background(), func(r store.Reader) error {
		got, err := r.GetOutbox("msg_pending")
		if err == nil && got.GetAttempts() != 3 {
			err = fmt.Errorf("attempts %d, want 3", got.GetAttempts())
		}
		return err
	}); err != nil {
		t.Fatalf("the pending notification: %v", err)
	}
}

// dead_letter_retention 0 keeps dead letters for ever: the sender's loop, which looks
// for expired ones before each pass, deletes none.
//
// Mutants: the retention's "r > 0" as "r >= 0", or its && with the cadence as || (both
// sweep with a cutoff of now: every dead letter deleted at once).
func TestZeroRetentionKeepsDeadLetters(t *testing.T) {
	svc, ws, _ := sweepFixture(t, 1)
	svc.cfg = config.DefaultNotifications()
	svc.cfg.DeadLetterRetention, svc.cfg.PollInterval = 0, config.Duration(10*time.Millisecond)
	// The second Update is the second pass's claim: the loop has been past its check of
	// expired dead letters at least once (it comes before each pass), and a sweep
	// deleting the dead letter would have committed (its Update comes before the pass).
	twice := make(chan struct{})
	n := 0
	ws.each = func() {
		if n++; n == 2 {
			close(twice)
		}
	}
	svc.Start()
	testutil.Within(t, twice, "the sender's second pass")
	svc.Stop()
	if err := ws.View(context.Background(), func(r store.Reader) error { _, err := r.GetOutbox("msg_0000"); return err }); err != nil {
		t.Fatalf("the dead letter with a retention of 0: %v", err)
	}
}

// A value longer than its limit is cut to limit-1 characters and …, inside the code
// span; a word of ours with anything but letters, digits, '-' and ':' is quoted.
//
// Mutants: the cut's condition inverted (nothing of the value kept), the letter range
// of word as || (every value bare, mrkdwn included).
func TestSlackQuoteCutsAndWordQuotes(t *testing.T) {
	if got, want := quote(strings.Repeat("a", quoteName+10), quoteName), mrkdwn("`"+strings.Repeat("a", quoteName-1)+"…`"); got != want {
		t.Errorf("quote of a long value = %q, want %q", got, want)
	}
	for s, want := range map[string]mrkdwn{"failed": "failed", "in-progress:2": "in-progress:2", "<!channel>": "`&lt;!channel&gt;`", "a b": "`a b`"} {
		if got := word(s); got != want {
			t.Errorf("word(%q) = %q, want %q", s, got, want)
		}
	}
}

// failingWriter fails one kind of write.
type failingWriter struct {
	store.Writer
	putTask, putOutbox error
}

func (w failingWriter) PutTask(rec *storagev1.TaskRecord) error {
	if w.putTask != nil {
		return w.putTask
	}
	return w.Writer.PutTask(rec)
}

func (w failingWriter) PutOutbox(rec *storagev1.OutboxRecord) error {
	if w.putOutbox != nil {
		return w.putOutbox
	}
	return w.Writer.PutOutbox(rec)
}

// A task's ending and its task.ended notification are one write: when either part is
// refused, the Update fails, so that neither a notification of an end that was not
// stored nor an end without its notification commits.
//
// Mutants: the notifying writer's PutTask, or enqueue's PutOutbox, error return
// skipped.
func TestTaskEndAndItsNotificationFailTogether(t *testing.T) {
	svc, ws, now := sweepFixture(t, 0)
	svc.cfg = config.DefaultNotifications()
	svc.cfg.Webhooks = []config.Webhook{{Name: "hook", Events: []string{config.EventTaskEnded}}}
	svc.byTenant = map[string][]*endpoint{"default": {{Webhook: svc.cfg.Webhooks[0], tenant: "default", events: map[string]bool{config.EventTaskEnded: true}}}}
	ended := storetest.Task("default", "t1", now)
	ended.State = agentplanev1.TaskState_TASK_STATE_FAILED
	refused := errors.New("refused")
	for what, fw := range map[string]failingWriter{"the task": {putTask: refused}, "the notification": {putOutbox: refused}} {
		err := ws.Update(context.Background(), func(w store.Writer) error {
			fw.Writer = w
			return svc.WrapWriter(fw).PutTask(ended)
		})
		if !errors.Is(err, refused) {
			t.Errorf("Update with %s refused = %v, want the refusal", what, err)
		}
	}
	var depth int64
	if err := ws.View(context.Background(), func(r store.Reader) (err error) { depth, err = r.OutboxDepth("default"); return err }); err != nil || depth != 0 {
		t.Fatalf("outbox depth %d, %v; want nothing enqueued", depth, err)
	}
}

// An A2A push notification to a tenant whose outbox is full is dropped before its
// body is built (building it reads the task's history); with room, the body is built
// once per push config and enqueued.
//
// Mutant: enqueueA2A building the body before enqueueTo's depth check.
func TestA2APushToAFullOutboxBuildsNoBody(t *testing.T) {
	svc, ws, now := sweepFixture(t, 0)
	svc.cfg = config.DefaultNotifications()
	built := 0
	svc.a2aPush = func(store.Reader, *storagev1.TaskRecord, *storagev1.A2APushConfig) ([]byte, error) {
		built++
		return []byte(`{}`), nil
	}
	task := storetest.Task("default", "t1", now)
	task.A2APushConfigs = []*storagev1.A2APushConfig{{Id: "p1", Url: "https://example.com/push"}}
	depth := func() (n int64) {
		t.Helper()
		if err := ws.View(context.Background(), func(r store.Reader) (err error) { n, err = r.OutboxDepth("default"); return err }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		max                int64
		state              agentplanev1.TaskState // a change of state notifies
		wantBuilt, wantDep int64
	}{
		{max: 0, state: agentplanev1.TaskState_TASK_STATE_SUBMITTED},
		{max: 1, state: agentplanev1.TaskState_TASK_STATE_WORKING, wantBuilt: 1, wantDep: 1},
	} {
		svc.cfg.MaxOutboxPerTenant = c.max
		task.State = c.state
		if err := ws.Update(context.Background(), func(w store.Writer) error { return svc.WrapWriter(w).PutTask(task) }); err != nil {
			t.Fatal(err)
		}
		if int64(built) != c.wantBuilt || depth() != c.wantDep {
			t.Fatalf("outbox bound %d: built %d bodies, depth %d; want %d, %d", c.max, built, depth(), c.wantBuilt, c.wantDep)
		}
	}
}
