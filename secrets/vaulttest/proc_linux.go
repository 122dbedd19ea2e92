package vaulttest

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"time"
)

// sysProcAttr puts the server in its own process group (so signals reach it
// and anything it starts) and asks the kernel to SIGKILL it if the thread
// that started it dies, so a crashed or timed-out test binary leaks nothing.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// waitStopped waits until every thread of pid is stopped (state "T" in
// /proc/PID/task/*/stat) or the deadline passes: SIGSTOP is delivered
// asynchronously, and a request racing the signal could still be answered.
func waitStopped(pid int, deadline time.Time) error {
	for {
		stopped, err := allThreadsStopped(pid)
		if err != nil || stopped {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("vaulttest: process %d not stopped after SIGSTOP", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

func allThreadsStopped(pid int) (bool, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false, err
	}
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if err != nil {
			continue // the thread exited
		}
		// The state follows the parenthesized command name.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false, fmt.Errorf("vaulttest: malformed /proc stat")
		}
		if st := b[i+2]; st != 'T' && st != 't' {
			return false, nil
		}
	}
	return true, nil
}
