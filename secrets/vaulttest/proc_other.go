//go:build unix && !linux

package vaulttest

import "syscall"

// sysProcAttr puts the server in its own process group so signals reach it
// and anything it starts.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
