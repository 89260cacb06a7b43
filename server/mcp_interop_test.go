package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
)

// mcpClientDir holds the pinned @modelcontextprotocol/sdk and the script that drives it.
const mcpClientDir = "testdata/mcp-client"

// nodeMCPClient returns node and the client script, or skips (fails under CI=true, where
// scripts/test has installed them) when they are missing.
func nodeMCPClient(t *testing.T) (string, string) {
	t.Helper()
	missing := func(why string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (CI=true: run the tests with scripts/test, or 'npm ci' in server/%s)", why, mcpClientDir)
		}
		t.Skipf("%s: run the tests with scripts/test, or 'npm ci' in server/%s, to run this test", why, mcpClientDir)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed")
	}
	if _, err := os.Stat(filepath.Join(mcpClientDir, "node_modules/@modelcontextprotocol/sdk/package.json")); err != nil {
		missing("@modelcontextprotocol/sdk is not installed")
	}
	script, err := filepath.Abs(filepath.Join(mcpClientDir, "client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	return node, script
}

// TestMCPInteropTypeScriptSDK: the official TypeScript SDK's client, in Node, against
// a real multi-tenant control plane with a bearer token: it lists the tools, calls one
// and receives its progress and output, and cancels a second call, whose task ends
// CANCELED.
func TestMCPInteropTypeScriptSDK(t *testing.T) {
	node, script := nodeMCPClient(t)
	mt := startMultiTenant(t, []string{"acme"}, func(c *config.Config) { withMCPAgents(t, c) })
	ctx := testCtx(t)
	user := mt.by["acme"]["user"]
	rt := testRuntime{t, mt.by["acme"]["runtime"].c}
	var wg sync.WaitGroup
	ctx, stop := context.WithCancel(ctx)
	defer func() { // a failed test stops the runtime goroutine first
		if t.Failed() {
			stop()
		}
		wg.Wait()
		stop()
	}()
	wg.Go(func() {
		for range 2 {
			l, ref := rt.lease(ctx)
			if l == nil {
				return
			}
			switch client.MessageText(l.GetTask().GetInput()) {
			case "hello":
				rt.say(ctx, ref, "thinking about hello")
				rt.complete(ctx, ref, "hello back", nil)
			case "long":
				rt.say(ctx, ref, "step 1 of many")
				// ... and runs on until the client cancels.
			}
		}
	})

	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "MCP_URL=http://"+mt.in.HTTPAddr+"/mcp", "MCP_TOKEN="+user.token)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	steps := map[string]map[string]any{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("node client printed %q: %v", sc.Text(), err)
		}
		steps[line["step"].(string)] = line
	}
	t.Logf("node client: %s", out)
	for _, step := range []string{"connected", "tools", "completed", "canceled", "reattached", "closed"} {
		if steps[step] == nil {
			t.Fatalf("the client never reached %q:\n%s\n%s", step, out, stderr.String())
		}
	}

	var names []string
	for _, tool := range steps["tools"]["tools"].([]any) {
		tm := tool.(map[string]any)
		names = append(names, tm["name"].(string))
		if _, ok := tm["inputSchema"].(map[string]any)["properties"].(map[string]any)["input"]; !ok {
			t.Errorf("tool %v: no input in its schema", tm)
		}
	}
	if !slices.Equal(names, []string{"chat", "echo", "typed"}) {
		t.Errorf("tools %v", names)
	}

	done := steps["completed"]
	result := done["result"].(map[string]any)
	content := result["content"].([]any)
	if result["isError"] == true || len(content) != 1 || content[0].(map[string]any)["text"] != "hello back" {
		t.Errorf("result %v", result)
	}
	taskID, _ := result["_meta"].(map[string]any)["agentplane/task_id"].(string)
	if result["structuredContent"].(map[string]any)["task_id"] != taskID || taskID == "" {
		t.Errorf("result %v: no task id", result)
	}
	if !progressSays(done["progress"], "thinking about hello") {
		t.Errorf("progress %v: want the task's message", done["progress"])
	}
	got, err := user.c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: taskID})
	if err != nil || got.GetTask().GetRequestId() != "interop-1" || got.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED {
		t.Errorf("the completed call's task: %v %v", got.GetTask(), err)
	}

	canceled := steps["canceled"]
	if msg, _ := canceled["error"].(string); !strings.Contains(strings.ToLower(msg), "abort") && !strings.Contains(msg, "stopped") {
		t.Errorf("canceled call: %v", canceled)
	}
	if !progressSays(canceled["progress"], "step 1 of many") {
		t.Errorf("canceled call's progress %v", canceled["progress"])
	}
	// The canceled call's task ended CANCELED: the call attached to it again says so,
	// and so does the API.
	again := steps["reattached"]["result"].(map[string]any)
	meta, _ := again["_meta"].(map[string]any)
	if again["isError"] != true || meta["agentplane/state"] != "canceled" {
		t.Errorf("reattached to the canceled call's task: %v", again)
	}
	long, _ := meta["agentplane/task_id"].(string)
	got, err = user.c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: long})
	if err != nil || got.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_CANCELED || got.GetTask().GetRequestId() != "interop-2" {
		t.Errorf("the canceled call's task: %v %v", got.GetTask(), err)
	}
}

func progressSays(progress any, text string) bool {
	list, _ := progress.([]any)
	for _, p := range list {
		if m, _ := p.(map[string]any); m["message"] == text {
			return true
		}
	}
	return false
}
