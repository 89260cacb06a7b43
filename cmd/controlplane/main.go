// Command controlplane runs the agentplane control plane.
//
// With no arguments it runs on embedded defaults: single-user mode, a bbolt store under
// ~/.agentplane/data, gRPC on 127.0.0.1:7233 and HTTP/JSON on 127.0.0.1:7280.
// Configuration is layered: defaults, then --config FILE (YAML; unknown keys stop the
// boot), then AGENTPLANE_* environment variables, then flags. `controlplane store copy`
// moves an embedded store to PostgreSQL.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/goccy/go-yaml"

	"github.com/agentplane/agentplane/server"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/version"
)

func main() {
	tuneGC()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// gcPercent is the garbage collector's target (GOGC) unless the environment sets one.
// The control plane's live heap is small and its requests allocate briskly, so Go's
// default of 100 collects many times a second, and on a small machine the collector's
// dedicated worker takes a large share of the CPU: on 2 cores, StartTask throughput
// with 64 callers rose by about half at 400. The price is a heap up to five times the
// live data instead of twice.
const gcPercent = 400

func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
}

// run is main without the process: it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "version" {
		fmt.Fprintln(stdout, version.String())
		return 0
	}
	if len(args) >= 2 && args[0] == "token" && args[1] == "new" {
		return tokenNew(args[2:], stdout, stderr)
	}
	if len(args) >= 2 && args[0] == "store" && args[1] == "copy" {
		return storeCopy(args[2:], stdout, stderr)
	}
	fs := flag.NewFlagSet("controlplane", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFile := fs.String("config", os.Getenv("AGENTPLANE_CONFIG"), "YAML config `file` (env AGENTPLANE_CONFIG)")
	dataDir := fs.String("data-dir", "", "data `directory` holding agentplane.db (env "+config.EnvDataDir+")")
	grpcAddr := fs.String("grpc-addr", "", "gRPC listen `host:port` (env "+config.EnvGRPCAddr+")")
	httpAddr := fs.String("http-addr", "", "HTTP/JSON listen `host:port`, or off (env "+config.EnvHTTPAddr+")")
	logLevel := fs.String("log-level", "", "debug, info, warn or error (env "+config.EnvLogLevel+")")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: controlplane [flags]\n       controlplane version\n       controlplane token new [--name N --tenant T --role R...]\n       controlplane store copy --from bolt:FILE --to postgres:DSN\n\nRuns the agentplane control plane.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "controlplane: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}

	cfg, err := config.Load(*configFile)
	if err != nil {
		fmt.Fprintf(stderr, "controlplane: %v\n", err)
		return 1
	}
	cfg.ApplyEnv(os.LookupEnv)
	applyFlags(&cfg, *dataDir, *grpcAddr, *httpAddr, *logLevel)

	srv, err := server.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "controlplane: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "agentplane %s\n  gRPC       %s\n", version.String(), srv.GRPCAddr())
	if addr := srv.HTTPAddr(); addr != "" {
		fmt.Fprintf(stdout, "  HTTP/JSON  http://%s  (metrics at /metrics, health at /healthz)\n", addr)
		if !cfg.Console.Disabled {
			fmt.Fprintf(stdout, "  console    http://%s/ui/\n", addr)
		}
	}
	fmt.Fprintf(stdout, "  store      %s\n", srv.StoreLocation())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := srv.Serve(ctx); err != nil {
		fmt.Fprintf(stderr, "controlplane: %v\n", err)
		return 1
	}
	return 0
}

// tokenNew prints a new bearer token and the config entry holding its hash. The token
// itself is shown once and stored nowhere.
// applyFlags sets the settings whose flags were given (non-empty) over cfg: flags come
// last, after the file and the environment. Two flags may carry the same value (both
// listeners on 127.0.0.1:0), so each is applied on its own.
func applyFlags(cfg *config.Config, dataDir, grpcAddr, httpAddr, logLevel string) {
	for _, f := range []struct {
		value string
		dst   *string
	}{{dataDir, &cfg.DataDir}, {grpcAddr, &cfg.GRPCAddr}, {httpAddr, &cfg.HTTPAddr}, {logLevel, &cfg.Log.Level}} {
		if f.value != "" {
			*f.dst = f.value
		}
	}
}

func tokenNew(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("controlplane token new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "client", "token `name` (the principal's subject)")
	tenant := fs.String("tenant", "default", "`tenant` the token acts in")
	var roles roleList
	fs.Var(&roles, "role", "`role` to grant: user, approver, runtime or admin (repeatable; default user)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if len(roles) == 0 {
		roles = roleList{"user"}
	}
	for _, r := range roles {
		if _, err := auth.ParseRole(r); err != nil {
			fmt.Fprintf(stderr, "controlplane: %v\n", err)
			return 2
		}
	}
	token, hash, err := auth.NewToken()
	if err != nil {
		fmt.Fprintf(stderr, "controlplane: %v\n", err)
		return 1
	}
	// Refuse an entry the server would refuse at boot (e.g. tenant "*" for a user).
	entry := config.Token{Name: *name, SHA256: hash, Tenant: *tenant, Roles: roles}
	if _, err := auth.New(&config.Config{Auth: config.Auth{Tokens: []config.Token{entry}}}); err != nil {
		fmt.Fprintf(stderr, "controlplane: %v\n", err)
		return 2
	}
	// Every value goes through the config's YAML library, so one that YAML would read
	// as something else ("*" is an alias, "yes" a bool) is quoted.
	quoted := make([]string, len(roles))
	for i, r := range roles {
		quoted[i] = yamlScalar(r)
	}
	fmt.Fprintf(stdout, "token (give it to the client; it is not stored anywhere):\n  %s\n\n", token)
	fmt.Fprintf(stdout, "config entry (add under auth.tokens):\n  - name: %s\n    sha256: %s\n    tenant: %s\n    roles: [%s]\n",
		yamlScalar(entry.Name), entry.SHA256, yamlScalar(entry.Tenant), strings.Join(quoted, ", "))
	return 0
}

// yamlScalar renders s as a one-line YAML scalar that reads back as s: the config
// loader's library quotes what needs it; anything it leaves multi-line or that does not
// read back is written as a JSON string (valid YAML).
func yamlScalar(s string) string {
	b, err := yaml.Marshal(s)
	out := strings.TrimSuffix(string(b), "\n")
	var back string
	if err == nil && !strings.ContainsAny(out, "\n\r") && yaml.Unmarshal(b, &back) == nil && back == s {
		return out
	}
	j, _ := json.Marshal(s)
	return string(j)
}

type roleList []string

func (r *roleList) String() string     { return strings.Join(*r, ",") }
func (r *roleList) Set(v string) error { *r = append(*r, v); return nil }
