package server

import (
	"io"
	"log/slog"

	"github.com/agentplane/agentplane/server/config"
)

// NewLogger builds the structured logger described by cfg (text or JSON, with level).
func NewLogger(w io.Writer, cfg config.Log) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Level))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
