package main

import (
	"context"
	"os"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/agentplane/agentplane/server/servertest"
)

// The probe, against a real control plane: every write reaches every watcher, and
// each delivery is timed.
func TestProbeAgentplane(t *testing.T) {
	in := servertest.Start(t, nil)
	lat, err := probeAgentplane(context.Background(), in.GRPCAddr, 5, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	if len(lat) != 8 {
		t.Fatalf("%d deliveries timed, want 8", len(lat))
	}
	for _, d := range lat {
		if d <= 0 {
			t.Fatalf("a delivery took %s", d)
		}
	}
}

// The hand-encoded etcd messages carry their fields where etcdserverpb has them, and
// hasField finds a field past others.
func TestEtcdWire(t *testing.T) {
	put := etcdPutRequest([]byte("k"), []byte("v"))
	if want := []byte{1<<3 | 2, 1, 'k', 2<<3 | 2, 1, 'v'}; string(put) != string(want) {
		t.Errorf("PutRequest %x, want %x", put, want)
	}
	create := etcdWatchCreate([]byte("k"))
	if want := []byte{1<<3 | 2, 3, 1<<3 | 2, 1, 'k'}; string(create) != string(want) {
		t.Errorf("WatchRequest %x, want %x", create, want)
	}
	resp := protowire.AppendTag(nil, 1, protowire.BytesType) // header
	resp = protowire.AppendBytes(resp, []byte{1 << 3, 7})
	resp = protowire.AppendTag(resp, 2, protowire.VarintType) // watch_id
	resp = protowire.AppendVarint(resp, 3)
	if hasField(resp, etcdFieldEvents) {
		t.Error("events found in a response without them")
	}
	resp = protowire.AppendTag(resp, etcdFieldEvents, protowire.BytesType)
	resp = protowire.AppendBytes(resp, []byte{})
	if !hasField(resp, etcdFieldEvents) {
		t.Error("events not found")
	}
}

func TestReadMemoryAndPercentiles(t *testing.T) {
	m, err := readMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.anon <= 0 {
		t.Errorf("RssAnon of this process read as %d", m.anon)
	}
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i))
	}
	if p50, p99 := percentiles(d); p50 != 50 || p99 != 99 {
		t.Errorf("p50=%d p99=%d of 1..100", p50, p99)
	}
}
