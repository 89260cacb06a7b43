//go:build linux

package boltstore

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockFile takes an exclusive flock on path, the lock of storePath, retrying until
// timeout. The write-ahead
// log mode needs it because recovery rewrites the store file before bbolt (which holds
// its own lock on that file) can open it.
func lockFile(path, storePath string, timeout time.Duration) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			_ = f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w: could not lock %s (%s) within %s; is another agentplane process using this data directory?",
					ErrLocked, storePath, path, timeout)
			}
			return nil, err
		}
		time.Sleep(50 * time.Millisecond) // bbolt polls its own lock the same way
	}
}

// fdatasync flushes f's data and the metadata needed to read it back (its size), not
// its timestamps: one device flush, as bbolt does for its own file.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
