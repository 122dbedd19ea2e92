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
//
// The data directory may be swapped while it waits (custos restore --force
// renames it aside and the restored one into its place): the file locked
// is then the one in the directory moved aside, while the import goes on
// with the catalog at its name, whose lock another import could take. So
// once locked, the file must still be the one at path; if not, lockFile
// starts again on the file now there, within the same timeout.
func lockFile(path, ref string, timeout time.Duration) (func(), error) {
	deadline := time.Now().Add(timeout)
	for {
		unlock, err := lockFileOnce(path, ref, time.Until(deadline))
		if !errors.Is(err, errStaleLock) {
			return unlock, err
		}
		if !time.Now().Before(deadline) { // replaced at every try: not forever
			return nil, fmt.Errorf("%w (the import lock was replaced while waiting)", ErrLocked)
		}
		time.Sleep(time.Millisecond)
	}
}

// errStaleLock is lockFileOnce's error when the file it locked is no
// longer the one at its name (released again): lockFile tries again.
var errStaleLock = errors.New("store: import lock: the lock file was moved while waiting")

// lockFileOnce is one attempt of lockFile.
func lockFileOnce(path, ref string, timeout time.Duration) (func(), error) {
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
	unlock, err := flock.WaitAt(f, path, syscall.LOCK_EX, timeout)
	switch {
	case errors.Is(err, flock.ErrTimeout):
		f.Close()
		return nil, fmt.Errorf("%w (another import is running)", ErrLocked)
	case errors.Is(err, flock.ErrMoved):
		f.Close()
		return nil, errStaleLock // moved or removed: try the file now at path
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("store: import lock: %w", pathless(err))
	}
	return func() {
		unlock()
		f.Close()
	}, nil
}

// RemoveImportLock removes the import lock file beside the catalog at
// catalogPath if no import holds it: a failed first import leaves no
// trace, but removing a lock another import held let a third import take
// a new one and run beside it (h-review19). It takes the lock without
// waiting, removes the file while holding it (an import that opened it
// meanwhile finds it moved once locked, and starts again on a new one),
// then releases it. A held or missing lock file is left as it is.
func RemoveImportLock(catalogPath string) {
	path := catalogPath + ".import.lock"
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer f.Close()
	unlock, err := flock.Wait(f, syscall.LOCK_EX, 0) // one try, no wait
	if err != nil {
		return // held by an import
	}
	defer unlock()
	os.Remove(path)
}
