//go:build !linux

package boltstore

import (
	"os"
	"time"
)

// lockFile only creates the file: bbolt's own lock on the store file is the guard.
func lockFile(path, _ string, _ time.Duration) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
}

func fdatasync(f *os.File) error { return f.Sync() }
