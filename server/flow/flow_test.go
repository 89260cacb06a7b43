package flow

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

func TestKey(t *testing.T) {
	k, err := CompileKey(`"customer" in labels ? labels["customer"] : (input.startsWith("vip") ? "vip" : "")`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		labels map[string]string
		input  string
		want   string
	}{{map[string]string{"customer": "a"}, "", "a"}, {nil, "vip order", "vip"}, {nil, "plain", ""}} {
		got, err := k.Eval(context.Background(), Task{Tenant: "acme", Labels: c.labels,
			Input: &agentplanev1.Message{Parts: []*agentplanev1.Part{{Kind: &agentplanev1.Part_Text{Text: c.input}}}}})
		if err != nil || got != c.want {
			t.Errorf("key of %v %q = %q, %v; want %q", c.labels, c.input, got, err, c.want)
		}
	}
	if _, err := k.Eval(context.Background(), Task{}); err != nil {
		t.Errorf("no labels, no input: %v", err)
	}
	long, _ := CompileKey(`labels["x"]`)
	if _, err := long.Eval(context.Background(), Task{Labels: map[string]string{"x": strings.Repeat("k", MaxKeyBytes+1)}}); err == nil {
		t.Error("a key over MaxKeyBytes was accepted")
	}
	if _, err := long.Eval(context.Background(), Task{}); err == nil {
		t.Error("a missing label evaluated")
	}
	for _, bad := range []string{"", "labels[", "1 + 1", strings.Repeat("a", MaxExpressionBytes+1)} {
		if _, err := CompileKey(bad); err == nil {
			t.Errorf("CompileKey(%.20q) compiled", bad)
		}
	}
}

func TestBucket(t *testing.T) {
	b := Bucket{Rate: 2, Burst: 2}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec, ok, _ := b.Take(nil, t0)
	if !ok || rec.GetTokens() != 1 {
		t.Fatalf("first take: %v, %v", rec, ok)
	}
	rec, ok, _ = b.Take(rec, t0)
	if !ok {
		t.Fatal("second take of a burst of 2 refused")
	}
	rec, ok, wait := b.Take(rec, t0)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("third take: ok %v, wait %v; want refused, 500ms", ok, wait)
	}
	if _, ok, _ := b.Take(rec, t0.Add(500*time.Millisecond)); !ok {
		t.Fatal("refused after the wait it named")
	}
	// A refill time ahead of now (another replica's clock) adds nothing and stays.
	ahead := &storagev1.FlowRecord{Tokens: 0, RefillTime: timestamppb.New(t0.Add(time.Second))}
	next, ok, wait := b.Take(ahead, t0)
	if ok || !next.GetRefillTime().AsTime().Equal(t0.Add(time.Second)) || wait != 1500*time.Millisecond {
		t.Fatalf("clock behind: ok %v, refill %v, wait %v", ok, next.GetRefillTime().AsTime(), wait)
	}
	// Idle time never fills past the burst.
	full, _, _ := b.Take(&storagev1.FlowRecord{Tokens: 0, RefillTime: timestamppb.New(t0)}, t0.Add(time.Hour))
	if full.GetTokens() != 1 {
		t.Fatalf("after an hour idle, tokens left after one take = %v, want burst-1 = 1", full.GetTokens())
	}
}
