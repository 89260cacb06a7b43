package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
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

// Flags that carry the same value each set their own setting: both listeners on
// 127.0.0.1:0 (as tests and the README tour start it) must not leave one of them on
// its default address.
func TestFlagsWithTheSameValueEachApply(t *testing.T) {
	cfg := config.Default()
	applyFlags(&cfg, "", "127.0.0.1:0", "127.0.0.1:0", "")
	if cfg.GRPCAddr != "127.0.0.1:0" || cfg.HTTPAddr != "127.0.0.1:0" {
		t.Fatalf("grpc %q http %q, want both 127.0.0.1:0", cfg.GRPCAddr, cfg.HTTPAddr)
	}
	want := config.Default().DataDir
	if cfg.DataDir != want {
		t.Fatalf("data dir %q changed without its flag (want %q)", cfg.DataDir, want)
	}
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

// TestTokenNewEntryBootsAsPrinted pastes the printed config entry, exactly as printed,
// under auth.tokens, boots a control plane on that file and calls it with the token.
func TestTokenNewEntryBootsAsPrinted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		tenant string
	}{
		{"every tenant", []string{"--name", "fleet", "--tenant", "*", "--role", "runtime", "--role", "admin"}, "*"},
		{"yaml-looking values", []string{"--name", "a: b #c", "--tenant", "yes", "--role", "user"}, "yes"},
		{"plain", []string{"--name", "ci", "--tenant", "acme"}, "acme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(append([]string{"token", "new"}, tc.args...), &out, &errOut); code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			token, entry, ok := strings.Cut(out.String(), "config entry (add under auth.tokens):\n")
			if !ok {
				t.Fatalf("no config entry in:\n%s", out.String())
			}
			token = strings.TrimSpace(strings.TrimPrefix(token, "token (give it to the client; it is not stored anywhere):\n"))
			dir := t.TempDir()
			path := dir + "/controlplane.yaml"
			file := "data_dir: " + dir + "\ngrpc_addr: 127.0.0.1:0\nhttp_addr: \"off\"\nauth:\n  require_principal: true\n  tokens:\n" + entry
			if err := writeFile(path, file); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatalf("the printed entry does not load:\n%s\n%v", file, err)
			}
			in := servertest.StartConfig(t, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := client.Dial(ctx, in.GRPCAddr, client.WithToken(token))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			resp, err := c.Capabilities.GetCapabilities(ctx, &agentplanev1.GetCapabilitiesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if p := resp.GetCapabilities().GetPrincipal(); p.GetTenant() != tc.tenant {
				t.Fatalf("the token acts as %v, want tenant %q", p, tc.tenant)
			}
		})
	}
}

func TestTokenNewRefusesAnEntryTheServerWouldRefuse(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"token", "new", "--tenant", "*"}, &out, &errOut); code != 2 || out.Len() != 0 {
		t.Fatalf("want exit 2 and no token for a user in every tenant, got %d:\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "runtime and admin") {
		t.Fatalf("the refusal should say why: %s", errOut.String())
	}
}
