package vaulttest

import "syscall"

// sysProcAttr puts the server in its own process group (so signals reach it
// and anything it starts) and asks the kernel to SIGKILL it if the thread
// that started it dies, so a crashed or timed-out test binary leaks nothing.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
