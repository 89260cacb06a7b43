package main

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path"

	"github.com/goccy/go-yaml"

	"github.com/agentplane/agentplane/client/worker"
	"github.com/agentplane/agentplane/cmd/runtime/internal/a2atool"
	"github.com/agentplane/agentplane/cmd/runtime/internal/agent"
	"github.com/agentplane/agentplane/cmd/runtime/internal/mcptool"
	"github.com/agentplane/agentplane/server/config"
)

// Config is the runtime's configuration (docs/runtime.md).
type Config struct {
	ControlPlane struct {
		Address string `yaml:"address"`
		Token   string `yaml:"token"`
	} `yaml:"control_plane"`
	RuntimeID   string   `yaml:"runtime_id"`
	Queues      []string `yaml:"queues"`
	Concurrency int      `yaml:"concurrency"`
	// Durable makes gated tool calls give the lease up while they wait.
	Durable  bool          `yaml:"durable"`
	MaxTurns int           `yaml:"max_turns"`
	LogLevel string        `yaml:"log_level"`
	Models   []ModelRoute  `yaml:"models"`
	Tools    []HTTPToolDef `yaml:"tools"`
	// MetricsAddr serves Prometheus metrics at /metrics ("" or "off": not served).
	MetricsAddr string `yaml:"metrics_addr"`
	// DrainTimeout is how long running tasks may finish after SIGTERM or SIGINT
	// before they are handed back (worker.Options.DrainTimeout); default 20s.
	DrainTimeout config.Duration `yaml:"drain_timeout"`
	// Tracing exports spans over OTLP, as the control plane's tracing block; off
	// unless an endpoint is set here or in OTEL_EXPORTER_OTLP_ENDPOINT.
	Tracing config.Tracing `yaml:"tracing"`
	// MCP and A2A bound the remote tools of a task's effective MCP servers and A2A
	// peers (Lease.mcp_servers, Lease.a2a_peers).
	MCP MCPConfig `yaml:"mcp"`
	A2A A2AConfig `yaml:"a2a"`
}

// MCPConfig bounds the MCP tools (zero values take the defaults of mcptool).
type MCPConfig struct {
	ConnectTimeout config.Duration `yaml:"connect_timeout"`
	CallTimeout    config.Duration `yaml:"call_timeout"`
	MaxResultBytes int             `yaml:"max_result_bytes"`
	MaxTools       int             `yaml:"max_tools"`
	// MaxListBytes, MaxDescriptionBytes and MaxSchemaBytes bound a server's listing.
	MaxListBytes        int `yaml:"max_list_bytes"`
	MaxDescriptionBytes int `yaml:"max_description_bytes"`
	MaxSchemaBytes      int `yaml:"max_schema_bytes"`
}

// A2AConfig bounds the A2A skills (zero values take the defaults of a2atool).
type A2AConfig struct {
	CardTimeout    config.Duration `yaml:"card_timeout"`
	CallTimeout    config.Duration `yaml:"call_timeout"`
	MaxResultBytes int             `yaml:"max_result_bytes"`
}

// ModelRoute sends models whose name matches Match (a glob: "gpt-*", "*") to an
// OpenAI-compatible endpoint.
type ModelRoute struct {
	Match      string          `yaml:"match"`
	BaseURL    string          `yaml:"base_url"`
	APIKeyEnv  string          `yaml:"api_key_env"`
	Timeout    config.Duration `yaml:"timeout"`
	MaxRetries *int            `yaml:"max_retries"`
}

// HTTPToolDef declares a tool the runtime runs by POSTing the arguments to URL.
type HTTPToolDef struct {
	Name           string          `yaml:"name"`
	Description    string          `yaml:"description"`
	Parameters     map[string]any  `yaml:"parameters"`
	URL            string          `yaml:"url"`
	Timeout        config.Duration `yaml:"timeout"`
	MaxResultBytes int             `yaml:"max_result_bytes"`
}

// DefaultConfig is the configuration before the file, env and flags.
func DefaultConfig() Config {
	var c Config
	c.ControlPlane.Address = "127.0.0.1:7233"
	host, _ := os.Hostname()
	c.RuntimeID = fmt.Sprintf("runtime-%s-%d", host, os.Getpid())
	c.Concurrency = 4
	c.DrainTimeout = config.Duration(worker.DefaultDrainTimeout)
	c.MaxTurns = 32
	c.LogLevel = "info"
	return c
}

// LoadConfig reads file (none: defaults) over DefaultConfig; unknown keys are errors.
func LoadConfig(file string) (Config, error) {
	c := DefaultConfig()
	if file == "" {
		return c, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return c, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data), yaml.DisallowUnknownField(), yaml.Strict())
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("%s: %s", file, yaml.FormatError(err, false, true))
	}
	return c, nil
}

// ApplyEnv overrides the control plane's address and token from AGENTPLANE_ADDR and
// AGENTPLANE_TOKEN, and the metrics address from AGENTPLANE_RUNTIME_METRICS_ADDR.
func (c *Config) ApplyEnv(lookup func(string) (string, bool)) {
	if v, ok := lookup("AGENTPLANE_RUNTIME_METRICS_ADDR"); ok && v != "" {
		c.MetricsAddr = v
	}
	if v, ok := lookup("AGENTPLANE_ADDR"); ok && v != "" {
		c.ControlPlane.Address = v
	}
	if v, ok := lookup("AGENTPLANE_TOKEN"); ok && v != "" {
		c.ControlPlane.Token = v
	}
}

func (c *Config) logLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return slog.LevelInfo
	}
	return l
}

// defaultBaseURL is where OpenAI's SDKs send requests without OPENAI_BASE_URL.
const defaultBaseURL = "https://api.openai.com/v1"

// envRoute is the route of a config without a models table, by the conventions of
// OpenAI's own SDKs: every model goes to OPENAI_BASE_URL (default the public API)
// with the key in OPENAI_API_KEY (none when unset: Ollama, vLLM).
func envRoute(lookup func(string) (string, bool)) (agent.Route, error) {
	rt := agent.Route{Pattern: "*", BaseURL: defaultBaseURL, MaxRetries: 3}
	if v, ok := lookup("OPENAI_BASE_URL"); ok && v != "" {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return rt, fmt.Errorf("OPENAI_BASE_URL %q is not an http(s) URL (for example http://127.0.0.1:11434/v1)", v)
		}
		rt.BaseURL = v
	}
	rt.APIKey, _ = lookup("OPENAI_API_KEY")
	return rt, nil
}

// Runner validates the config and builds the agent runner; API keys are read from
// the environment variables the routes name (without routes: envRoute).
func (c *Config) Runner(lookup func(string) (string, bool)) (*agent.Runner, error) {
	if c.Concurrency < 1 {
		return nil, errors.New("concurrency must be at least 1")
	}
	if c.DrainTimeout <= 0 {
		return nil, errors.New("drain_timeout must be positive")
	}
	if c.MetricsAddr != "" && c.MetricsAddr != "off" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return nil, fmt.Errorf("metrics_addr %q: %v (want host:port, or off)", c.MetricsAddr, err)
		}
	}
	if err := c.Tracing.Validate("tracing"); err != nil {
		return nil, err
	}
	r := &agent.Runner{MaxTurns: c.MaxTurns, Providers: []agent.ToolProvider{
		&mcptool.Provider{ConnectTimeout: c.MCP.ConnectTimeout.D(), CallTimeout: c.MCP.CallTimeout.D(), MaxResultBytes: c.MCP.MaxResultBytes, MaxTools: c.MCP.MaxTools,
			MaxListBytes: c.MCP.MaxListBytes, MaxDescriptionBytes: c.MCP.MaxDescriptionBytes, MaxSchemaBytes: c.MCP.MaxSchemaBytes},
		&a2atool.Provider{CardTimeout: c.A2A.CardTimeout.D(), CallTimeout: c.A2A.CallTimeout.D(), MaxResultBytes: c.A2A.MaxResultBytes},
	}}
	if len(c.Models) == 0 {
		rt, err := envRoute(lookup)
		if err != nil {
			return nil, err
		}
		r.Routes = append(r.Routes, rt)
	}
	for i, m := range c.Models {
		if m.Match == "" || m.BaseURL == "" {
			return nil, fmt.Errorf("models[%d]: match and base_url are required", i)
		}
		if _, err := path.Match(m.Match, ""); err != nil {
			return nil, fmt.Errorf("models[%d]: bad match pattern %q: %v", i, m.Match, err)
		}
		rt := agent.Route{Pattern: m.Match, BaseURL: m.BaseURL, Timeout: m.Timeout.D(), MaxRetries: 3}
		if m.MaxRetries != nil {
			rt.MaxRetries = *m.MaxRetries
		}
		if m.APIKeyEnv != "" {
			key, ok := lookup(m.APIKeyEnv)
			if !ok {
				return nil, fmt.Errorf("models[%d]: environment variable %s (api_key_env) is not set", i, m.APIKeyEnv)
			}
			rt.APIKey = key
		}
		r.Routes = append(r.Routes, rt)
	}
	seen := map[string]bool{}
	for i, t := range c.Tools {
		if t.Name == "" || t.URL == "" {
			return nil, fmt.Errorf("tools[%d]: name and url are required", i)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("tools[%d]: tool %q declared twice", i, t.Name)
		}
		seen[t.Name] = true
		params := t.Parameters
		if params == nil {
			params = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		r.Tools = append(r.Tools, &agent.HTTPTool{
			Name: t.Name, Description: t.Description, Parameters: params, URL: t.URL,
			Timeout: t.Timeout.D(), MaxResultBytes: t.MaxResultBytes,
		})
	}
	return r, nil
}
