package config

import (
	"strings"
	"testing"
	"time"
)

func TestDefaultsValidate(t *testing.T) {
	cfg := Default()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults must validate: %v", err)
	}
}

func TestParseRejectsUnknownKeys(t *testing.T) {
	cfg := Default()
	err := Parse([]byte("grpc_addr: 127.0.0.1:1\ntasks:\n  lease_tll: 5s\n"), &cfg)
	if err == nil || !strings.Contains(err.Error(), "lease_tll") {
		t.Fatalf("want an error naming the unknown key, got %v", err)
	}
}

func TestParseOverridesDefaults(t *testing.T) {
	cfg := Default()
	if err := Parse([]byte("grpc_addr: 127.0.0.1:9999\ntasks:\n  lease_ttl: 5s\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.GRPCAddr != "127.0.0.1:9999" || cfg.Tasks.LeaseTTL.D() != 5*time.Second {
		t.Fatalf("not applied: %+v", cfg)
	}
	if cfg.HTTPAddr != Default().HTTPAddr {
		t.Fatalf("unset keys must keep defaults")
	}
}

func TestApplyEnv(t *testing.T) {
	cfg := Default()
	env := map[string]string{EnvGRPCAddr: "127.0.0.1:1", EnvDataDir: "/x"}
	cfg.ApplyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if cfg.GRPCAddr != "127.0.0.1:1" || cfg.DataDir != "/x" {
		t.Fatalf("env not applied: %+v", cfg)
	}
}

func TestValidateMultiTenantNeedsTLSOffLoopback(t *testing.T) {
	cfg := Default()
	cfg.Auth.RequirePrincipal = true
	cfg.GRPCAddr = "0.0.0.0:7233"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "allow_insecure") {
		t.Fatalf("want refusal, got %v", err)
	}
	cfg.Auth.AllowInsecure = true
	if err := cfg.Validate(); err != nil {
		t.Fatalf("explicit allow_insecure must pass: %v", err)
	}
}

func TestValidateGates(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string // "" = valid
	}{
		{"defaults", "", ""},
		{"postures and keys", "gates:\n  locked_keys: [mcp, a2a]\n  compliance_posture: restricted\ntenants:\n  acme:\n    compliance_posture: airgapped\n", ""},
		{"unknown posture", "gates:\n  compliance_posture: relaxed\n", `gates.compliance_posture: unknown compliance posture "relaxed"`},
		{"unknown key", "gates:\n  locked_keys: [toolPolicy]\n", `gates.locked_keys[0]: unknown locked key "toolPolicy"`},
		{"tenant loosens", "gates:\n  compliance_posture: airgapped\ntenants:\n  acme:\n    compliance_posture: standard\n", "tenants.acme.compliance_posture"},
		{"baseline metadata url", "gates:\n  a2a_peers:\n    - name: meta\n      url: http://169.254.169.254/\n", "url.forbidden_host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Default()
			if err := Parse([]byte(tt.yaml), &cfg); err != nil {
				t.Fatal(err)
			}
			err := cfg.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("want an error containing %q, got %v", tt.want, err)
			}
		})
	}
}

func TestValidateSingleUserStaysOnLoopback(t *testing.T) {
	cfg := Default()
	cfg.HTTPAddr = "0.0.0.0:7280"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "single-user mode on non-loopback") {
		t.Fatalf("want refusal, got %v", err)
	}
	cfg.Auth.AllowInsecure = true
	if err := cfg.Validate(); err != nil {
		t.Fatalf("explicit allow_insecure must pass: %v", err)
	}
}

func TestDeadLetterRetention(t *testing.T) {
	cfg := Default()
	if got := cfg.Notifications.DeadLetterRetention.D(); got != 7*24*time.Hour {
		t.Fatalf("default dead_letter_retention %s, want 7 days", got)
	}
	if err := Parse([]byte("notifications:\n  dead_letter_retention: 0s\n"), &cfg); err != nil || cfg.Validate() != nil || cfg.Notifications.DeadLetterRetention != 0 {
		t.Fatalf("0 (keep forever) must be accepted: %v, %v", err, cfg.Validate())
	}
	cfg.Notifications.DeadLetterRetention = Duration(-time.Second)
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "dead_letter_retention") {
		t.Fatalf("a negative retention: %v, want an error naming it", err)
	}
}
