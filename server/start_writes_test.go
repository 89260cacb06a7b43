package server_test

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/webhooks/webhookstest"
)

// TestStartTaskWriteSet pins what a StartTask writes, on bbolt, with a webhook
// endpoint subscribed to every event and a budget rule configured: a key in each of
// the task's seven buckets (the task, its spec, its first event, the request id, the
// creation and run-queue indexes, the counters) and nothing else. Starting a task is
// no notification event, so no outbox row; the budget is only read. Ending the task
// then writes its task.ended notification into the outbox, so the endpoint is live.
func TestStartTaskWriteSet(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8G"
	recv := webhookstest.New(t, secret)
	recv.Respond(func(webhookstest.Delivery) int { return 503 }) // an attempt leaves the record in the outbox
	cfg := servertest.Config(t)
	cfg.Notifications.AllowPrivateDestinations = true
	cfg.Notifications.Webhooks = []config.Webhook{{Name: "ops", URL: recv.URL, Secret: secret, Events: config.WebhookEvents}}
	cfg.Budgets.Rules = []config.BudgetRule{{Name: "daily", Period: config.PeriodDay, MaxTokens: 100, WarnPercent: 50}}

	// step runs fn against a control plane on cfg's data directory and returns the
	// buckets whose keys fn's changes added, removed or rewrote.
	step := func(fn func(ctx context.Context, in *servertest.Instance)) []string {
		t.Helper()
		in := servertest.StartConfig(t, cfg)
		in.Stop(t)
		before := storeKeys(t, cfg.StorePath())
		in = servertest.StartConfig(t, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitLimit)
		defer cancel()
		fn(ctx, in)
		in.Stop(t)
		return changedBuckets(before, storeKeys(t, cfg.StorePath()))
	}

	var taskID string
	got := step(func(ctx context.Context, in *servertest.Instance) {
		resp, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
			RequestId: "req-1", Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())},
			Input: client.UserText("hello"), Labels: map[string]string{"k": "v"},
		})
		if err != nil {
			t.Fatal(err)
		}
		taskID = resp.GetTask().GetTaskId()
	})
	want := []string{"counters", "events", "requests", "run_queue", "task_specs", "tasks", "tasks_by_create"}
	if !slices.Equal(got, want) {
		t.Fatalf("a StartTask changed the keys of buckets %q, want %q", got, want)
	}

	got = step(func(ctx context.Context, in *servertest.Instance) {
		if _, err := in.Client.Tasks.CancelTask(ctx, &agentplanev1.CancelTaskRequest{TaskId: taskID}); err != nil {
			t.Fatal(err)
		}
	})
	if !slices.Contains(got, "outbox") {
		t.Fatalf("canceling the task changed buckets %q: no outbox row for the subscribed endpoint", got)
	}
}

// storeKeys is every key of the bbolt file at path, as "bucket/key" (nested buckets
// by their path), with its value.
func storeKeys(t *testing.T, path string) map[string]string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	keys := map[string]string{}
	var walk func(prefix string, b *bolt.Bucket) error
	walk = func(prefix string, b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				if nested := b.Bucket(k); nested != nil {
					return walk(prefix+string(k)+"/", nested)
				}
			}
			keys[prefix+string(k)] = string(v)
			return nil
		})
	}
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(string(name)+"/", b) })
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// changedBuckets names, sorted, the top-level buckets with a key that is in one of a
// and b but not the other, or has another value.
func changedBuckets(a, b map[string]string) []string {
	set := map[string]bool{}
	for _, m := range []map[string]string{a, b} {
		for k := range m {
			va, inA := a[k]
			vb, inB := b[k]
			if !inA || !inB || va != vb {
				bucket, _, _ := strings.Cut(k, "/")
				set[bucket] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
