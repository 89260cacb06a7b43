package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/server/auth"
)

func TestTokenNewPrintsTokenAndMatchingHash(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"token", "new", "--name", "ci", "--tenant", "acme", "--role", "runtime"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(out.String(), "\n")
	var token, hash string
	for i, l := range lines {
		if strings.HasPrefix(l, "token") && i+1 < len(lines) {
			token = strings.TrimSpace(lines[i+1])
		}
		if strings.Contains(l, "sha256:") {
			hash = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "sha256:"))
		}
	}
	if token == "" || hash != auth.HashToken(token) {
		t.Fatalf("token %q hash %q do not match:\n%s", token, hash, out.String())
	}
	if !strings.Contains(out.String(), "tenant: acme") || !strings.Contains(out.String(), "roles: [runtime]") {
		t.Fatalf("config entry incomplete:\n%s", out.String())
	}
}

func TestTokenNewRejectsUnknownRole(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"token", "new", "--role", "root"}, &out, &errOut); code != 2 {
		t.Fatalf("want exit 2, got %d", code)
	}
}

func TestUnknownConfigKeyStopsBoot(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/c.yaml"
	if err := writeFile(path, "grpc_adr: 127.0.0.1:1\n"); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"--config", path, "--data-dir", dir}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "grpc_adr") {
		t.Fatalf("want exit 1 naming grpc_adr, got %d: %s", code, errOut.String())
	}
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }
