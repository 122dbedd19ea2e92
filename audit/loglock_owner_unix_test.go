//go:build unix

package audit

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestLockFileBelongsToTheLogsOwner: the lock file is created by the first
// writer Open after an upgrade, and docs/operations.md lets root run the
// auditor commands on a stopped server. Created by root with mode 0600, it
// kept the log's owner out: 'custos serve' as that account then failed with
// "audit: lock file: open D/audit.db.lock: permission denied" (found by
// running 'custos audit verify' as root on a stopped server's data
// directory owned by another account, then serve as that account). A lock
// file a root Open creates or finds takes the live segment's owner.
func TestLockFileBelongsToTheLogsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root creates a file for another owner (not a pass)")
	}
	const uid, gid = 65534, 65534
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.db")
	l, err := Open(path, Options{Node: "server"})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 2)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A data directory of another account, from before the lock file.
	if err := os.Remove(LockFile(path)); err != nil {
		t.Fatal(err)
	}
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
	// One a root Open created earlier (before this fix) is given back.
	if err := os.Chown(LockFile(path), 0, 0); err != nil {
		t.Fatal(err)
	}
	l3, err := Open(path, Options{Node: "root-auditor"})
	if err != nil {
		t.Fatal(err)
	}
	l3.Close()
	if u, g := owner(); u != uid || g != gid {
		t.Errorf("root-owned lock file found by root's Open is owned by %d:%d, want the log's owner %d:%d", u, g, uid, gid)
	}
}
