package webhooks_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/boltstore"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/storetest"
	"github.com/agentplane/agentplane/server/webhooks"
	"github.com/agentplane/agentplane/server/webhooks/webhookstest"
)

// The Standard Webhooks test vector (the reference libraries' signing test).
func TestSignStandardWebhooksVector(t *testing.T) {
	key, err := base64.StdEncoding.DecodeString("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := webhooks.Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
	// The independent verifier accepts it too (at its own time), and rejects a change.
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,bogus v1,"+strings.TrimPrefix(got, "v1,"))
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	at := time.Unix(1614265330, 0)
	if err := webhookstest.Verify(secret, h, []byte(`{"test": 2432232314}`), at, time.Minute); err != nil {
		t.Fatalf("verifier refuses the vector: %v", err)
	}
	if err := webhookstest.Verify(secret, h, []byte(`{"test": 2432232315}`), at, time.Minute); err == nil {
		t.Fatal("verifier accepts a changed body")
	}
}

// secretOf makes a whsec_ secret from a seed.
func secretOf(seed byte) string {
	key := make([]byte, 32)
	for i := range key {
		key[i] = seed + byte(i)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

func fastConfig(hooks ...config.Webhook) config.Notifications {
	c := config.DefaultNotifications()
	c.AllowPrivateDestinations = true // loopback receivers
	c.PollInterval = config.Duration(20 * time.Millisecond)
	c.InitialBackoff = config.Duration(100 * time.Millisecond)
	c.MaxBackoff = config.Duration(400 * time.Millisecond)
	c.DeliveryTimeout = config.Duration(2 * time.Second)
	c.ConsoleURL = "https://console.example.com/"
	c.Webhooks = hooks
	return c
}

type fixture struct {
	svc *webhooks.Service
	st  store.Store
}

// open builds a service over a fresh bbolt store, its metrics on reg, without
// starting the sender.
func open(t testing.TB, cfg config.Notifications, reg *prometheus.Registry) *fixture {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "agentplane.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := webhooks.New(webhooks.Options{Store: st, Config: cfg, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		svc.Stop()
		_ = st.Close()
	})
	return &fixture{svc: svc, st: st}
}

// start is open with the sender running.
func start(t *testing.T, cfg config.Notifications) *fixture {
	t.Helper()
	f := open(t, cfg, prometheus.NewRegistry())
	f.svc.Start()
	return f
}

// update runs fn with the notifying writer, as the task domain does.
func (f *fixture) update(t testing.TB, fn func(w store.Writer) error) {
	t.Helper()
	if err := f.st.Update(context.Background(), func(w store.Writer) error { return fn(f.svc.WrapWriter(w)) }); err != nil {
		t.Fatal(err)
	}
}

// endTask creates a task and ends it in two transactions.
func (f *fixture) endTask(t testing.TB, tenant, id string) {
	t.Helper()
	rec := storetest.Task(tenant, id, time.Now())
	f.update(t, func(w store.Writer) error { return w.PutTask(rec) })
	f.update(t, func(w store.Writer) error {
		rec.State = agentplanev1.TaskState_TASK_STATE_FAILED
		rec.EndTime = timestamppb.Now()
		rec.Failure = &agentplanev1.TaskFailure{Reason: "model.error", Message: "the model <b>failed</b>"}
		return w.PutTask(rec)
	})
}

func byEvent(ds []webhookstest.Delivery) map[string][]webhooks.Message {
	out := map[string][]webhooks.Message{}
	for _, d := range ds {
		var m webhooks.Message
		if err := json.Unmarshal(d.Body, &m); err == nil {
			out[m.Type] = append(out[m.Type], m)
		}
	}
	return out
}

// TestInterruptAndTaskEventsSigned: an approval raised, resolved, another expired and
// a task ended reach the endpoint once each, signed, verified by the spec's algorithm,
// with links to the console; an auto-pause interrupt sends nothing.
func TestInterruptAndTaskEventsSigned(t *testing.T) {
	secret := secretOf(1)
	recv := webhookstest.New(t, secret)
	f := start(t, fastConfig(config.Webhook{Name: "ops", URL: recv.URL, Secret: secret, Events: config.WebhookEvents}))

	task := storetest.Task("default", "t1", time.Now())
	f.update(t, func(w store.Writer) error { return w.PutTask(task) })
	newInterrupt := func(id string) *storagev1.InterruptRecord {
		in := storetest.Interrupt("default", "t1", id, time.Now())
		in.Interrupt.Request = &agentplanev1.Interrupt_Approval{Approval: &agentplanev1.ApprovalRequest{
			InterruptId: id, ToolName: "refund", Context: &agentplanev1.ApprovalContext{AgentName: "billing", Tags: []string{"money"}},
		}}
		return in
	}
	i1, i2 := newInterrupt("i1"), newInterrupt("i2")
	pause := storetest.Interrupt("default", "t1", "i3", time.Now())
	pause.Interrupt.Kind = agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE
	f.update(t, func(w store.Writer) error {
		for _, in := range []*storagev1.InterruptRecord{i1, i2, pause} {
			if err := w.PutInterrupt(in); err != nil {
				return err
			}
		}
		return nil
	})
	resolve := func(in *storagev1.InterruptRecord, src agentplanev1.DecisionSource) {
		in.Interrupt.State = agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED
		in.Interrupt.Decision = &agentplanev1.Decision{Type: agentplanev1.DecisionType_DECISION_TYPE_REJECT, Source: src,
			DecidedBy: "alice", Reason: new("too much")}
		f.update(t, func(w store.Writer) error { return w.PutInterrupt(in) })
	}
	resolve(i1, agentplanev1.DecisionSource_DECISION_SOURCE_HUMAN)
	resolve(i2, agentplanev1.DecisionSource_DECISION_SOURCE_DEADLINE)
	resolve(pause, agentplanev1.DecisionSource_DECISION_SOURCE_CONTINUE)
	// Writing a resolved interrupt again is no new event.
	f.update(t, func(w store.Writer) error { return w.PutInterrupt(i1) })
	task.State, task.EndTime = agentplanev1.TaskState_TASK_STATE_COMPLETED, timestamppb.Now()
	f.update(t, func(w store.Writer) error { return w.PutTask(task) })
	f.update(t, func(w store.Writer) error { return w.PutTask(task) }) // still ended: no second event

	ds := recv.WaitFor(t, testutil.WaitLimit, "5 notifications", func(ds []webhookstest.Delivery) bool { return len(ds) >= 5 })
	ids := map[string]bool{}
	for _, d := range ds {
		if d.Verified != nil {
			t.Errorf("delivery %s: signature does not verify: %v", d.ID, d.Verified)
		}
		if !strings.HasPrefix(d.ID, "msg_") || ids[d.ID] {
			t.Errorf("delivery id %q: want a fresh msg_ id", d.ID)
		}
		ids[d.ID] = true
	}
	ev := byEvent(ds)
	if len(ev[config.EventInterruptCreated]) != 2 || len(ev[config.EventInterruptResolved]) != 1 ||
		len(ev[config.EventInterruptExpired]) != 1 || len(ev[config.EventTaskEnded]) != 1 {
		t.Fatalf("events %v: want 2 created, 1 resolved, 1 expired, 1 task.ended", ev)
	}
	c := ev[config.EventInterruptCreated][0].Data
	if c.Tool != "refund" || c.Agent != "billing" || c.Tags[0] != "money" || c.TaskID != "t1" ||
		c.URL != "https://console.example.com/ui/interrupts/"+c.InterruptID {
		t.Errorf("interrupt.created data = %+v", c)
	}
	r := ev[config.EventInterruptResolved][0].Data
	if r.InterruptID != "i1" || r.Decision == nil || r.Decision.Type != "reject" || r.Decision.Source != "human" ||
		r.Decision.DecidedBy != "alice" || r.Decision.Reason != "too much" {
		t.Errorf("interrupt.resolved data = %+v (decision %+v)", r, r.Decision)
	}
	if x := ev[config.EventInterruptExpired][0].Data; x.InterruptID != "i2" || x.Decision.Source != "deadline" {
		t.Errorf("interrupt.expired data = %+v", x)
	}
	if e := ev[config.EventTaskEnded][0].Data; e.State != "completed" || e.URL != "https://console.example.com/ui/tasks/t1" {
		t.Errorf("task.ended data = %+v", e)
	}
	f.waitOutboxEmpty(t)
	if got := len(recv.Deliveries()); got != 5 {
		t.Errorf("%d deliveries, want 5 (one per event)", got)
	}
}

// waitDeadLetters waits until there is a dead letter and returns them all.
func (f *fixture) waitDeadLetters(t *testing.T) []*storagev1.OutboxRecord {
	t.Helper()
	var dead []*storagev1.OutboxRecord
	done := make(chan struct{})
	go func() {
		defer close(done)
		for len(dead) == 0 {
			dead, _, _ = f.svc.ListDeadLetters(context.Background(), "", "", 10)
			time.Sleep(10 * time.Millisecond)
		}
	}()
	testutil.Within(t, done, "a dead letter")
	return dead
}

func (f *fixture) waitOutboxEmpty(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			st, err := f.st.Stats(context.Background())
			if err != nil || st.OutboxPending == 0 {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	testutil.Within(t, done, "outbox drained (delivered rows purged)")
}

// TestRetriesWithBackoff: failed attempts are retried with the same webhook-id, each
// after at least half the doubled backoff, until one succeeds.
func TestRetriesWithBackoff(t *testing.T) {
	secret := secretOf(2)
	recv := webhookstest.New(t, secret)
	recv.Respond(func(d webhookstest.Delivery) int {
		if len(recv.Deliveries()) <= 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	cfg := fastConfig(config.Webhook{Name: "ops", URL: recv.URL, Secret: secret, Events: []string{config.EventTaskEnded}})
	f := start(t, cfg)
	f.endTask(t, "default", "t1")
	ds := recv.WaitFor(t, testutil.WaitLimit, "4 attempts", func(ds []webhookstest.Delivery) bool { return len(ds) >= 4 })
	f.waitOutboxEmpty(t)
	initial := cfg.InitialBackoff.D()
	for i := 1; i < 4; i++ {
		if ds[i].ID != ds[0].ID {
			t.Errorf("attempt %d has webhook-id %s, want %s (the same on every attempt)", i+1, ds[i].ID, ds[0].ID)
		}
		// The wait after attempt i is initial*2^(i-1) capped, jittered into [d/2, d].
		d := min(initial<<(i-1), cfg.MaxBackoff.D())
		if gap := ds[i].At.Sub(ds[i-1].At); gap < d/2 {
			t.Errorf("attempt %d came %s after attempt %d; the backoff is at least %s", i+1, gap, i, d/2)
		}
		if ds[i].Verified != nil {
			t.Errorf("attempt %d: %v", i+1, ds[i].Verified)
		}
	}
	if got := len(recv.Deliveries()); got != 4 {
		t.Errorf("%d attempts, want 4 (3 failures, then delivered once)", got)
	}
}

// TestDeadLetterAndRetry: after max_attempts the notification is a dead letter, listed;
// retried, it is delivered once the receiver works.
func TestDeadLetterAndRetry(t *testing.T) {
	secret := secretOf(3)
	recv := webhookstest.New(t, secret)
	broken := make(chan struct{})
	recv.Respond(func(webhookstest.Delivery) int {
		select {
		case <-broken:
			return http.StatusOK
		default:
			return http.StatusInternalServerError
		}
	})
	f := start(t, fastConfig(config.Webhook{Name: "ops", URL: recv.URL, Secret: secret, Events: []string{config.EventTaskEnded}, MaxAttempts: 2}))
	f.endTask(t, "default", "t1")
	dead := f.waitDeadLetters(t)
	if len(dead) != 1 || dead[0].GetAttempts() != 2 || dead[0].GetLastError() != "HTTP 500 Internal Server Error" || dead[0].GetEventType() != config.EventTaskEnded {
		t.Fatalf("dead letters %v: want one after 2 attempts with HTTP 500", dead)
	}
	// The dead letter says when it was last attempted (the console and ctl show it).
	if last := dead[0].GetLastAttemptTime(); last == nil || last.AsTime().Before(dead[0].GetCreateTime().AsTime()) {
		t.Fatalf("dead letter's last attempt time %v (created %v)", last, dead[0].GetCreateTime())
	}
	if other, _, _ := f.svc.ListDeadLetters(context.Background(), "acme", "", 10); len(other) != 0 {
		t.Fatalf("tenant acme lists %d dead letters of tenant default", len(other))
	}
	if n := len(recv.Deliveries()); n != 2 {
		t.Fatalf("%d attempts before the dead letter, want 2", n)
	}
	close(broken)
	if err := f.svc.RetryDeadLetter(context.Background(), dead[0].GetId()); err != nil {
		t.Fatal(err)
	}
	recv.WaitFor(t, testutil.WaitLimit, "the retried notification", func(ds []webhookstest.Delivery) bool { return len(ds) == 3 })
	f.waitOutboxEmpty(t)
	if err := f.svc.RetryDeadLetter(context.Background(), dead[0].GetId()); !store.IsNotFound(err) {
		t.Fatalf("retrying a delivered notification: %v, want NOT_FOUND", err)
	}
}

// TestGoneIsNotRetried: a receiver that answers 410 Gone gets one attempt; the
// notification is a dead letter at once.
func TestGoneIsNotRetried(t *testing.T) {
	secret := secretOf(5)
	recv := webhookstest.New(t, secret)
	recv.Respond(func(webhookstest.Delivery) int { return http.StatusGone })
	f := start(t, fastConfig(config.Webhook{Name: "ops", URL: recv.URL, Secret: secret, Events: []string{config.EventTaskEnded}, MaxAttempts: 5}))
	f.endTask(t, "default", "t1")
	dead := f.waitDeadLetters(t)
	if len(dead) != 1 || dead[0].GetAttempts() != 1 || !strings.Contains(dead[0].GetLastError(), "410") {
		t.Fatalf("dead letters %v: want one after a single attempt answered 410", dead)
	}
	if n := len(recv.Deliveries()); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
}

// TestDeadLettersExpire: a dead letter is deleted after dead_letter_retention, so that
// dead letters cannot fill the outbox for good.
func TestDeadLettersExpire(t *testing.T) {
	secret := secretOf(6)
	recv := webhookstest.New(t, secret)
	recv.Respond(func(webhookstest.Delivery) int { return http.StatusInternalServerError })
	cfg := fastConfig(config.Webhook{Name: "ops", URL: recv.URL, Secret: secret, Events: []string{config.EventTaskEnded}, MaxAttempts: 1})
	cfg.DeadLetterRetention = config.Duration(300 * time.Millisecond)
	reg := prometheus.NewRegistry()
	f := open(t, cfg, reg)
	f.svc.Start()
	f.endTask(t, "default", "t1")
	if dead := f.waitDeadLetters(t); len(dead) != 1 {
		t.Fatalf("dead letters %v, want one", dead)
	}
	deadline := time.Now().Add(testutil.WaitLimit)
	for {
		dead, _, err := f.svc.ListDeadLetters(context.Background(), "default", "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(dead) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dead letter is still there %s after a retention of 300ms", testutil.WaitLimit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var depth int64
	if err := f.st.View(context.Background(), func(r store.Reader) error {
		var err error
		depth, err = r.OutboxDepth("default")
		return err
	}); err != nil || depth != 0 {
		t.Fatalf("outbox depth %d (%v) after the dead letter expired, want 0", depth, err)
	}
	// The count follows the deleting transaction's commit.
	for counter(reg, "agentplane_webhook_deliveries_total", "expired") == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := counter(reg, "agentplane_webhook_deliveries_total", "expired"); n != 1 {
		t.Fatalf("%v deliveries counted expired, want the one dead letter", n)
	}
}

// TestReceiverDownThenBack: with the receiver's port closed, attempts fail; once a
// receiver listens there again every notification arrives.
func TestReceiverDownThenBack(t *testing.T) {
	secret := secretOf(4)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // down: connections are refused
	reg := prometheus.NewRegistry()
	f := open(t, fastConfig(config.Webhook{Name: "ops", URL: "http://" + addr + "/hook", Secret: secret, Events: []string{config.EventTaskEnded}, MaxAttempts: 100}), reg)
	f.svc.Start()
	const n = 10
	for i := range n {
		f.endTask(t, "default", fmt.Sprintf("t%d", i))
	}
	// Wait until every notification failed at least once.
	failed := make(chan struct{})
	go func() {
		defer close(failed)
		for counter(reg, "agentplane_webhook_attempts_total", "error") < n {
			time.Sleep(10 * time.Millisecond)
		}
	}()
	testutil.Within(t, failed, "failed attempts while the receiver is down")
	lis, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s taken by another process meanwhile: %v", addr, err)
	}
	recv := webhookstest.Serve(t, lis, secret)
	recv.WaitFor(t, testutil.WaitLimit, "every task.ended", func(ds []webhookstest.Delivery) bool { return len(tasksOf(ds)) == n })
	f.waitOutboxEmpty(t)
	for _, d := range recv.Deliveries() {
		if d.Verified != nil {
			t.Errorf("%s: %v", d.ID, d.Verified)
		}
	}
}

func tasksOf(ds []webhookstest.Delivery) map[string]bool {
	out := map[string]bool{}
	for _, m := range byEvent(ds)[config.EventTaskEnded] {
		out[m.Data.TaskID] = true
	}
	return out
}

func counter(reg *prometheus.Registry, name, label string) float64 {
	mfs, _ := reg.Gather()
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == label {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// TestTenantIsolation: tenant a's endpoint receives a's events only, and b's b's.
func TestTenantIsolation(t *testing.T) {
	sa, sb := secretOf(5), secretOf(6)
	ra, rb := webhookstest.New(t, sa), webhookstest.New(t, sb)
	f := start(t, fastConfig(
		config.Webhook{Name: "a", Tenant: "a", URL: ra.URL, Secret: sa, Events: config.WebhookEvents},
		config.Webhook{Name: "b", Tenant: "b", URL: rb.URL, Secret: sb, Events: config.WebhookEvents},
	))
	for i := range 3 {
		f.endTask(t, "a", fmt.Sprintf("a%d", i))
		f.endTask(t, "b", fmt.Sprintf("b%d", i))
	}
	f.endTask(t, "c", "c0") // no endpoint: nothing is enqueued
	ra.WaitFor(t, testutil.WaitLimit, "a's events", func(ds []webhookstest.Delivery) bool { return len(ds) >= 3 })
	rb.WaitFor(t, testutil.WaitLimit, "b's events", func(ds []webhookstest.Delivery) bool { return len(ds) >= 3 })
	f.waitOutboxEmpty(t)
	for name, r := range map[string]*webhookstest.Receiver{"a": ra, "b": rb} {
		ds := r.Deliveries()
		if len(ds) != 3 {
			t.Errorf("tenant %s: %d deliveries, want 3", name, len(ds))
		}
		for _, m := range byEvent(ds)[config.EventTaskEnded] {
			if m.Data.Tenant != name || !strings.HasPrefix(m.Data.TaskID, name) {
				t.Errorf("tenant %s's endpoint got %+v", name, m.Data)
			}
		}
		for _, d := range ds {
			if d.Verified != nil {
				t.Errorf("tenant %s: %v (signed with another tenant's secret?)", name, d.Verified)
			}
		}
	}
}

// TestSlackBody: the slack format posts {"text", "blocks"} that an incoming-webhook
// URL accepts, with mrkdwn escaped and a link to the console.
func TestSlackBody(t *testing.T) {
	recv := webhookstest.New(t, "")
	f := start(t, fastConfig(config.Webhook{Name: "slack", URL: recv.URL, Format: config.FormatSlack, Events: []string{config.EventTaskEnded}}))
	f.endTask(t, "default", "t1")
	ds := recv.WaitFor(t, testutil.WaitLimit, "the slack message", func(ds []webhookstest.Delivery) bool { return len(ds) == 1 })
	body := decodeSlack(t, ds[0].Body)
	if !strings.Contains(body.Text, "Task `t1` failed") {
		t.Fatalf("slack body = %s", ds[0].Body)
	}
	section := body.Blocks[0].Text.Text
	if !strings.Contains(section, "&lt;b&gt;failed&lt;/b&gt;") || strings.Contains(section, "<b>") ||
		!strings.Contains(section, "<https://console.example.com/ui/tasks/t1|Open in the console>") {
		t.Fatalf("section text %q: want escaped content and the console link", section)
	}
	if ds[0].Header.Get("webhook-signature") != "" {
		t.Errorf("unsigned endpoint sent a signature")
	}
}

// TestDialTimeCheck: a destination that passes the text check but resolves to a
// loopback address (as after DNS rebinding) is refused when dialled unless the
// deployment allows private destinations; the notification ends as a dead letter
// naming why, and the receiver never sees it.
func TestDialTimeCheck(t *testing.T) {
	recv := webhookstest.New(t, "")
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(recv.URL, "http://"))
	cfg := fastConfig(config.Webhook{Name: "rebound", URL: "http://localhost:" + port + "/", Format: config.FormatSlack,
		Events: []string{config.EventTaskEnded}, MaxAttempts: 1})
	cfg.AllowPrivateDestinations = false
	f := start(t, cfg)
	f.endTask(t, "default", "t1")
	dead := f.waitDeadLetters(t)
	if !strings.Contains(dead[0].GetLastError(), "url.private_host") {
		t.Fatalf("last error %q: want the address refused (url.private_host)", dead[0].GetLastError())
	}
	if n := len(recv.Deliveries()); n != 0 {
		t.Fatalf("receiver got %d requests through a refused address", n)
	}
}

// TestOutboxBound: past max_outbox_per_tenant new notifications are dropped and
// counted; other tenants are not affected.
func TestOutboxBound(t *testing.T) {
	recv := webhookstest.New(t, "")
	block := make(chan struct{})
	defer close(block)
	recv.Respond(func(webhookstest.Delivery) int { <-block; return http.StatusOK })
	cfg := fastConfig(
		config.Webhook{Name: "a", Tenant: "a", URL: recv.URL, Format: config.FormatSlack, Events: []string{config.EventTaskEnded}},
		config.Webhook{Name: "b", Tenant: "b", URL: recv.URL, Format: config.FormatSlack, Events: []string{config.EventTaskEnded}},
	)
	cfg.MaxOutboxPerTenant = 3
	reg := prometheus.NewRegistry()
	f := open(t, cfg, reg) // sender not started: everything stays in the outbox
	for i := range 5 {
		f.endTask(t, "a", fmt.Sprintf("a%d", i))
	}
	f.endTask(t, "b", "b0")
	var depthA, depthB int64
	_ = f.st.View(context.Background(), func(r store.Reader) error {
		depthA, _ = r.OutboxDepth("a")
		depthB, _ = r.OutboxDepth("b")
		return nil
	})
	if depthA != 3 || depthB != 1 {
		t.Fatalf("outbox depth a=%d b=%d, want 3 (the bound) and 1", depthA, depthB)
	}
	if got := counter(reg, "agentplane_webhook_dropped_total", "a"); got != 2 {
		t.Fatalf("dropped for a = %v, want 2", got)
	}
}
