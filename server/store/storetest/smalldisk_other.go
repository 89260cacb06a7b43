//go:build !linux

package storetest

import "testing"

// SmallDisk skips the test: mounting a small file system for disk-full tests is
// implemented on Linux only.
func SmallDisk(t testing.TB, size int64) string {
	t.Skip("disk-full tests mount a tmpfs: Linux only")
	return ""
}

// FillDisk is not reached (SmallDisk skips).
func FillDisk(t testing.TB, dir string) string {
	t.Skip("disk-full tests mount a tmpfs: Linux only")
	return ""
}
