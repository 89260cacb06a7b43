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
