package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

func runLoad(args []string) error {
	fs := flag.NewFlagSet("millionbench load", flag.ContinueOnError)
	bin := fs.String("controlplane", "", "the control plane binary (go build ./cmd/controlplane)")
	dataDir := fs.String("data-dir", "", "the data directory holding the store (tools/millionstore)")
	watches := fs.Int("watches", 10000, "WatchTask streams to hold open, on distinct working tasks of tenant default")
	polls := fs.Int("polls", 1000, "LeaseTasks long polls to hold, each on an idle queue of its own")
	conns := fs.Int("conns", 16, "client connections the watches and the polls share")
	lists := fs.Int("lists", 200, "ListTasks calls per filter")
	writes := fs.Int("writes", 2000, "ReportEvents calls before each SIGKILL (the log's tail to recover), on 32 tasks of their own")
	crashes := fs.Int("crashes", 3, "SIGKILL and restart this many times")
	profile := fs.String("profile", "", "a directory: serve HTTP with pprof, print the Go runtime's memory figures under load and save the heap profile there")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bin == "" || *dataDir == "" {
		return errors.New("--controlplane and --data-dir are required")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	port, err := freePort()
	if err != nil {
		return err
	}
	var extra []string
	httpAddr := ""
	if *profile != "" {
		hp, err := freePort()
		if err != nil {
			return err
		}
		httpAddr = fmt.Sprintf("127.0.0.1:%d", hp)
		cfg := filepath.Join(*profile, "controlplane.yaml")
		if err := os.WriteFile(cfg, []byte("debug:\n  pprof: true\n"), 0o644); err != nil {
			return err
		}
		extra = []string{"--config", cfg, "--http-addr", httpAddr}
	}
	srv, open, err := startServer(ctx, *bin, *dataDir, port, extra...)
	if err != nil {
		return err
	}
	defer func() { srv.kill() }()
	pid := srv.cmd.Process.Pid
	idle, _ := readMemory(pid)
	fmt.Printf("open (clean): %s ms; idle: %s\n", ms(open), idle)

	cs, err := dialN(srv.addr, *conns)
	if err != nil {
		return err
	}
	defer closeAll(cs)
	tasksc := agentplanev1.NewTaskServiceClient(cs[0])

	// The tasks to watch: working ones, which stay open.
	t0 := time.Now()
	var ids []string
	var seqs []int64
	token := ""
	for len(ids) < *watches {
		resp, err := tasksc.ListTasks(ctx, &agentplanev1.ListTasksRequest{PageSize: 500, PageToken: token,
			States: []agentplanev1.TaskState{agentplanev1.TaskState_TASK_STATE_WORKING}})
		if err != nil {
			return fmt.Errorf("listing working tasks: %w", err)
		}
		for _, t := range resp.GetTasks() {
			ids, seqs = append(ids, t.GetTaskId()), append(seqs, t.GetLastSequence())
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(ids) == 0 {
		return errors.New("the store has no working task in tenant default to watch")
	}
	fmt.Printf("found %d working tasks in %s ms\n", len(ids), ms(time.Since(t0)))

	// The watches: each replays nothing (after its task's last event) and waits.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	var wg sync.WaitGroup
	var live, failed atomic.Int64
	t0 = time.Now()
	for i := range *watches {
		j := i % len(ids)
		stream, err := cs[i%len(cs)].NewStream(wctx, &grpc.StreamDesc{ServerStreams: true}, agentplanev1.TaskService_WatchTask_FullMethodName,
			grpc.ForceCodecV2(rawCodec{}))
		if err == nil {
			err = stream.SendMsg(&agentplanev1.WatchTaskRequest{TaskId: ids[j], AfterSequence: seqs[j]})
		}
		if err == nil {
			err = stream.CloseSend()
		}
		if err != nil {
			return fmt.Errorf("watch %d: %w", i, err)
		}
		wg.Go(func() {
			first := true
			for {
				var b []byte
				if err := stream.RecvMsg(&b); err != nil {
					if wctx.Err() == nil && !errors.Is(err, io.EOF) {
						failed.Add(1)
					}
					return
				}
				if first {
					first = false
					live.Add(1)
				}
			}
		})
	}
	for live.Load()+failed.Load() < int64(*watches) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d watches failed", n)
	}
	fmt.Printf("%d watches live in %s ms\n", *watches, ms(time.Since(t0)))

	// The long polls: each re-polls its own idle queue as soon as the last one ends.
	var polling atomic.Int64
	for i := range *polls {
		rt := agentplanev1.NewRuntimeServiceClient(cs[i%len(cs)])
		q := fmt.Sprintf("idle-%d", i)
		wg.Go(func() {
			for wctx.Err() == nil {
				polling.Add(1)
				resp, err := rt.LeaseTasks(wctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "bench-" + q, Queues: []string{q},
					Wait: durationpb.New(30 * time.Second)})
				polling.Add(-1)
				if err != nil && wctx.Err() == nil {
					failed.Add(1)
					time.Sleep(time.Second)
				}
				if len(resp.GetLeases()) > 0 {
					failed.Add(1) // an idle queue leased something: not what was measured
				}
			}
		})
	}
	for polling.Load() < int64(*polls) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(5 * time.Second) // let the server settle (and its GC run) under the load
	var peak memory
	for range 5 {
		m, err := readMemory(pid)
		if err != nil {
			return err
		}
		peak.anon, peak.file, peak.shmem = max(peak.anon, m.anon), max(peak.file, m.file), max(peak.shmem, m.shmem)
		time.Sleep(time.Second)
	}
	fmt.Printf("with %d watches and %d long polls (max of 5 samples, 1 s apart): %s\n", *watches, *polls, peak)
	if httpAddr != "" {
		if err := goMemory(httpAddr, *profile); err != nil {
			return err
		}
	}

	// ListTasks' first page under that load.
	for _, f := range []struct {
		name string
		req  *agentplanev1.ListTasksRequest
	}{
		{"state=FAILED", &agentplanev1.ListTasksRequest{States: []agentplanev1.TaskState{agentplanev1.TaskState_TASK_STATE_FAILED}}},
		{"state=WORKING", &agentplanev1.ListTasksRequest{States: []agentplanev1.TaskState{agentplanev1.TaskState_TASK_STATE_WORKING}}},
		{"label env=prod", &agentplanev1.ListTasksRequest{LabelSelector: []string{"env=prod"}}},
		{"label team=team-07", &agentplanev1.ListTasksRequest{LabelSelector: []string{"team=team-07"}}},
		{"label customer=c-0042", &agentplanev1.ListTasksRequest{LabelSelector: []string{"customer=c-0042"}}},
		{"no filter", &agentplanev1.ListTasksRequest{}},
	} {
		d := make([]time.Duration, 0, *lists)
		got := 0
		cpu0, _ := cpuTime(pid)
		for range *lists {
			start := time.Now()
			resp, err := tasksc.ListTasks(ctx, f.req)
			if err != nil {
				return fmt.Errorf("ListTasks %s: %w", f.name, err)
			}
			d = append(d, time.Since(start))
			got = len(resp.GetTasks())
		}
		cpu1, _ := cpuTime(pid)
		p50, p99 := percentiles(d)
		fmt.Printf("ListTasks first page, %s: p50=%s ms p99=%s ms server-cpu=%s ms/call (%d calls, %d tasks on the page)\n",
			f.name, ms(p50), ms(p99), ms((cpu1-cpu0)/time.Duration(*lists)), *lists, got)
	}
	wcancel()
	wg.Wait()
	closeAll(cs)

	// Open plus crash recovery.
	for r := range *crashes {
		if err := reportEvents(ctx, srv.addr, *writes); err != nil {
			return err
		}
		srv.kill()
		var took time.Duration
		if srv, took, err = startServer(ctx, *bin, *dataDir, port, extra...); err != nil {
			return err
		}
		m, _ := readMemory(srv.cmd.Process.Pid)
		fmt.Printf("crash %d (SIGKILL after %d ReportEvents): serving again in %s ms; %s\n", r+1, *writes, ms(took), m)
	}
	return srv.stop()
}

// reportEvents writes n events over 32 callers, each reporting on a task of its own
// (started and leased on a queue of their own), so that the listing gains 32 tasks, not n.
func reportEvents(ctx context.Context, addr string, n int) error {
	c, err := client.Dial(ctx, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	const callers = 32
	queue := fmt.Sprintf("bench-crash-%d", time.Now().UnixNano())
	doc := []byte(`{"apiVersion":"qar/v1","kind":"AgentSpec","instructions":"Be brief.","model":"m"}`)
	var refs []*agentplanev1.LeaseRef
	for range callers {
		if _, err := c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{Queue: queue,
			Source: &agentplanev1.StartTaskRequest_Document{Document: doc}, Input: client.UserText("hi")}); err != nil {
			return err
		}
		resp, err := c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "bench-crash", Queues: []string{queue}})
		if err != nil || len(resp.GetLeases()) != 1 {
			return fmt.Errorf("leasing: %v, %v", resp, err)
		}
		l := resp.GetLeases()[0]
		refs = append(refs, &agentplanev1.LeaseRef{TaskId: l.GetTask().GetTaskId(), LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()})
	}
	var next atomic.Int64
	errs := make(chan error, callers)
	for _, ref := range refs {
		go func() {
			for next.Add(1) <= int64(n) {
				m := client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "crash bench event")
				if _, err := c.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref, Events: []*agentplanev1.RuntimeEvent{{
					Payload: &agentplanev1.RuntimeEvent_Message{Message: m}}}}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range callers {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	return err
}

// cpuTime is a process's CPU time, user and system (/proc/PID/stat, in clock ticks
// of 10 ms).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command's closing parenthesis; utime and stime are the
	// 14th and 15th of the line.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond, nil
}

// goMemory prints the server's Go runtime memory figures (from /metrics) and saves
// its heap profile in dir.
func goMemory(httpAddr, dir string) error {
	get := func(path string) ([]byte, error) {
		resp, err := http.Get("http://" + httpAddr + path)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return io.ReadAll(resp.Body)
	}
	m, err := get("/metrics")
	if err != nil {
		return err
	}
	var out []string
	for line := range strings.SplitSeq(string(m), "\n") {
		for _, name := range []string{"go_goroutines ", "go_memstats_heap_inuse_bytes ", "go_memstats_stack_inuse_bytes ", "go_memstats_sys_bytes "} {
			if v, ok := strings.CutPrefix(line, name); ok {
				n, _ := strconv.ParseFloat(v, 64)
				if name == "go_goroutines " {
					out = append(out, fmt.Sprintf("goroutines=%.0f", n))
				} else {
					out = append(out, fmt.Sprintf("%s=%.1f MiB", strings.TrimSpace(strings.TrimPrefix(name, "go_memstats_")), n/(1<<20)))
				}
			}
		}
	}
	fmt.Println("go runtime:", strings.Join(out, " "))
	heap, err := get("/debug/pprof/heap")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "heap.pb.gz"), heap, 0o644)
}
