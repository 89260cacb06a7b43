// Package servertest starts a real control plane in-process for tests: the same
// server.New the binary uses, on loopback ports chosen by the kernel, with its store
// in a temporary directory, and a Go client connected to it.
package servertest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/server"
	"github.com/agentplane/agentplane/server/config"
)

// Instance is a running server and a client connected to it.
type Instance struct {
	Server *server.Server
	Client *client.Client
	Config config.Config
	// GRPCAddr and HTTPAddr are the bound addresses.
	GRPCAddr, HTTPAddr string

	cancel context.CancelFunc
	done   chan error
}

// Config returns a test configuration: defaults, loopback port 0, a fresh data dir.
func Config(t testing.TB) config.Config {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.GRPCAddr = "127.0.0.1:0"
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.Log.Level = "warn"
	return cfg
}

// Start starts a server with Config(t) modified by mutate (which may be nil) and stops
// it when the test ends.
func Start(t testing.TB, mutate func(*config.Config)) *Instance {
	t.Helper()
	cfg := Config(t)
	if mutate != nil {
		mutate(&cfg)
	}
	return StartConfig(t, cfg)
}

// StartConfig starts a server with exactly cfg.
func StartConfig(t testing.TB, cfg config.Config) *Instance {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = server.NewLogger(testWriter{t}, cfg.Log)
	}
	return StartLogged(t, cfg, logger)
}

// StartLogged starts a server with exactly cfg, logging to logger (for tests that
// read the log).
func StartLogged(t testing.TB, cfg config.Config, logger *slog.Logger) *Instance {
	t.Helper()
	srv, err := server.New(cfg, server.WithLogger(logger))
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &Instance{Server: srv, Config: cfg, GRPCAddr: srv.GRPCAddr(), HTTPAddr: srv.HTTPAddr(), cancel: cancel, done: make(chan error, 1)}
	go func() { in.done <- srv.Serve(ctx) }()
	c, err := client.Dial(ctx, in.GRPCAddr)
	if err != nil {
		cancel()
		t.Fatalf("client.Dial: %v", err)
	}
	in.Client = c
	t.Cleanup(func() { in.Stop(t) })
	return in
}

// Stop shuts the server down gracefully and waits for Serve to return. Safe to call twice.
func (in *Instance) Stop(t testing.TB) {
	t.Helper()
	if in.cancel == nil {
		return
	}
	_ = in.Client.Close()
	in.cancel()
	in.cancel = nil
	select {
	case err := <-in.done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(server.ShutdownTimeout + 5*time.Second):
		t.Errorf("server did not stop within %s", server.ShutdownTimeout+5*time.Second)
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
