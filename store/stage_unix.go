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
	"github.com/custos-mcp/custos/internal/regularfile"
)

// lockFile takes an exclusive flock(2) on path (created if missing),
// waiting up to timeout, and returns the function that releases it. The
// lock dies with the process, so a crashed import leaves none behind.
// Run as root, it gives a file it creates to the owner of ref (the catalog, or its
// directory while there is none): created by root with mode 0600, it kept
// that account's later imports out.
func lockFile(path, ref string, timeout time.Duration) (func(), error) {
	// Not following a symbolic link: the lock file is in a directory its
	// owner controls, and an import run as root created the target of a
	// symbolic link there. Given away only if this call created it: an
	// existing one may be a root file's second name (see
	// regularfile.OpenCreate).
	f, created, err := regularfile.OpenCreate(path, os.O_RDWR, 0o600, regularfile.NoFollow)
	var nr *regularfile.NotRegularError
	if errors.As(err, &nr) {
		return nil, fmt.Errorf("store: import lock: the lock file beside the catalog is %s, not a regular file: custos creates it as an empty file; remove it (with no import running) and retry", nr.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("store: import lock: %w", pathless(err))
	}
	if created {
		owner.Match(f, ref)
	}
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
