package schema

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)

func TestKeyOrder(t *testing.T) {
	for _, tc := range []struct {
		name        string
		first, then []byte
	}{
		{"newer task lists first", TaskByCreateKey("a", t0.Add(time.Nanosecond), "z"), TaskByCreateKey("a", t0, "a")},
		{"same time: by id", TaskByCreateKey("a", t0, "a"), TaskByCreateKey("a", t0, "b")},
		{"older queue entry first", TimeKey("a", t0, "z"), TimeKey("a", t0.Add(time.Second), "a")},
		{"events by sequence", SeqKey("a", "task", 2), SeqKey("a", "task", 10)},
		{"sequence past 255", SeqKey("a", "task", 255), SeqKey("a", "task", 256)},
		{"tenant groups everything", TimeKey("a", t0.Add(time.Hour), "x"), TimeKey("b", t0, "x")},
		{"before Unix epoch clamps to zero", TimeKey("a", time.Unix(-5, 0), "x"), TimeKey("a", time.Unix(0, 1), "x")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if bytes.Compare(tc.first, tc.then) >= 0 {
				t.Fatalf("%x does not sort before %x", tc.first, tc.then)
			}
		})
	}
}

// TestPrefixFree checks that a tenant's (or a task's) range never holds another one's
// keys even when one id is a prefix of the other.
func TestPrefixFree(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix []byte
		key    []byte
	}{
		{"tenant a vs ab", TenantPrefix("a"), TaskKey("ab", "t")},
		{"task t vs t1", ChildPrefix("a", "t"), SeqKey("a", "t1", 1)},
		{"task id looks like a length", ChildPrefix("a", "t"), SeqKey("a", "t\x01", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if bytes.HasPrefix(tc.key, tc.prefix) {
				t.Fatalf("key %x falls in range %x", tc.key, tc.prefix)
			}
		})
	}
}

func TestBounds(t *testing.T) {
	at := TimeKey("a", t0, "x")
	if bytes.Compare(at, TimeBound("a", t0)) >= 0 {
		t.Fatal("an entry at t sorts at or after TimeBound(t)")
	}
	if bytes.Compare(TimeKey("a", t0.Add(time.Nanosecond), ""), TimeBound("a", t0)) < 0 {
		t.Fatal("an entry after t sorts before TimeBound(t)")
	}
	if got := TaskByCreateBound("a", t0); bytes.Compare(got, TaskByCreateKey("a", t0, "x")) > 0 ||
		bytes.Compare(got, TaskByCreateKey("a", t0.Add(time.Nanosecond), "x")) <= 0 {
		t.Fatal("TaskByCreateBound(t) must start the newest-first scan at tasks created at or before t")
	}
	for _, tc := range []struct{ in, want []byte }{
		{[]byte{1, 2}, []byte{1, 3}},
		{[]byte{1, 0xff}, []byte{2}},
		{[]byte{0xff, 0xff}, nil},
	} {
		if got := PrefixEnd(tc.in); !bytes.Equal(got, tc.want) {
			t.Errorf("PrefixEnd(%x) = %x, want %x", tc.in, got, tc.want)
		}
	}
}

func TestDecode(t *testing.T) {
	tenant, at, id, ok := DecodeTimeKey(TimeKey("acme", t0, "task-1"))
	if !ok || tenant != "acme" || !at.Equal(t0) || id != "task-1" {
		t.Fatalf("DecodeTimeKey = %q %v %q %v", tenant, at, id, ok)
	}
	tenant, at, id, ok = DecodeTaskByCreateKey(TaskByCreateKey("acme", t0, "task-1"))
	if !ok || tenant != "acme" || !at.Equal(t0) || id != "task-1" {
		t.Fatalf("DecodeTaskByCreateKey = %q %v %q %v", tenant, at, id, ok)
	}
	if got := DecodeSeq(SeqKey("a", "t", 1234567)); got != 1234567 {
		t.Fatalf("DecodeSeq = %d", got)
	}
	if got, ok := DecodeChildID(ChildPrefix("a", "t"), ChildKey("a", "t", "i-9")); !ok || got != "i-9" {
		t.Fatalf("DecodeChildID = %q %v", got, ok)
	}
	if got := DecodeCount(EncodeCount(-3)); got != -3 {
		t.Fatalf("DecodeCount = %d", got)
	}
}

func FuzzDecodeTimeKey(f *testing.F) {
	f.Add(TimeKey("acme", t0, "x"))
	f.Add([]byte{})
	f.Add([]byte{5, 'a'})
	f.Fuzz(func(t *testing.T, key []byte) {
		tenant, at, id, ok := DecodeTimeKey(key)
		if ok && ValidComponent(tenant) && len(id) <= MaxComponent && at.UnixNano() >= 0 {
			if re := TimeKey(tenant, at, id); !bytes.Equal(re, key) {
				t.Fatalf("DecodeTimeKey(%x) re-encodes to %x", key, re)
			}
		}
	})
}

func FuzzDecodeTaskByCreateKey(f *testing.F) {
	f.Add(TaskByCreateKey("acme", t0, "x"))
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, key []byte) {
		tenant, at, id, ok := DecodeTaskByCreateKey(key)
		if ok && ValidComponent(tenant) && at.UnixNano() >= 0 {
			if re := TaskByCreateKey(tenant, at, id); !bytes.Equal(re, key) {
				t.Fatalf("DecodeTaskByCreateKey(%x) re-encodes to %x", key, re)
			}
		}
	})
}

func TestQueueNamesAndKeys(t *testing.T) {
	for q, want := range map[string]bool{
		"default": true, "gpu": true, "a": true, "team-7.gpu_a100": true, strings.Repeat("q", MaxQueueName): true,
		"": false, "-gpu": false, ".gpu": false, "_gpu": false, "gpu a100": false, "gpu/a100": false, "été": false,
		strings.Repeat("q", MaxQueueName+1): false,
	} {
		if ValidQueueName(q) != want {
			t.Errorf("ValidQueueName(%q) = %v", q, !want)
		}
	}
	at := time.Unix(1700000000, 42).UTC()
	k := QueueKey("acme", "gpu", at, "t1")
	tenant, queue, got, id, ok := DecodeQueueKey(k)
	if !ok || tenant != "acme" || queue != "gpu" || !got.Equal(at) || id != "t1" {
		t.Fatalf("DecodeQueueKey = %q %q %v %q %v", tenant, queue, got, id, ok)
	}
	if !bytes.HasPrefix(k, QueuePrefix("acme", "gpu")) || bytes.HasPrefix(k, QueuePrefix("acme", "gp")) {
		t.Fatal("a queue's keys must share its prefix and no other queue's")
	}
	if bytes.Compare(k, QueueBound("acme", "gpu", at)) >= 0 || bytes.Compare(QueueKey("acme", "gpu", at.Add(1), "t0"), QueueBound("acme", "gpu", at)) < 0 {
		t.Fatal("QueueBound does not bound the keys at or before its time")
	}
}
