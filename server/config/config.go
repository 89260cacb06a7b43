// Package config is the control plane's configuration: defaults, then a YAML file,
// then environment variables, then flags, followed by one Validate that refuses to
// boot on anything unknown or inconsistent.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
)

// Config is the whole configuration. Zero values are replaced by Default's.
type Config struct {
	// DataDir holds the store file (agentplane.db). Created if missing.
	DataDir string `yaml:"data_dir"`
	// GRPCAddr is the gRPC listen address.
	GRPCAddr string `yaml:"grpc_addr"`
	// HTTPAddr is the HTTP/JSON, /metrics and /healthz listen address; "off" disables it.
	HTTPAddr string `yaml:"http_addr"`
	// HTTP guards the HTTP listener: allowed Host names and CORS origins.
	HTTP HTTP `yaml:"http"`

	Log    Log    `yaml:"log"`
	Debug  Debug  `yaml:"debug"`
	Store  Store  `yaml:"store"`
	Limits Limits `yaml:"limits"`
	Spec   Spec   `yaml:"spec"`
	Tasks  Tasks  `yaml:"tasks"`
	HITL   HITL   `yaml:"hitl"`
	Auth   Auth   `yaml:"auth"`
	TLS    TLS    `yaml:"tls"`
	Gates  Gates  `yaml:"gates"`
	// Tracing exports OpenTelemetry spans of every gRPC call; off by default.
	Tracing Tracing `yaml:"tracing"`
	// Console configures the web console served under /ui/ on the HTTP listener.
	Console Console `yaml:"console"`
	// Notifications configures webhooks (docs/notifications.md).
	Notifications Notifications `yaml:"notifications"`
	// A2A configures the A2A face under /a2a/ (docs/a2a.md).
	A2A A2A `yaml:"a2a"`
	// Schedules configures the scheduler (docs/schedules.md).
	Schedules Schedules `yaml:"schedules"`
	// MCP configures the MCP server face at /mcp (docs/mcp.md).
	MCP MCP `yaml:"mcp"`
	// Tenants holds per-tenant settings; they may tighten the deployment's, never loosen.
	Tenants map[string]Tenant `yaml:"tenants"`
	// Budgets limits the tokens and cost of model calls per tenant and agent
	// (docs/budgets.md); none by default.
	Budgets Budgets `yaml:"budgets"`
	// Flow configures fair sharing, concurrency keys and rate limits at lease time
	// (docs/api.md#flow-control).
	Flow Flow `yaml:"flow"`

	baseDir string
}

// Log configures structured logs (log/slog).
type Log struct {
	// Level is debug, info, warn or error.
	Level string `yaml:"level"`
	// Format is text or json.
	Format string `yaml:"format"`
}

// Tracing configures OpenTelemetry traces, exported over OTLP. Tracing is on when
// OTLPEndpoint is set or the standard OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) environment variable is; the other standard
// OTEL_* variables (headers, sampler, batch delays, service name) apply as usual.
// The runtime's config (cmd/runtime) embeds the same block.
type Tracing struct {
	// OTLPEndpoint is the collector's base URL, as OTEL_EXPORTER_OTLP_ENDPOINT:
	// http://host:4318 for http/protobuf (spans go to /v1/traces under it),
	// http://host:4317 for grpc. Over the environment variable when both are set.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// Protocol is http/protobuf (the default) or grpc; empty means
	// OTEL_EXPORTER_OTLP_PROTOCOL, or http/protobuf.
	Protocol string `yaml:"protocol"`
}

// Validate names what is wrong with t, under path (the key t is at).
func (t Tracing) Validate(path string) error {
	switch t.Protocol {
	case "", "http/protobuf", "grpc":
	default:
		return fmt.Errorf("%s.protocol %q: want http/protobuf or grpc", path, t.Protocol)
	}
	if t.OTLPEndpoint != "" {
		u, err := url.Parse(t.OTLPEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s.otlp_endpoint %q: want a URL such as http://127.0.0.1:4318", path, t.OTLPEndpoint)
		}
	}
	return nil
}

// Debug configures diagnostics for operators.
type Debug struct {
	// Pprof serves Go's profiles (net/http/pprof) under /debug/pprof/ on the HTTP
	// listener, guarded like /metrics. Off by default.
	Pprof bool `yaml:"pprof"`
}

// Store configures the store: the embedded bbolt file (the default) or PostgreSQL.
type Store struct {
	// Backend is bolt (the embedded file under data_dir) or postgres.
	Backend string `yaml:"backend"`
	// Postgres configures the postgres backend.
	Postgres Postgres `yaml:"postgres"`
	// OpenTimeout bounds the wait for the file lock; a second instance on the same
	// data directory fails after it instead of hanging.
	OpenTimeout Duration `yaml:"open_timeout"`
	// MaxBatch is the most writes one group commit takes.
	MaxBatch int `yaml:"max_batch"`
	// WAL is the write-ahead log mode (on by default): one fsync per group commit
	// instead of bbolt's two, taken off the commit path, with periodic checkpoints;
	// after an unclean shutdown the store is rebuilt from the last checkpoint and the
	// log. Off, every commit is bbolt's own (two fsyncs, about twice the latency).
	WAL bool `yaml:"wal"`
	// CheckpointInterval is how often, in the write-ahead log mode, a checkpoint is
	// considered while writes happen; it runs if the log holds at least 1/64 of the
	// store's size.
	CheckpointInterval Duration `yaml:"checkpoint_interval"`
	// CheckpointBytes starts a checkpoint once the log holds this many bytes, or an
	// eighth of the store's size if that is more: it bounds the log on disk and what a
	// restart after a crash replays.
	CheckpointBytes int64 `yaml:"checkpoint_bytes"`
}

// Store backends.
const (
	BackendBolt     = "bolt"
	BackendPostgres = "postgres"
)

// Postgres configures the PostgreSQL store (docs/scaling.md).
type Postgres struct {
	// DSN is a libpq connection string or URL (postgres://user@host:5432/db). The
	// environment variable AGENTPLANE_POSTGRES_DSN overrides it, which keeps a
	// password out of the file.
	DSN string `yaml:"dsn"`
	// MaxConns is the connection pool size (0: the larger of 4 and the CPU count).
	MaxConns int32 `yaml:"max_conns"`
	// ConnectTimeout bounds establishing one connection.
	ConnectTimeout Duration `yaml:"connect_timeout"`
	// StatementTimeout, when positive, is each connection's statement_timeout.
	StatementTimeout Duration `yaml:"statement_timeout"`
	// WriteTransactions is the most write transactions open at once, each carrying a
	// batch of concurrent writes (0: 2; at most max_conns less one).
	WriteTransactions int `yaml:"write_transactions"`
	// PollInterval is how often, while the connection that carries the other
	// replicas' notifications is down, every waiter looks at the database again (0:
	// 1s). See docs/scaling.md.
	PollInterval Duration `yaml:"poll_interval"`
}

// Limits bound what a client can make the server hold.
type Limits struct {
	// MaxSpecBytes is the largest spec document or typed spec accepted.
	MaxSpecBytes int64 `yaml:"max_spec_bytes"`
	// MaxSpecNesting is the deepest JSON/YAML nesting a document may have.
	MaxSpecNesting int `yaml:"max_spec_nesting"`
	// SpecDecodeBytes bounds the documents decoded at once (ValidateSpec, StartTask),
	// by their weight: their size, or more for a dense document. A document waits
	// while others fill it; 0 means two documents of max_spec_bytes.
	SpecDecodeBytes int64 `yaml:"spec_decode_bytes"`
	// MaxInputBytes bounds a task's input and a ContinueTask message.
	MaxInputBytes int64 `yaml:"max_input_bytes"`
	// MaxEventBytes bounds one event's payload.
	MaxEventBytes int64 `yaml:"max_event_bytes"`
	// MaxTaskHistoryBytes bounds the total payload bytes of one task's events.
	MaxTaskHistoryBytes int64 `yaml:"max_task_history_bytes"`
	// MaxTaskEvents bounds the number of events of one task.
	MaxTaskEvents int64 `yaml:"max_task_events"`
	// MaxLabels bounds the labels of one task.
	MaxLabels int `yaml:"max_labels"`
	// MaxWatchBuffer is how many live events a watcher may have queued before it is
	// switched back to reading from the store.
	MaxWatchBuffer int `yaml:"max_watch_buffer"`
	// MaxListResponseBytes bounds the encoded tasks of one ListTasks page; a page
	// always holds at least one task.
	MaxListResponseBytes int64 `yaml:"max_list_response_bytes"`
	// MaxCallsPerPrincipal bounds the calls one principal may have in flight at once
	// (unary calls, long polls included, and streams other than watches and awaits), in
	// multi-tenant mode.
	MaxCallsPerPrincipal int `yaml:"max_calls_per_principal"`
	// MaxWatchesPerPrincipal bounds the WatchTask streams one principal may have open,
	// in multi-tenant mode.
	MaxWatchesPerPrincipal int `yaml:"max_watches_per_principal"`
	// MaxAwaitsPerPrincipal bounds the AwaitDecision streams one principal may have
	// open, in multi-tenant mode.
	MaxAwaitsPerPrincipal int `yaml:"max_awaits_per_principal"`
	// StreamKeepaliveInterval is how long a WatchTask or AwaitDecision stream may stay
	// silent before the server sends a keepalive message on it, so that proxies and
	// load balancers do not close idle streams. At least 1s.
	StreamKeepaliveInterval Duration `yaml:"stream_keepalive_interval"`
}

// requestSlack is what a request may carry beyond its largest part (a spec document,
// or the events of a report): the other fields and the framing.
const requestSlack = 64 << 10

// MaxRequestBytes is the largest request message the server reads (gRPC
// MaxRecvMsgSize, the HTTP body cap): a spec of MaxSpecBytes and the rest of its
// request. A larger one is refused by the transport.
func (l Limits) MaxRequestBytes() int64 { return l.MaxSpecBytes + requestSlack }

// reportEventOverhead bounds what one event adds to a ReportEvents request beyond its
// payload (field tags and lengths of the list entry and of the oneof arm).
const reportEventOverhead = 32

// MaxEventsPerReport is the most events one ReportEvents call may carry: as many
// events of MaxEventBytes as always fit MaxRequestBytes with the request's other
// fields, and at least 1. A call within it never meets the transport limit.
func (l Limits) MaxEventsPerReport() int {
	n := (l.MaxRequestBytes() - requestSlack/16) / (l.MaxEventBytes + reportEventOverhead)
	return int(max(n, 1))
}

// Spec holds deployment knowledge used by validation.
type Spec struct {
	// PlatformMaxDepth is the platform's graph nesting cap.
	PlatformMaxDepth int64 `yaml:"platform_max_depth"`
	// StaticAgents maps agent ids to files holding AgentSpec documents (YAML or JSON),
	// relative to the config file.
	StaticAgents map[string]string `yaml:"static_agents"`
}

// Tasks configures the task lifecycle and leases.
type Tasks struct {
	// LeaseTTL is how long a lease lasts without a heartbeat.
	LeaseTTL Duration `yaml:"lease_ttl"`
	// MaxAttempts is how many leases a task may be granted before it fails.
	MaxAttempts int `yaml:"max_attempts"`
	// MaxLeaseWait caps a runtime's long poll.
	MaxLeaseWait Duration `yaml:"max_lease_wait"`
	// Retention is how long terminal tasks are kept; 0 keeps them forever.
	Retention Duration `yaml:"retention"`
	// PurgeInterval is how often retention runs.
	PurgeInterval Duration `yaml:"purge_interval"`
}

// HITL configures human approvals.
type HITL struct {
	// DefaultTimeout is the deadline of an interrupt when the task sets none; 0 means none.
	DefaultTimeout Duration `yaml:"default_timeout"`
	// DeadlineDecision is applied when a deadline passes: reject (default) or approve.
	DeadlineDecision string `yaml:"deadline_decision"`
	// MaxUntrustedBytes caps an untrusted reason when the spec sets no cap.
	MaxUntrustedBytes int64 `yaml:"max_untrusted_bytes"`
	// Approvers maps the identities people have in Slack and email to the principals
	// who decide (docs/hitl.md, "Channels").
	Approvers []Approver `yaml:"approvers"`
	// Slack configures the Slack app whose buttons decide.
	Slack SlackApp `yaml:"slack"`
	// Links configures signed approve and reject links.
	Links Links `yaml:"links"`
	// Groups are the approvers' groups of the tenants (docs/hitl.md, "Approval rules").
	Groups []ApproverGroup `yaml:"approver_groups"`
	// Rules are the approval rules: quorum, separation of duties, escalation.
	Rules []ApprovalRule `yaml:"approval_rules"`
}

// Console configures the web console (docs/console.md).
type Console struct {
	// Disabled turns the console off: /ui/ is not served.
	Disabled bool `yaml:"disabled"`
	// SessionTTL is how long a sign-in lasts.
	SessionTTL Duration `yaml:"session_ttl"`
	// SessionKeyFile holds the 32-byte key that seals session cookies. Empty means
	// console-session.key in data_dir, generated on first use; replicas behind one
	// address share a file (or the same content).
	SessionKeyFile string `yaml:"session_key_file"`
}

// Auth configures identity.
type Auth struct {
	// RequirePrincipal makes the deployment multi-tenant: every call is authenticated.
	RequirePrincipal bool `yaml:"require_principal"`
	// Tokens maps bearer-token hashes to principals.
	Tokens []Token `yaml:"tokens"`
	// ClientCerts maps mTLS client certificate subjects to principals.
	ClientCerts []ClientCert `yaml:"client_certs"`
	// AllowInsecure lets a multi-tenant deployment listen on a non-loopback address
	// without TLS, or a single-user one listen on a non-loopback address at all. Say it
	// only when something in front terminates TLS and authenticates.
	AllowInsecure bool `yaml:"allow_insecure"`
}

// Token is one bearer token, stored as the hex SHA-256 of the token.
type Token struct {
	Name   string   `yaml:"name"`
	SHA256 string   `yaml:"sha256"`
	Tenant string   `yaml:"tenant"`
	Roles  []string `yaml:"roles"`
}

// ClientCert maps a certificate's subject common name to a principal.
type ClientCert struct {
	CommonName string   `yaml:"common_name"`
	Tenant     string   `yaml:"tenant"`
	Roles      []string `yaml:"roles"`
}

// TLS configures the server's certificate and client verification.
type TLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile enables mTLS: client certificates signed by it are verified.
	ClientCAFile string `yaml:"client_ca_file"`
}

// Gates configures the MCP and A2A trust gates.
type Gates struct {
	// LockedKeys are config keys a request may not occupy (mcp, a2a, ...).
	LockedKeys []string `yaml:"locked_keys"`
	// CompliancePosture is one of the closed set of postures.
	CompliancePosture string `yaml:"compliance_posture"`
	// McpServers is the deployment baseline of MCP servers.
	McpServers []Peer `yaml:"mcp_servers"`
	// A2aPeers is the deployment baseline of A2A peers.
	A2aPeers []Peer `yaml:"a2a_peers"`
}

// Peer is a baseline MCP server or A2A peer.
type Peer struct {
	Name    string            `yaml:"name"`
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
}

// Tenant holds one tenant's settings.
type Tenant struct {
	// MaxDepth is the tenant's graph nesting cap (min with the platform's).
	MaxDepth int64 `yaml:"max_depth"`
	// LockedKeys are added to the deployment's.
	LockedKeys []string `yaml:"locked_keys"`
	// CompliancePosture may only be stricter than the deployment's.
	CompliancePosture string `yaml:"compliance_posture"`
}

// Duration is a time.Duration written as "30s" in YAML.
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// UnmarshalYAML parses "1m30s" or a number of seconds.
func (d *Duration) UnmarshalYAML(b []byte) error {
	s := strings.Trim(strings.TrimSpace(string(b)), `"'`)
	if v, err := time.ParseDuration(s); err == nil {
		*d = Duration(v)
		return nil
	}
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		*d = Duration(time.Duration(secs * float64(time.Second)))
		return nil
	}
	return fmt.Errorf("invalid duration %q (write for example 30s, 5m, 1h)", s)
}

// MarshalYAML writes the duration as text.
func (d Duration) MarshalYAML() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// DefaultDataDir is where the store lives when nothing says otherwise.
func DefaultDataDir() string {
	if dir, err := os.UserHomeDir(); err == nil && dir != "" {
		return filepath.Join(dir, ".agentplane", "data")
	}
	return filepath.Join(os.TempDir(), "agentplane-data")
}

// Default returns the embedded defaults: single-user, loopback, bbolt under DefaultDataDir.
func Default() Config {
	return Config{
		DataDir:  DefaultDataDir(),
		GRPCAddr: "127.0.0.1:7233",
		HTTPAddr: "127.0.0.1:7280",
		Log:      Log{Level: "info", Format: "text"},
		Store: Store{Backend: BackendBolt, OpenTimeout: Duration(2 * time.Second), MaxBatch: 256, WAL: true,
			CheckpointInterval: Duration(5 * time.Minute), CheckpointBytes: 64 << 20,
			Postgres: Postgres{ConnectTimeout: Duration(10 * time.Second)}},
		Limits: Limits{
			MaxSpecBytes:        1 << 20,
			MaxSpecNesting:      64,
			MaxInputBytes:       256 << 10,
			MaxEventBytes:       256 << 10,
			MaxTaskHistoryBytes: 64 << 20,
			MaxTaskEvents:       100000,
			MaxLabels:           32,
			MaxWatchBuffer:      1024,
			// Half of a gRPC client's default 4 MiB receive limit.
			MaxListResponseBytes: 2 << 20,
			// A runtime fleet often shares one runtime principal: each process
			// long-polls LeaseTasks and may await several decisions at once.
			MaxCallsPerPrincipal:   256,
			MaxWatchesPerPrincipal: 128,
			MaxAwaitsPerPrincipal:  512,
			// Under the 30 to 60 s idle timeouts common in load balancers.
			StreamKeepaliveInterval: Duration(15 * time.Second),
		},
		Spec: Spec{PlatformMaxDepth: 4},
		Tasks: Tasks{
			LeaseTTL:      Duration(30 * time.Second),
			MaxAttempts:   3,
			MaxLeaseWait:  Duration(30 * time.Second),
			PurgeInterval: Duration(10 * time.Minute),
		},
		HITL:          HITL{DeadlineDecision: "reject", MaxUntrustedBytes: 4096, Links: Links{TTL: Duration(72 * time.Hour)}},
		Console:       Console{SessionTTL: Duration(12 * time.Hour)},
		Notifications: DefaultNotifications(),
		A2A:           DefaultA2A(),
		Schedules:     DefaultSchedules(),
		MCP:           DefaultMCP(),
	}
}

// Load reads a YAML file over the defaults. Unknown keys stop the load with their
// position. An empty path returns the defaults.
func Load(path string) (Config, error) {
	cfg := Default()
	if path == "" {
		return cfg, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	if err := Parse(data, &cfg); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	cfg.baseDir = filepath.Dir(path)
	return cfg, nil
}

// Parse decodes YAML into cfg, which holds the defaults; unknown keys are errors.
func Parse(data []byte, cfg *Config) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data), yaml.DisallowUnknownField(), yaml.Strict())
	if err := dec.Decode(cfg); err != nil {
		return errors.New(yaml.FormatError(err, false, true))
	}
	return nil
}

// Environment variables read by ApplyEnv.
const (
	EnvDataDir  = "AGENTPLANE_DATA_DIR"
	EnvGRPCAddr = "AGENTPLANE_GRPC_ADDR"
	EnvHTTPAddr = "AGENTPLANE_HTTP_ADDR"
	EnvLogLevel = "AGENTPLANE_LOG_LEVEL"
	EnvLogFmt   = "AGENTPLANE_LOG_FORMAT"
	// EnvPostgresDSN overrides store.postgres.dsn.
	EnvPostgresDSN = "AGENTPLANE_POSTGRES_DSN"
)

// ApplyEnv overrides cfg from the environment (lookup is os.LookupEnv in production).
func (c *Config) ApplyEnv(lookup func(string) (string, bool)) {
	set := func(key string, dst *string) {
		if v, ok := lookup(key); ok && v != "" {
			*dst = v
		}
	}
	set(EnvDataDir, &c.DataDir)
	set(EnvGRPCAddr, &c.GRPCAddr)
	set(EnvHTTPAddr, &c.HTTPAddr)
	set(EnvLogLevel, &c.Log.Level)
	set(EnvLogFmt, &c.Log.Format)
	set(EnvPostgresDSN, &c.Store.Postgres.DSN)
}

// BaseDir is the directory relative paths in the config are resolved against.
func (c *Config) BaseDir() string {
	if c.baseDir == "" {
		return "."
	}
	return c.baseDir
}

// StorePath is the bbolt file.
func (c *Config) StorePath() string { return filepath.Join(c.DataDir, "agentplane.db") }

// Validate refuses anything unknown or inconsistent, naming every problem.
func (c *Config) Validate() error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if c.DataDir == "" {
		bad("data_dir is empty")
	}
	if _, _, err := net.SplitHostPort(c.GRPCAddr); err != nil {
		bad("grpc_addr %q: %v", c.GRPCAddr, err)
	}
	if c.HTTPAddr != "off" {
		if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
			bad("http_addr %q: %v (use off to disable)", c.HTTPAddr, err)
		}
	}
	if err := c.Tracing.Validate("tracing"); err != nil {
		bad("%v", err)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level %q: want debug, info, warn or error", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format %q: want text or json", c.Log.Format)
	}
	switch c.Store.Backend {
	case BackendBolt:
	case BackendPostgres:
		if c.Store.Postgres.DSN == "" {
			bad("store.postgres.dsn is empty (set it or %s)", EnvPostgresDSN)
		}
		if c.Store.Postgres.MaxConns < 0 {
			bad("store.postgres.max_conns must not be negative")
		}
		if c.Store.Postgres.WriteTransactions < 0 {
			bad("store.postgres.write_transactions must not be negative")
		}
		if c.Store.Postgres.ConnectTimeout <= 0 {
			bad("store.postgres.connect_timeout must be positive")
		}
		if c.Store.Postgres.PollInterval < 0 {
			bad("store.postgres.poll_interval must not be negative")
		}
	default:
		bad("store.backend %q: want bolt or postgres", c.Store.Backend)
	}
	if c.Store.OpenTimeout <= 0 {
		bad("store.open_timeout must be positive")
	}
	if c.Store.MaxBatch < 1 {
		bad("store.max_batch must be >= 1")
	}
	if c.Store.CheckpointInterval < Duration(time.Second) {
		bad("store.checkpoint_interval must be at least 1s")
	}
	if c.Store.CheckpointBytes < 1<<20 {
		bad("store.checkpoint_bytes must be at least 1 MiB (1048576)")
	}
	for name, v := range map[string]int64{
		"limits.max_spec_bytes": c.Limits.MaxSpecBytes, "limits.max_input_bytes": c.Limits.MaxInputBytes,
		"limits.max_event_bytes": c.Limits.MaxEventBytes, "limits.max_task_history_bytes": c.Limits.MaxTaskHistoryBytes,
		"limits.max_task_events": c.Limits.MaxTaskEvents, "limits.max_spec_nesting": int64(c.Limits.MaxSpecNesting),
		"limits.max_labels": int64(c.Limits.MaxLabels), "limits.max_watch_buffer": int64(c.Limits.MaxWatchBuffer),
		"spec.platform_max_depth": c.Spec.PlatformMaxDepth, "tasks.max_attempts": int64(c.Tasks.MaxAttempts),
		"limits.max_list_response_bytes": c.Limits.MaxListResponseBytes,
		"limits.max_calls_per_principal": int64(c.Limits.MaxCallsPerPrincipal), "limits.max_watches_per_principal": int64(c.Limits.MaxWatchesPerPrincipal),
		"limits.max_awaits_per_principal": int64(c.Limits.MaxAwaitsPerPrincipal),
	} {
		if v < 1 {
			bad("%s must be >= 1 (got %d)", name, v)
		}
	}
	if c.Limits.StreamKeepaliveInterval < Duration(time.Second) {
		bad("limits.stream_keepalive_interval must be at least 1s")
	}
	if c.Limits.SpecDecodeBytes < 0 {
		bad("limits.spec_decode_bytes must be >= 0 (got %d)", c.Limits.SpecDecodeBytes)
	}
	if c.Tasks.LeaseTTL < Duration(time.Second) {
		bad("tasks.lease_ttl must be at least 1s")
	}
	if c.Tasks.MaxLeaseWait <= 0 {
		bad("tasks.max_lease_wait must be positive")
	}
	if c.Tasks.Retention < 0 || c.HITL.DefaultTimeout < 0 {
		bad("durations may not be negative")
	}
	switch c.HITL.DeadlineDecision {
	case "reject", "approve":
	default:
		bad("hitl.deadline_decision %q: want reject or approve", c.HITL.DeadlineDecision)
	}
	if c.Console.SessionTTL < Duration(time.Minute) {
		bad("console.session_ttl must be at least 1m")
	}
	if c.HITL.MaxUntrustedBytes < 1 {
		bad("hitl.max_untrusted_bytes must be >= 1")
	}
	for id, path := range c.Spec.StaticAgents {
		if strings.TrimSpace(id) == "" || path == "" {
			bad("spec.static_agents: empty id or path")
		}
	}
	for _, t := range c.Auth.Tokens {
		if t.Name == "" || len(t.SHA256) != 64 {
			bad("auth.tokens %q: name and a 64-hex-digit sha256 are required (make one with: controlplane token new)", t.Name)
		}
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		bad("tls.cert_file and tls.key_file go together")
	}
	if c.TLS.ClientCAFile != "" && c.TLS.CertFile == "" {
		bad("tls.client_ca_file needs tls.cert_file and tls.key_file")
	}
	if !c.Auth.RequirePrincipal && !c.Auth.AllowInsecure {
		for _, addr := range []string{c.GRPCAddr, c.HTTPAddr} {
			if addr != "off" && !IsLoopback(addr) {
				bad("single-user mode on non-loopback %s: every peer that reaches it would act as the owner; "+
					"set auth.require_principal: true with tokens, or auth.allow_insecure: true if something in front authenticates", addr)
			}
		}
	}
	if c.Auth.RequirePrincipal && c.TLS.CertFile == "" && !c.Auth.AllowInsecure {
		for _, addr := range []string{c.GRPCAddr, c.HTTPAddr} {
			if addr != "off" && !IsLoopback(addr) {
				bad("auth.require_principal on non-loopback %s without TLS: configure tls or set auth.allow_insecure: true", addr)
			}
		}
	}
	c.validateHTTP(bad)
	c.validateGates(bad)
	c.validateNotifications(bad)
	c.validateChannels(bad)
	c.validateA2A(bad)
	c.validateSchedules(bad)
	c.validateMCP(bad)
	c.validateBudgets(bad)
	c.validateApprovals(bad)
	c.validateFlow(bad)
	if len(errs) == 0 {
		return nil
	}
	sort.Strings(errs)
	return fmt.Errorf("invalid configuration:\n  %s", strings.Join(errs, "\n  "))
}

// IsLoopback reports whether a host:port listens on loopback only.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
