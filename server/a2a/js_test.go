package a2a_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentplane/agentplane/server/config"
)

const jsClientDir = "testdata/js-client"

// TestA2AJSClient runs the A2A project's JavaScript SDK (@a2a-js/sdk 1.3.0, which
// nobody here wrote) against the face, in both protocol versions: discover, send (and
// its retry), stream, get, list, a call waiting for approval seen as working, the
// stream killed and resubscribed, a continued chat turn, cancel, and a push
// notification received and its signature checked (testdata/js-client/client.mjs). Without node or the installed package it skips,
// except under CI=true, where it fails: scripts/test installs it.
func TestA2AJSClient(t *testing.T) {
	missing := func(why string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (CI=true: run the tests with scripts/test, or 'npm ci' in server/a2a/%s)", why, jsClientDir)
		}
		t.Skipf("%s: run the tests with scripts/test, or 'npm ci' in server/a2a/%s, to run this test", why, jsClientDir)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed")
	}
	if _, err := os.Stat(filepath.Join(jsClientDir, "node_modules/@a2a-js/sdk/package.json")); err != nil {
		missing("@a2a-js/sdk is not installed")
	}
	f := startFace(t, nil, func(c *config.Config) {
		c.Notifications.AllowPrivateDestinations = true // the receiver is on loopback
		c.Notifications.PollInterval = config.Duration(10 * time.Millisecond)
	})
	f.runtime(t, "helpdesk", "", scriptRunner(t, helloScript))
	f.runtime(t, "calc", "", scriptRunner(t, approvalScript))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = jsClientDir
	cmd.Env = append(os.Environ(), "A2A_BASE="+f.base)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("the JS A2A client failed: %v", err)
	}
}
