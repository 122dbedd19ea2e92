//go:build unix

package audit

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockLog takes the log's lock file (LockFile(path)): exclusively for the
// writer, creating the file; shared for a reader, and only when the file
// exists and opens (a reader of a copy on a read-only mount, or of another
// account's directory, relies on bbolt's own lock as before). It waits at
// most timeout, then fails with ErrLocked. release unlocks and closes it.
//
// bbolt's own lock is on the live segment's inode, which sealing renames
// away: an Open that opened audit.db just before a roll, and waited for
// bbolt's lock on it, got that lock as soon as the running writer closed
// the sealed file, and took the running writer's files for an interrupted
// seal (recoverSeal), renaming a new segment over the live one the writer
// was still appending to. The lock file is never renamed.
func lockLog(path string, exclusive bool, timeout time.Duration) (release func(), err error) {
	lp := LockFile(path)
	var f *os.File
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
		f, err = os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("audit: lock file: %w", err)
		}
	} else if f, err = os.Open(lp); err != nil {
		return func() {}, nil
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("audit: lock file %s: %w", lp, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%w (waited %s for %s)", ErrLocked, timeout, lp)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
