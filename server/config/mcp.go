package config

import "time"

// MCP configures the MCP server face served at /mcp on the HTTP listener
// (docs/mcp.md): every static agent is a tool, a call is a task.
type MCP struct {
	// Disabled turns /mcp off. It is on by default: it serves what the HTTP/JSON API
	// already serves (starting, watching, continuing and canceling tasks of the
	// static agents), to the same principals, through the same method table, and
	// nothing when spec.static_agents is empty.
	Disabled bool `yaml:"disabled"`
	// MaxSessions bounds the MCP sessions open at once, across principals. A new
	// session over it is refused with 503 until one ends.
	MaxSessions int `yaml:"max_sessions"`
	// MaxSessionsPerPrincipal bounds the sessions one principal may have open, in
	// multi-tenant mode, so that one tenant cannot take every session.
	MaxSessionsPerPrincipal int `yaml:"max_sessions_per_principal"`
	// MaxCallsPerSession bounds the tool calls one session may have running at once.
	MaxCallsPerSession int `yaml:"max_calls_per_session"`
	// SessionIdleTimeout closes a session that has had no request for this long. A
	// call in progress keeps its session open. At least 1m.
	SessionIdleTimeout Duration `yaml:"session_idle_timeout"`
}

// DefaultMCP is the MCP face's default configuration.
func DefaultMCP() MCP {
	return MCP{MaxSessions: 1024, MaxSessionsPerPrincipal: 64, MaxCallsPerSession: 16, SessionIdleTimeout: Duration(30 * time.Minute)}
}

func (c *Config) validateMCP(bad func(string, ...any)) {
	m := c.MCP
	if m.MaxSessions < 1 {
		bad("mcp.max_sessions must be >= 1 (got %d)", m.MaxSessions)
	}
	if m.MaxSessionsPerPrincipal < 1 {
		bad("mcp.max_sessions_per_principal must be >= 1 (got %d)", m.MaxSessionsPerPrincipal)
	}
	if m.MaxCallsPerSession < 1 {
		bad("mcp.max_calls_per_session must be >= 1 (got %d)", m.MaxCallsPerSession)
	}
	if m.SessionIdleTimeout < Duration(time.Minute) {
		bad("mcp.session_idle_timeout must be at least 1m")
	}
}
