//go:build unix

package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLockFileBelongsToTheLogsOwner: the lock file is created by the first
// writer Open after an upgrade, and docs/operations.md lets root run the
// auditor commands on a stopped server. Created by root with mode 0600, it
// kept the log's owner out: 'custos serve' as that account then failed with
// "audit: lock file: open D/audit.db.lock: permission denied" (found by
// running 'custos audit verify' as root on a stopped server's data
// directory owned by another account, then serve as that account). A lock
// file a root Open creates takes the live segment's owner (one it finds
// keeps its own: TestExistingLockFileKeepsItsOwner).
func TestLockFileBelongsToTheLogsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root creates a file for another owner (not a pass)")
	}
	const uid, gid = 65534, 65534
	// A data directory of another account, from before the lock file.
	dir, path := logWithoutLockFile(t)
	for _, p := range []string{dir, path} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	owner := func() (int, int) {
		t.Helper()
		fi, err := os.Stat(LockFile(path))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		return int(st.Uid), int(st.Gid)
	}
	l2, err := Open(path, Options{Node: "root-auditor"})
	if err != nil {
		t.Fatal(err)
	}
	l2.Close()
	mustVerify(t, path)
	if u, g := owner(); u != uid || g != gid {
		t.Errorf("lock file created by root's Open is owned by %d:%d, want the log's owner %d:%d", u, g, uid, gid)
	}
}

// TestExistingLockFileKeepsItsOwner: a root writer gave a lock file it
// found, not created, to the log's owner whenever it had one link. The
// data directory is that owner's: it can hard-link a root file there
// (where fs.protected_hardlinks is off; macOS and the BSDs have no such
// switch) and unlink that name once root has opened it, so that the link
// count Match read was one again, and root gave the root file away. The
// root-owned one-link file here is what root's descriptor then named.
// Found by review (h-review17); fails on the old code.
func TestExistingLockFileKeepsItsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root chowns another account's file (not a pass)")
	}
	const uid, gid = 65534, 65534
	dir, path := logWithoutLockFile(t)
	if err := os.WriteFile(LockFile(path), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, path} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	l, err := Open(path, Options{Node: "root-auditor"})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	fi, err := os.Stat(LockFile(path))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || st.Gid != 0 {
		t.Errorf("a lock file root's Open found (a root file) was given to %d:%d", st.Uid, st.Gid)
	}
}

// TestLockFileSymlinkIsNotFollowed: the data directory is its owner's,
// and so is what D/audit.db.lock is. A root writer Open (an auditor command
// on a stopped server) opened the lock file with O_CREATE, following a
// symbolic link there, and then gave the file it opened to audit.db's
// owner: the owner of the data directory could make root create any file
// (a dangling link to /etc/cron.d/x) or take any root file (a link to
// /etc/shadow) and have it chowned to them. Found by review (h-review16).
// The writer now refuses a lock file that is not a regular file, creates
// nothing through a link, and gives nothing away. The refusal and the
// target not created are checked for any account; the chown only as root
// (only root can give a file away), with the data directory then another
// account's.
func TestLockFileSymlinkIsNotFollowed(t *testing.T) {
	root := os.Geteuid() == 0
	const uid, gid = 65534, 65534
	victims := t.TempDir() // this process's (root's, as root)
	shadow := filepath.Join(victims, "shadow")
	if err := os.WriteFile(shadow, []byte("root:secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantUID, wantGID := uint32(os.Geteuid()), uint32(os.Getegid())
	absent := filepath.Join(victims, "cron-job")
	for name, target := range map[string]string{"existing root file": shadow, "dangling link": absent} {
		t.Run(name, func(t *testing.T) {
			dir, path := logWithoutLockFile(t)
			// The data directory's owner replaces the lock file.
			if err := os.Symlink(target, LockFile(path)); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{dir, path} {
				if !root {
					break
				}
				if err := os.Lchown(p, uid, gid); err != nil {
					t.Fatal(err)
				}
			}
			l2, err := Open(path, Options{Node: "root-auditor"})
			if err == nil {
				l2.Close()
				t.Errorf("Open with a lock file that is a symbolic link succeeded")
			} else if !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("Open: %v, want it to say the lock file is not a regular file", err)
			}
			if fi, err := os.Stat(shadow); err != nil {
				t.Fatal(err)
			} else if st := fi.Sys().(*syscall.Stat_t); st.Uid != wantUID || st.Gid != wantGID {
				t.Errorf("the link's target %s was given to %d:%d", shadow, st.Uid, st.Gid)
			}
			if _, err := os.Lstat(absent); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("root created the dangling link's target %s (%v)", absent, err)
			}
			// A reader neither follows it nor hangs.
			if r, err := Open(path, Options{Node: "reader", ReadOnly: true}); err == nil {
				r.Close()
				t.Errorf("read-only Open with a lock file that is a symbolic link succeeded")
			}
		})
	}
}

// TestLockFileHardLinkIsNotGiven: a lock file with another name elsewhere
// (a hard link to a root file, where fs.protected_hardlinks is off) is
// not the lock file root created: a root writer gives it to nobody.
func TestLockFileHardLinkIsNotGiven(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root chowns another account's file (not a pass)")
	}
	const uid, gid = 65534, 65534
	victim := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(victim, []byte("root:secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir, path := logWithoutLockFile(t)
	if err := os.Link(victim, LockFile(path)); err != nil {
		t.Skipf("cannot hard-link across these directories (%v): not a pass", err)
	}
	for _, p := range []string{dir, path} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if l2, err := Open(path, Options{Node: "root-auditor"}); err == nil {
		l2.Close()
	}
	fi, err := os.Stat(victim)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || st.Gid != 0 {
		t.Errorf("a hard-linked lock file (a root file's other name) was given to %d:%d", st.Uid, st.Gid)
	}
}

// TestLockFileFIFODoesNotHang: a reader opened the lock file with open(2),
// which waits for a writer on a FIFO: an auditor command on a data
// directory whose audit.db.lock was a FIFO hung. Both opens now refuse it.
func TestLockFileFIFODoesNotHang(t *testing.T) {
	_, path := logWithoutLockFile(t)
	if err := syscall.Mkfifo(LockFile(path), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{true, false} {
		done := make(chan error, 1)
		go func() {
			l, err := Open(path, Options{Node: "auditor", ReadOnly: ro})
			if err == nil {
				l.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("Open (read-only %v) with a FIFO for its lock file: %v, want it refused as not a regular file", ro, err)
			}
		case <-time.After(5 * time.Second):
			// Let the hung open return so that the test can end.
			if w, err := os.OpenFile(LockFile(path), os.O_WRONLY, 0); err == nil {
				w.Close()
			}
			<-done
			t.Errorf("Open (read-only %v) with a FIFO for its lock file hung", ro)
		}
	}
}

// logWithoutLockFile writes a log of two records in a new directory and
// removes its lock file, for a test to put something else in its place.
func logWithoutLockFile(t *testing.T) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(dir, "audit.db")
	l, err := Open(path, Options{Node: "server"})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 2)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(LockFile(path)); err != nil {
		t.Fatal(err)
	}
	return dir, path
}
