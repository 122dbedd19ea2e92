//go:build unix

// Package flock waits, up to a deadline, for an advisory flock(2) lock on
// an open file: the import's, the audit log's lock files. The lock dies
// with the process (or the file's last descriptor), so a crashed holder
// leaves none behind.
package flock

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// ErrTimeout is Wait's error when the lock was still held by another
// open file at the deadline.
var ErrTimeout = errors.New("flock: still held at the deadline")

// poll is how often Wait tries again.
const poll = 50 * time.Millisecond

// Wait takes lock how (syscall.LOCK_EX or syscall.LOCK_SH) on f, trying
// again every 50 ms until timeout has passed; then it fails with
// ErrTimeout. Any other error of flock(2) is returned at once. On success,
// unlock releases the lock (it does not close f).
func Wait(f *os.File, how int, timeout time.Duration) (unlock func(), err error) {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, ErrTimeout
		}
		time.Sleep(poll)
	}
}
