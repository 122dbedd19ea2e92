//go:build unix && !linux

package vaulttest

import (
	"syscall"
	"time"
)

// sysProcAttr puts the server in its own process group so signals reach it
// and anything it starts.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitStopped is a short grace period where /proc is not available.
func waitStopped(int, time.Time) error {
	time.Sleep(50 * time.Millisecond)
	return nil
}
