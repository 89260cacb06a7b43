package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
)

// etcd's gRPC API, spoken with hand-encoded messages (etcdserverpb's field numbers)
// so that the probe needs no etcd client module.
const (
	etcdPut   = "/etcdserverpb.KV/Put"
	etcdWatch = "/etcdserverpb.Watch/Watch"
	// PutRequest: key = 1, value = 2. WatchRequest: create_request = 1;
	// WatchCreateRequest: key = 1. WatchResponse: created = 3, events = 11.
	etcdFieldKey, etcdFieldValue, etcdFieldCreateRequest = 1, 2, 1
	etcdFieldCreated, etcdFieldEvents                    = 3, 11
)

func etcdPutRequest(key, value []byte) []byte {
	b := protowire.AppendTag(nil, etcdFieldKey, protowire.BytesType)
	b = protowire.AppendBytes(b, key)
	b = protowire.AppendTag(b, etcdFieldValue, protowire.BytesType)
	return protowire.AppendBytes(b, value)
}

func etcdWatchCreate(key []byte) []byte {
	create := protowire.AppendTag(nil, etcdFieldKey, protowire.BytesType)
	create = protowire.AppendBytes(create, key)
	b := protowire.AppendTag(nil, etcdFieldCreateRequest, protowire.BytesType)
	return protowire.AppendBytes(b, create)
}

// hasField says whether an encoded message carries field num (at its top level).
func hasField(b []byte, num protowire.Number) bool {
	for len(b) > 0 {
		n, t, l := protowire.ConsumeTag(b)
		if l < 0 {
			return false
		}
		if n == num {
			return true
		}
		b = b[l:]
		if l = protowire.ConsumeFieldValue(n, t, b); l < 0 {
			return false
		}
		b = b[l:]
	}
	return false
}

// fanoutEtcd runs the probe against a fresh etcd: one key, watched by every watcher
// on a Watch stream of its own; each write is one Put of a value the size of the
// control plane's event.
func fanoutEtcd(ctx context.Context, bin, dataDir string, watchers, conns, writes int) ([]time.Duration, error) {
	if dataDir == "" {
		d, err := os.MkdirTemp("", "millionbench-etcd-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dataDir = filepath.Join(d, "data")
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	peer, err := freePort()
	if err != nil {
		return nil, err
	}
	client, peerURL := "http://127.0.0.1:"+strconv.Itoa(port), "http://127.0.0.1:"+strconv.Itoa(peer)
	cmd := exec.Command(bin, "--name", "peer", "--data-dir", dataDir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "peer="+peerURL, "--log-level", "error")
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cs, err := dialN(addr, conns)
	if err != nil {
		return nil, err
	}
	defer closeAll(cs)
	key := []byte("bench/fanout")
	// The event the control plane sends is about this size (a message of one text part).
	value := make([]byte, 96)
	put := func(ctx context.Context, i int) error {
		copy(value, fmt.Sprintf("fanout event %d", i))
		var resp []byte
		return cs[0].Invoke(ctx, etcdPut, etcdPutRequest(key, value), &resp, grpc.ForceCodecV2(rawCodec{}))
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		err := put(cctx, -1)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("etcd not answering: %v\n%s", err, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return probe{watchers: watchers, writes: writes,
		open: func(ctx context.Context, i int) (func(func()) error, error) {
			stream, err := cs[i%len(cs)].NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, etcdWatch,
				grpc.ForceCodecV2(rawCodec{}))
			if err == nil {
				err = stream.SendMsg(etcdWatchCreate(key))
			}
			return follow(stream, err,
				func(b []byte) bool { return hasField(b, etcdFieldCreated) }, // live once created
				func(b []byte) bool { return hasField(b, etcdFieldEvents) })
		},
		write: put,
	}.run(ctx)
}
