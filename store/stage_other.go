//go:build !unix

package store

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// lockFile creates path exclusively, waiting up to timeout, and returns the
// function that removes it. Unlike flock(2) on unix, a crash leaves the file
// behind; remove it by hand once no import runs.
func lockFile(path, _ string, timeout time.Duration) (func(), error) {
	deadline := time.Now().Add(timeout)
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			f.Close()
			return func() { os.Remove(path) }, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("store: import lock: %w", pathless(err))
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w (another import is running, or a stale %s)", ErrLocked, path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// RemoveImportLock does nothing here: the file's existence is the lock,
// and a failed import that did not take it cannot tell whether another
// import holds it.
func RemoveImportLock(string) {}
