//go:build unix

package owner

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// nobody is the account the tests give the data directory to.
const nobody = 65534

func ownerOf(t *testing.T, path string) (uid, gid uint32) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid
}

// TestMatch: run as root, a file created beside another account's file
// (or in its directory, when the file does not exist yet) is given to that
// account; a file with a second name is left as it is.
func TestMatch(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("Match changes owners only when run as root (it does nothing otherwise)")
	}
	dir := t.TempDir()
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}

	// No file of that name yet: the directory's owner.
	f, err := os.CreateTemp(dir, ".scratch-*")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	Match(f, filepath.Join(dir, "catalog.db"))
	if uid, gid := ownerOf(t, f.Name()); uid != nobody || gid != nobody {
		t.Fatalf("beside no file in a directory of %d: owner %d:%d, want %d:%d", nobody, uid, gid, nobody, nobody)
	}

	// The file it replaces decides, not the directory.
	ref := filepath.Join(dir, "catalog.db")
	if err := os.WriteFile(ref, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(ref, nobody, 0); err != nil {
		t.Fatal(err)
	}
	g, err := os.CreateTemp(dir, ".scratch-*")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	Match(g, ref)
	if uid, gid := ownerOf(t, g.Name()); uid != nobody || gid != 0 {
		t.Fatalf("beside a file of %d:0: owner %d:%d", nobody, uid, gid)
	}

	// A second name (a hard link planted in the directory) keeps it root's.
	h, err := os.CreateTemp(dir, ".scratch-*")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := os.Link(h.Name(), filepath.Join(dir, "planted")); err != nil {
		t.Fatal(err)
	}
	Match(h, ref)
	if uid, _ := ownerOf(t, h.Name()); uid != 0 {
		t.Fatalf("a file with two names was given to %d", uid)
	}
}

// TestTree: run as root, a directory and everything in it take ref's owner;
// a symbolic link in it is given away itself, never its target.
func TestTree(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("Tree changes owners only when run as root (it does nothing otherwise)")
	}
	ref := t.TempDir()
	if err := os.Chown(ref, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "root-file")
	if err := os.WriteFile(outside, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "audit.sealed"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"audit.db", "audit.sealed/000001.db"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	Tree(dir, ref)
	for _, p := range []string{dir, filepath.Join(dir, "audit.db"), filepath.Join(dir, "audit.sealed"), filepath.Join(dir, "audit.sealed/000001.db")} {
		if uid, gid := ownerOf(t, p); uid != nobody || gid != nobody {
			t.Errorf("%s: owner %d:%d, want %d:%d", p, uid, gid, nobody, nobody)
		}
	}
	if uid, _ := ownerOf(t, outside); uid != 0 {
		t.Errorf("the target of a link in the tree was given to %d", uid)
	}
}
