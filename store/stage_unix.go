//go:build unix

package store

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/custos-mcp/custos/internal/flock"
	"github.com/custos-mcp/custos/internal/owner"
)

// lockFile takes an exclusive flock(2) on path (created if missing),
// waiting up to timeout, and returns the function that releases it. The
// lock dies with the process, so a crashed import leaves none behind.
// Run as root, it gives the file to the owner of ref (the catalog, or its
// directory while there is none): created by root with mode 0600, it kept
// that account's later imports out.
func lockFile(path, ref string, timeout time.Duration) (func(), error) {
	// O_NOFOLLOW: the lock file is in a directory its owner controls, and
	// an import run as root created the target of a symbolic link there.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			return nil, errors.New("store: import lock: the lock file beside the catalog is a symbolic link: custos creates it as an empty file; remove it (with no import running) and retry")
		}
		return nil, fmt.Errorf("store: import lock: %w", pathless(err))
	}
	owner.Match(f, ref)
	unlock, err := flock.Wait(f, syscall.LOCK_EX, timeout)
	switch {
	case errors.Is(err, flock.ErrTimeout):
		f.Close()
		return nil, fmt.Errorf("%w (another import is running)", ErrLocked)
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("store: import lock: %w", err)
	}
	return func() {
		unlock()
		f.Close()
	}, nil
}
