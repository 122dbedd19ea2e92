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

// ErrMoved is WaitAt's error when the file it locked no longer has the
// path it was opened by.
var ErrMoved = errors.New("flock: the locked file was moved or removed while waiting")

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

// WaitAt is Wait for f, opened by path, and then checks that path still
// names f: a lock file's directory may be renamed while a process waits
// (custos restore --force swaps the data directory), and the lock then
// taken is that of a file in the directory moved aside, while the caller
// goes on with what is now at path. If path no longer names f (moved,
// removed, replaced, or now a symbolic link), the lock is released and
// WaitAt fails with ErrMoved; the caller opens path again and retries.
func WaitAt(f *os.File, path string, how int, timeout time.Duration) (unlock func(), err error) {
	unlock, err = Wait(f, how, timeout)
	if err != nil {
		return nil, err
	}
	locked, err := f.Stat()
	if err != nil {
		unlock()
		return nil, err
	}
	if now, err := os.Lstat(path); err != nil || !os.SameFile(locked, now) {
		unlock()
		return nil, ErrMoved
	}
	return unlock, nil
}
