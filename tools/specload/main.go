// Command specload measures what worst-case spec documents cost a real control plane:
// it builds cmd/controlplane (or takes -bin), starts it on loopback with a fresh data
// directory, sends N concurrent copies of a document of the size limit whose metadata
// is a flow list of one-letter scalars (the YAML amplification case), over gRPC or
// HTTP, and reports the server's peak RSS (VmHWM), its RSS a few seconds later, and
// the answers. Each scenario runs against a fresh server; a server whose RSS passes
// -rss-cap is killed, so a run never takes the machine down. It stops by itself.
//
//	go run ./tools/specload                       # 4 and 16 concurrent, gRPC and HTTP
//	go run ./tools/specload -n 4 -transport grpc -bin ./controlplane
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

func main() {
	bin := flag.String("bin", "", "controlplane binary (default: go build ./cmd/controlplane into a temporary directory)")
	ns := flag.String("n", "4,16", "concurrent documents per scenario, comma-separated")
	transports := flag.String("transport", "grpc,http", "grpc, http or both, comma-separated")
	size := flag.Int("bytes", 1<<20, "document size (the server's default limit is 1 MiB)")
	items := flag.Int("items", 0, "instead of filling -bytes, a flow list of this many scalars (65000 is just inside the default value budget's pre-scan)")
	rounds := flag.Int("rounds", 2, "bursts per scenario")
	capMiB := flag.Int("rss-cap", 3072, "kill the server when its RSS passes this many MiB")
	timeout := flag.Duration("timeout", 90*time.Second, "bound on one scenario")
	configFile := flag.String("config", "", "a config file for the server (for example to set limits.spec_decode_bytes)")
	flag.Parse()

	tmp, err := os.MkdirTemp("", "specload-")
	check(err)
	defer os.RemoveAll(tmp)
	if *bin == "" {
		*bin = filepath.Join(tmp, "controlplane")
		build := exec.Command("go", "build", "-o", *bin, "./cmd/controlplane")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		check(build.Run())
	}
	doc := worstCase(*size, *items)
	fmt.Printf("document: %d bytes, %d scalars in one flow list\n", len(doc), bytes.Count(doc, []byte(","))+1)
	fmt.Printf("%-9s %4s %12s %14s %s\n", "transport", "n", "VmHWM MiB", "VmRSS+5s MiB", "answers")
	for _, tr := range strings.Split(*transports, ",") {
		for _, s := range strings.Split(*ns, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			check(err)
			r := scenario(*bin, *configFile, filepath.Join(tmp, fmt.Sprintf("%s-%d", tr, n)), strings.TrimSpace(tr), n, *rounds, doc, int64(*capMiB)<<20, *timeout)
			fmt.Printf("%-9s %4d %12d %14d %s\n", tr, n, r.hwm>>20, r.after>>20, r.answers)
		}
	}
}

// worstCase is a qar/v1 document of size bytes (or with items scalars) whose
// metadata is a flow list of one-letter scalars.
func worstCase(size, items int) []byte {
	var b bytes.Buffer
	b.WriteString("apiVersion: qar/v1\nkind: AgentSpec\ninstructions: x\nmodel: m\nmetadata: [")
	for i := 1; (items == 0 && b.Len() < size-3) || i < items; i++ {
		b.WriteString("a,")
	}
	b.WriteString("a]\n")
	return b.Bytes()
}

type result struct {
	hwm, after int64
	answers    string
}

func scenario(bin, configFile, dir, transport string, n, rounds int, doc []byte, rssCap int64, timeout time.Duration) result {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	grpcAddr, httpAddr := freeAddr(), freeAddr()
	args := []string{"--data-dir", dir, "--grpc-addr", grpcAddr, "--http-addr", httpAddr, "--log-level", "warn"}
	if configFile != "" {
		args = append(args, "--config", configFile)
	}
	cmd := exec.Command(bin, args...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	check(cmd.Start())
	pid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	// Watch the RSS; past the cap the server is killed (the scenario then reports it).
	killed := make(chan struct{})
	go func() {
		for {
			select {
			case <-exited:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if procStatus(pid, "VmRSS") > rssCap {
				_ = cmd.Process.Kill()
				close(killed)
				return
			}
		}
	}()
	waitListening(ctx, grpcAddr, httpAddr)

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	check(err)
	defer conn.Close()
	client := agentplanev1.NewSpecServiceClient(conn)
	hc := &http.Client{Timeout: timeout}

	var mu sync.Mutex
	answers := map[string]int{}
	for range rounds {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var a string
				if transport == "grpc" {
					resp, err := client.ValidateSpec(ctx, &agentplanev1.ValidateSpecRequest{Source: &agentplanev1.ValidateSpecRequest_Document{Document: doc}})
					switch {
					case err != nil:
						a = "grpc " + status.Code(err).String()
					default:
						a = fmt.Sprintf("grpc OK valid=%v", resp.GetValid())
					}
				} else {
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+httpAddr+"/v1/specs/validate", bytes.NewReader(doc))
					req.Header.Set("Content-Type", "application/yaml")
					resp, err := hc.Do(req)
					if err != nil {
						a = "http error"
					} else {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						a = "http " + strconv.Itoa(resp.StatusCode)
					}
				}
				mu.Lock()
				answers[a]++
				mu.Unlock()
			}()
		}
		close(start)
		wg.Wait()
	}
	r := result{hwm: procStatus(pid, "VmHWM")}
	select {
	case <-time.After(5 * time.Second):
		r.after = procStatus(pid, "VmRSS")
	case <-killed:
	}
	select {
	case <-killed:
		answers[fmt.Sprintf("SERVER KILLED at the %d MiB cap", rssCap>>20)]++
	default:
		select {
		case <-exited:
			answers["SERVER EXITED: "+lastLine(logs.String())]++
		default:
		}
	}
	var parts []string
	for a, c := range answers {
		parts = append(parts, fmt.Sprintf("%s x%d", a, c))
	}
	sort.Strings(parts)
	r.answers = strings.Join(parts, ", ")
	return r
}

// procStatus reads a "kB" field of /proc/PID/status, in bytes; 0 once the process is gone.
func procStatus(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer l.Close()
	return l.Addr().String()
}

func waitListening(ctx context.Context, addrs ...string) {
	for _, a := range addrs {
		for {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-ctx.Done():
				check(fmt.Errorf("server did not listen on %s: %w", a, ctx.Err()))
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "specload:", err)
		os.Exit(1)
	}
}
