package config

import (
	"strings"
	"testing"
)

// TestValidateMCP: the MCP face's limits are positive and its idle timeout at least a
// minute; a file sets them under mcp.
func TestValidateMCP(t *testing.T) {
	for _, tt := range []struct {
		yaml, want string
	}{
		{"mcp: {max_sessions: 0}", "mcp.max_sessions must be >= 1"},
		{"mcp: {max_calls_per_session: -1}", "mcp.max_calls_per_session must be >= 1"},
		{"mcp: {max_sessions_per_principal: 0}", "mcp.max_sessions_per_principal must be >= 1"},
		{"mcp: {session_idle_timeout: 5s}", "mcp.session_idle_timeout must be at least 1m"},
		{"mcp: {disabled: true, max_sessions: 3, max_calls_per_session: 2, session_idle_timeout: 2m}", ""},
	} {
		cfg := Default()
		if err := Parse([]byte(tt.yaml), &cfg); err != nil {
			t.Fatalf("%s: %v", tt.yaml, err)
		}
		err := cfg.Validate()
		if tt.want == "" {
			if err != nil || !cfg.MCP.Disabled || cfg.MCP.MaxSessions != 3 || cfg.MCP.SessionIdleTimeout.D().Minutes() != 2 {
				t.Errorf("%s: %v %+v", tt.yaml, err, cfg.MCP)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.yaml, err, tt.want)
		}
	}
	cfg := Default()
	if err := Parse([]byte("mcp: {max_session: 3}"), &cfg); err == nil {
		t.Error("an unknown mcp key was accepted")
	}
}
