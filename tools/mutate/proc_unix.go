//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// setProcessGroup runs cmd in its own process group and, when its context ends,
// kills the group: go test's child, the test binary, goes too.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
