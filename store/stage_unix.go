//go:build unix

package store

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockFile takes an exclusive flock(2) on path (created if missing),
// waiting up to timeout, and returns the function that releases it. The
// lock dies with the process, so a crashed import leaves none behind.
func lockFile(path string, timeout time.Duration) (func(), error) {
	// O_NOFOLLOW: the lock file is in a directory its owner controls, and
	// an import run as root created the target of a symbolic link there.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			return nil, errors.New("store: import lock: the lock file beside the catalog is a symbolic link: custos creates it as an empty file; remove it (with no import running) and retry")
		}
		return nil, fmt.Errorf("store: import lock: %w", pathless(err))
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("store: import lock: %w", err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%w (another import is running)", ErrLocked)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
