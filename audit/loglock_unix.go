//go:build unix

package audit

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
//
// Its directory may be, while Open waits: custos restore --force renames
// the data directory aside and the restored one into its place. The lock
// taken is then that of the file opened before, now in the directory moved
// aside, while Open goes on to open the restored log by name, whose lock
// file another writer could take. So once locked, the file must still be
// the one at its name; if it is not, lockLog starts again on the file now
// there, within the same timeout.
func lockLog(path string, exclusive bool, timeout time.Duration) (release func(), err error) {
	deadline := time.Now().Add(timeout)
	for {
		release, err := lockLogFile(path, exclusive, time.Until(deadline), timeout)
		if !errors.Is(err, errStaleLock) {
			return release, err
		}
		if !time.Now().Before(deadline) { // replaced at every try: not forever
			return nil, fmt.Errorf("%w (waited %s for %s, which was replaced while it waited)", ErrLocked, timeout, LockFile(path))
		}
		time.Sleep(time.Millisecond)
	}
}

// errStaleLock is lockLogFile's error when the file it locked is no longer
// the one at its name (released again): lockLog tries again.
var errStaleLock = errors.New("audit: the lock file was moved while waiting")

// lockLogFile is one attempt of lockLog, waiting at most wait; its
// ErrLocked names lockLog's whole timeout.
func lockLogFile(path string, exclusive bool, wait, timeout time.Duration) (release func(), err error) {
	lp := LockFile(path)
	how := syscall.LOCK_SH
	// Not following a symbolic link, not waiting on a FIFO: the lock file
	// is in a directory its owner controls. A root writer followed a link
	// there, creating its target or opening another file, and gave that
	// file to the owner (giveToLogOwner); a reader hung in open(2) on a
	// FIFO.
	var f *os.File
	var created bool
	if exclusive {
		how = syscall.LOCK_EX
		f, created, err = regularfile.OpenCreate(lp, os.O_RDWR, 0o600, regularfile.NoFollow)
	} else {
		f, err = regularfile.Open(lp, os.O_RDONLY, 0, regularfile.NoFollow)
	}
	switch {
	case regularfile.IsNotRegular(err):
		return nil, notRegular(lp)
	case err != nil && exclusive:
		return nil, lockFileError(lp, err)
	case err != nil:
		return func() {}, nil
	}
	if created {
		giveToLogOwner(f, path)
	}
	unlock, err := flock.WaitAt(f, lp, how, wait)
	switch {
	case errors.Is(err, flock.ErrTimeout):
		f.Close()
		return nil, fmt.Errorf("%w (waited %s for %s)", ErrLocked, timeout, lp)
	case errors.Is(err, flock.ErrMoved):
		f.Close()
		return nil, errStaleLock
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("audit: lock file %s: %w", lp, err)
	}
	return func() {
		unlock()
		f.Close()
	}, nil
}

// giveToLogOwner gives lock file f, which this process has just created,
// to the owner of the live segment path (of its directory while there is
// none) when this process runs as root (owner.Match). A lock file that
// already existed keeps its owner: it may be a root file's second name,
// hard-linked there by the directory's owner and unlinked again once root
// had opened it, which left it one link when Match counted them (a root
// writer then gave that root file away). Root may run the auditor
// commands on a stopped server (docs/operations.md), and the first writer
// Open after an upgrade creates the lock file: created by root with mode
// 0600, it kept the log's owner out ('custos serve' as that account failed
// with "permission denied" on it). Where root may not chown (NFS with
// root_squash), the lock still works for this process, and a writer of
// another account that cannot open the file is told whose it is
// (lockFileError).
func giveToLogOwner(f *os.File, path string) { owner.Match(f, path) }

// notRegular is the error for a lock file that is a symbolic link, a FIFO,
// a device or a directory: custos creates it as an empty regular file, and
// opens nothing else in its place.
func notRegular(lp string) error {
	return fmt.Errorf("audit: lock file %s is not a regular file (a symbolic link, a FIFO, a device or a directory): custos creates it as an empty file; remove it (with no custos process running) and retry", lp)
}

// lockFileError is the error of a writer that cannot open lock file lp:
// for permission denied, whose file it is and what to do.
func lockFileError(lp string, err error) error {
	if !errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("audit: lock file: %w", err)
	}
	if fi, serr := os.Stat(lp); serr == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
			return fmt.Errorf("audit: lock file %s belongs to uid %d (mode %s), and this process runs as uid %d: give it to the account that runs custos serve (chown, as for the rest of the data directory): %w",
				lp, st.Uid, fi.Mode().Perm(), os.Geteuid(), err)
		}
	}
	return fmt.Errorf("audit: lock file: %w", err)
}
