// Command runtime is agentplane's reference runtime: it leases agent and graph tasks
// from the control plane and runs them on OpenAI-compatible models (docs/runtime.md).
//
// Configuration comes from a YAML file (-config, env AGENTPLANE_RUNTIME_CONFIG), then
// AGENTPLANE_ADDR and AGENTPLANE_TOKEN, then flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"google.golang.org/grpc"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	"github.com/agentplane/agentplane/cmd/runtime/internal/graph"
	"github.com/agentplane/agentplane/cmd/runtime/internal/telemetry"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/tracing"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stderr, os.LookupEnv); err != nil {
		fmt.Fprintln(os.Stderr, "runtime:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer, lookup func(string) (string, bool)) error {
	fs := flag.NewFlagSet("runtime", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFile := fs.String("config", envOr(lookup, "AGENTPLANE_RUNTIME_CONFIG", ""), "YAML config `file` (env AGENTPLANE_RUNTIME_CONFIG)")
	addr := fs.String("addr", "", "control plane gRPC `address` (env AGENTPLANE_ADDR)")
	token := fs.String("token", "", "bearer `token` (env AGENTPLANE_TOKEN)")
	var queues stringList
	fs.Var(&queues, "queue", "run `queue` to lease from (repeatable)")
	concurrency := fs.Int("concurrency", 0, "tasks run at once")
	runtimeID := fs.String("runtime-id", "", "this runtime's `id`, shown on its leases")
	durable := fs.Bool("durable", false, "gated tool calls wait durably (the lease is given up until the decision)")
	drainTimeout := fs.Duration("drain-timeout", 0, "on SIGTERM or SIGINT, how long running tasks may finish before they are handed back (default 20s)")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics at `host:port`/metrics (env AGENTPLANE_RUNTIME_METRICS_ADDR; off by default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := LoadConfig(*configFile)
	if err != nil {
		return err
	}
	cfg.ApplyEnv(lookup)
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "addr":
			cfg.ControlPlane.Address = *addr
		case "token":
			cfg.ControlPlane.Token = *token
		case "queue":
			cfg.Queues = queues
		case "concurrency":
			cfg.Concurrency = *concurrency
		case "runtime-id":
			cfg.RuntimeID = *runtimeID
		case "durable":
			cfg.Durable = *durable
		case "drain-timeout":
			cfg.DrainTimeout = config.Duration(*drainTimeout)
		case "metrics-addr":
			cfg.MetricsAddr = *metricsAddr
		}
	})
	runner, err := cfg.Runner(lookup)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel()}))
	runner.Logger = logger.With("runtime_id", cfg.RuntimeID)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tp, err := tracing.New(ctx, cfg.Tracing, "agentplane-runtime", lookup)
	if err != nil {
		return err
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer scancel()
		if err := tp.Shutdown(sctx); err != nil {
			logger.Warn("flushing spans", "err", err)
		}
	}()
	metrics := telemetry.NewMetrics()
	runner.Telemetry = telemetry.New(metrics, tp)
	if cfg.MetricsAddr != "" && cfg.MetricsAddr != "off" {
		stop, err := serveMetrics(cfg.MetricsAddr, metrics, logger)
		if err != nil {
			return err
		}
		defer stop()
	}
	var opts []client.Option
	if cfg.ControlPlane.Token != "" {
		opts = append(opts, client.WithToken(cfg.ControlPlane.Token))
	}
	if tp.Enabled() {
		// The control plane's spans for the runtime's calls join the task's trace.
		opts = append(opts, client.WithDialOptions(
			grpc.WithChainUnaryInterceptor(tracing.UnaryClientInterceptor()),
			grpc.WithChainStreamInterceptor(tracing.StreamClientInterceptor())))
		logger.Info("tracing on", "otlp_endpoint", tp.Endpoint())
	}
	c, err := client.Dial(ctx, cfg.ControlPlane.Address, opts...)
	if err != nil {
		return fmt.Errorf("dial %s: %w", cfg.ControlPlane.Address, err)
	}
	defer c.Close()
	wo := worker.Options{RuntimeID: cfg.RuntimeID, Queues: cfg.Queues, Capacity: cfg.Concurrency, DrainTimeout: cfg.DrainTimeout.D(), Logger: logger}
	if cfg.Durable {
		wo.Delivery = worker.Durable
	}
	w, err := worker.New(c.Runtime, runner.Telemetry.Handler(&graph.Runner{Agent: runner}), wo)
	if err != nil {
		return err
	}
	logger.Info("runtime started", "addr", cfg.ControlPlane.Address, "queues", cfg.Queues, "concurrency", cfg.Concurrency, "routes", len(runner.Routes), "tools", len(runner.Tools))
	if len(cfg.Models) == 0 {
		logger.Info("no models table: every model goes to OPENAI_BASE_URL with OPENAI_API_KEY", "base_url", runner.Routes[0].BaseURL, "api_key_set", runner.Routes[0].APIKey != "")
	}

	err = w.RunUntilSignal(ctx, func(sig os.Signal, second bool) {
		if second {
			logger.Info("stopping: handing the running tasks back", "signal", sig.String())
			return
		}
		logger.Info("stopping: no more leases; finishing running tasks, then handing them back (signal again to hand them back now)",
			"signal", sig.String(), "drain_timeout", cfg.DrainTimeout.D())
	})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

type stringList []string

func (s *stringList) String() string     { return fmt.Sprint([]string(*s)) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func envOr(lookup func(string) (string, bool), key, def string) string {
	if v, ok := lookup(key); ok {
		return v
	}
	return def
}

// serveMetrics serves the runtime's metrics on addr until stop is called.
func serveMetrics(addr string, m *telemetry.Metrics, logger *slog.Logger) (stop func(), err error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server", "err", err)
		}
	}()
	logger.Info("serving metrics", "addr", lis.Addr().String())
	return func() { _ = srv.Close() }, nil
}
