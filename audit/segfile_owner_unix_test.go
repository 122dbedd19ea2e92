//go:build unix

package audit

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestNewSegmentBelongsToTheDirectorysOwner: run as root on a data
// directory of another account (a root 'custos sync' or auditor command
// on a new directory), the writer made D/audit.db root's, mode 0600, and
// 'custos serve' running as that account could not open its own log. A
// new segment file now takes its directory's owner; an existing one keeps
// its own (here root's, in the same directory).
func TestNewSegmentBelongsToTheDirectorysOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root gives a file to another account (not a pass)")
	}
	const uid, gid = 65534, 65534
	dir := t.TempDir()
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	owner := func(p string) (uint32, uint32) {
		t.Helper()
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		return st.Uid, st.Gid
	}
	path := filepath.Join(dir, "audit.db")
	l := mustOpenPath(t, path, Options{Node: "root-sync"})
	appendN(t, l, 2)
	if u, g := owner(path); u != uid || g != gid {
		t.Errorf("a new audit.db made by root in a directory of %d:%d is owned by %d:%d", uid, gid, u, g)
	}
	rollOrFail(t, l)
	if u, g := owner(path); u != uid || g != gid {
		t.Errorf("the segment after a seal, made by root, is owned by %d:%d, want %d:%d", u, g, uid, gid)
	}

	// An existing file keeps its owner.
	other := filepath.Join(t.TempDir(), "audit.db")
	l2, err := Open(other, Options{Node: "root"})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l2, 1)
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Dir(other), uid, gid); err != nil {
		t.Fatal(err)
	}
	l3 := mustOpenPath(t, other, Options{Node: "root"})
	appendN(t, l3, 1)
	if u, _ := owner(other); u != 0 {
		t.Errorf("an existing root-owned audit.db was given to %d", u)
	}
}
