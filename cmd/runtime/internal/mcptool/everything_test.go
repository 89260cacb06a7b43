package mcptool

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
)

// everythingDir holds the pinned @modelcontextprotocol/server-everything (scripts/test runs npm ci there).
const everythingDir = "../../testdata/mcp-everything"

// startEverything runs @modelcontextprotocol/server-everything over streamable HTTP
// and returns its endpoint. Without node or the installed package the test skips,
// except under CI=true, where it fails: the README's test command, scripts/test, installs it.
func startEverything(t *testing.T) string {
	t.Helper()
	missing := func(why string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (CI=true: run the tests with scripts/test, or 'npm ci' in cmd/runtime/testdata/mcp-everything)", why)
		}
		t.Skipf("%s: run the tests with scripts/test, or 'npm ci' in cmd/runtime/testdata/mcp-everything, to run this test", why)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed")
	}
	entry := filepath.Join(everythingDir, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if _, err := os.Stat(entry); err != nil {
		missing("@modelcontextprotocol/server-everything is not installed")
	}
	// The server listens on $PORT and does not say which port 0 became: take a free one.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(node, entry, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var log []string
		for sc.Scan() {
			log = append(log, sc.Text())
			if strings.Contains(sc.Text(), "listening on port") {
				ready <- ""
			}
		}
		ready <- "server-everything exited: " + strings.Join(log, "\n")
	}()
	if msg := testutil.Within(t, ready, "server-everything to listen"); msg != "" {
		t.Fatal(msg)
	}
	return "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp"
}

// TestEverythingServer: the MCP reference server from npm, which nobody here wrote,
// over streamable HTTP: its tools mount with their annotations, and calls with valid,
// invalid and oversize results come back as the model reads them.
func TestEverythingServer(t *testing.T) {
	url := startEverything(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tools, release, err := (&Provider{MaxResultBytes: 512}).MountServers(ctx,
		[]*agentplanev1.McpServer{{Name: "everything", Url: url}}, quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	m := byGate(tools)
	echo, sum := m["everything.echo"], m["everything.get-sum"]
	if echo == nil || sum == nil {
		t.Fatalf("echo or get-sum not mounted: %v", m)
	}
	if echo.ModelName != "everything__echo" || sum.ModelName != "everything__get-sum" {
		t.Errorf("model names %q, %q", echo.ModelName, sum.ModelName)
	}
	if !echo.Annotations.GetReadOnlyHint() || echo.Annotations.DestructiveHint == nil || echo.Annotations.GetDestructiveHint() {
		t.Errorf("echo's annotations %v, want readOnlyHint true and destructiveHint false as declared", echo.Annotations)
	}
	if got, isErr := echo.Run(ctx, `{"message":"hello from agentplane"}`); isErr || got != "Echo: hello from agentplane" {
		t.Errorf("echo = %q, %v", got, isErr)
	}
	if got, isErr := sum.Run(ctx, `{"a":2,"b":40}`); isErr || !strings.Contains(got, "is 42") {
		t.Errorf("get-sum = %q, %v", got, isErr)
	}
	if got, isErr := sum.Run(ctx, `{"a":"two"}`); !isErr {
		t.Errorf("get-sum with bad arguments = %q, not an error", got)
	}
	if got, isErr := echo.Run(ctx, `{"message":"`+strings.Repeat("y", 2000)+`"}`); isErr || !strings.HasSuffix(got, "[result truncated at 512 bytes]") {
		t.Errorf("a long echo is not cut: %d bytes, error %v", len(got), isErr)
	}
}
