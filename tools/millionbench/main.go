// Command millionbench measures a control plane on a large store (one that
// tools/millionstore writes) and compares its watch delivery with etcd's: the "a
// million tasks" figures of docs/performance.md.
//
//	millionbench load --controlplane BIN --data-dir DIR [--watches 10000] [--polls 1000]
//	millionbench fanout --controlplane BIN --data-dir DIR --etcd ETCD_BIN [--watchers 1000] [--writes 1000] [--rounds 3]
//
// load starts the control plane (BIN, a build of ./cmd/controlplane) on DIR and times
// its open, opens --watches WatchTask streams on the default tenant's working tasks
// and --polls LeaseTasks long polls on queues nobody feeds, reads the server's
// resident memory from /proc (RssAnon: the heap and stacks; RssFile: the store's
// memory map, which the kernel may drop and read again), times the first page of
// ListTasks with a state filter and with label filters, then reports --writes events on 32 tasks (so the
// write-ahead log has a tail to replay), SIGKILLs the server and times its start
// again: open plus crash recovery, until it answers the health check SERVING.
//
// fanout is one writer and --watchers watchers of one thing: a task's WatchTask
// streams (the writer appending one event per ReportEvents) against etcd's Watch of
// one key (the writer Putting it), with the same probe: each write waits until every
// watcher has the one before, and its delivery latency is from the write's start to
// the last watcher's receipt. The rounds alternate the two servers.
package main

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "load":
		err = runLoad(os.Args[2:])
	case "fanout":
		err = runFanout(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "millionbench:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: millionbench load|fanout [flags] (see -h of each)")
	os.Exit(2)
}

// freePort is a loopback port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// server is a control plane process of its own.
type server struct {
	cmd  *exec.Cmd
	addr string
}

// startServer runs bin on dataDir and waits until it answers SERVING; the duration
// is from the start of the process.
func startServer(ctx context.Context, bin, dataDir string, port int, extra ...string) (*server, time.Duration, error) {
	addr := "127.0.0.1:" + strconv.Itoa(port)
	logf, err := os.OpenFile(filepath.Join(filepath.Dir(filepath.Clean(dataDir)), filepath.Base(dataDir)+".server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, 0, err
	}
	defer logf.Close()
	args := append([]string{"--data-dir", dataDir, "--grpc-addr", addr, "--http-addr", "off", "--log-level", "warn"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	s := &server{cmd: cmd, addr: addr}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		s.kill()
		return nil, 0, err
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := health.Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return s, time.Since(start), nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.kill()
			return nil, 0, fmt.Errorf("control plane not serving after %s: %v", time.Since(start), err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// kill SIGKILLs the server and reaps it.
func (s *server) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
}

// stop ends the server cleanly.
func (s *server) stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	return s.cmd.Wait()
}

// memory is a process's resident memory by kind, in bytes (/proc/PID/status).
type memory struct{ anon, file, shmem int64 }

func readMemory(pid int) (memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	var m memory
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch k {
		case "RssAnon":
			dst = &m.anon
		case "RssFile":
			dst = &m.file
		case "RssShmem":
			dst = &m.shmem
		default:
			continue
		}
		f := strings.Fields(v)
		if len(f) == 2 && f[1] == "kB" {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			*dst = n << 10
		}
	}
	return m, nil
}

func (m memory) String() string {
	return fmt.Sprintf("RssAnon=%.1f MiB RssFile=%.1f MiB RssShmem=%.1f MiB", mib(m.anon), mib(m.file), mib(m.shmem))
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// percentiles sorts d and returns its p50 and p99 (nearest rank).
func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(d)
	rank := func(q float64) time.Duration {
		i := int(math.Ceil(q*float64(len(d)))) - 1
		return d[max(i, 0)]
	}
	return rank(0.50), rank(0.99)
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

// dialN opens n connections to addr.
func dialN(addr string, n int) ([]*grpc.ClientConn, error) {
	var cs []*grpc.ClientConn
	for range n {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			for _, c := range cs {
				c.Close()
			}
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

func closeAll(cs []*grpc.ClientConn) {
	for _, c := range cs {
		c.Close()
	}
}
