//go:build linux

package storetest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// SmallDisk mounts a tmpfs of size bytes on a fresh directory for the test and
// returns the directory; the mount goes away when the test ends (after the cleanups
// registered later, such as a server's started on it). It skips the test where
// mounting is not permitted (not root, or no CAP_SYS_ADMIN).
func SmallDisk(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)); err != nil {
		t.Skipf("cannot mount a %d-byte tmpfs for the disk-full test (needs root or CAP_SYS_ADMIN): %v", size, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting the test tmpfs %s: %v", dir, err)
		}
	})
	return dir
}

// FillDisk writes a file in dir (on a SmallDisk) until the file system is full and
// returns its path: removing the file frees the space again.
func FillDisk(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	// Halving the writes once one fails takes what is left of a partly used page.
	for n, total := len(chunk), 0; n > 0; {
		_, err := f.Write(chunk[:n])
		switch {
		case errors.Is(err, syscall.ENOSPC):
			n /= 2
		case err != nil:
			t.Fatalf("filling %s: %v", dir, err)
		}
		if total += n; total > 1<<30 {
			t.Fatalf("wrote 1 GiB to %s without filling it: not a SmallDisk?", dir)
		}
	}
	return path
}
