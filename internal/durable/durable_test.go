package durable

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWriteFileReplacesWhole: the new content and mode replace the old,
// and no temporary file is left beside it.
func TestWriteFileReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	if err := WriteFile(p, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("new\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "new\n" {
		t.Fatalf("content %q, %v", b, err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o400 {
		t.Fatalf("mode %v, want 0400", fi.Mode().Perm())
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Fatalf("%d entries in the directory, want only the file", len(es))
	}
}

// TestWriteFileFailureLeavesOld: when the rename cannot happen (path is a
// non-empty directory), the old content stays and the temporary file is
// removed.
func TestWriteFileFailureLeavesOld(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x")
	if err := os.MkdirAll(filepath.Join(p, "child"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("data"), 0o600); err == nil {
		t.Fatal("WriteFile over a non-empty directory succeeded")
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Fatalf("%d entries left, want the directory alone", len(es))
	}
	if err := SyncDir(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("SyncDir of a missing directory succeeded")
	}
}

func TestPublishDir(t *testing.T) {
	parent := t.TempDir()
	build := func() string {
		t.Helper()
		tmp, err := os.MkdirTemp(parent, ".out.tmp-")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, "a.json"), []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return tmp
	}
	refuseNonEmpty := func(dst string) error {
		if es, err := os.ReadDir(dst); err == nil && len(es) > 0 {
			return errors.New("not empty")
		}
		return nil
	}
	dst := filepath.Join(parent, "out")

	// Missing destination: published whole.
	tmp := build()
	if err := PublishDir(tmp, dst, refuseNonEmpty); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "a.json")); err != nil || string(b) != "{}\n" {
		t.Fatalf("published file %q, %v", b, err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the temporary directory is still there: %v", err)
	}

	// A non-empty destination: the check refuses, nothing moves.
	tmp = build()
	if err := PublishDir(tmp, dst, refuseNonEmpty); err == nil || err.Error() != "not empty" {
		t.Fatalf("publishing over a non-empty directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "a.json")); err != nil {
		t.Fatalf("the refused temporary directory lost its file: %v", err)
	}
	os.RemoveAll(tmp)

	// An empty destination is replaced.
	empty := filepath.Join(parent, "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := PublishDir(build(), empty, refuseNonEmpty); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(empty, "a.json")); err != nil {
		t.Fatalf("the empty destination was not replaced: %v", err)
	}

	// A file at the destination is never removed, even without a check.
	file := filepath.Join(parent, "file")
	if err := os.WriteFile(file, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp = build()
	if err := PublishDir(tmp, file, nil); err == nil {
		t.Fatal("published over a regular file")
	}
	if b, _ := os.ReadFile(file); string(b) != "keep" {
		t.Fatalf("the file at the destination became %q", b)
	}
	os.RemoveAll(tmp)
}

// TestWriteFileKeepsTheOwner: run as root, a file replaced in another
// account's directory (a data directory's sync state, dev keys, a seal
// note; a token file installed root:custos) keeps that file's owner and
// group, and a new one takes the directory's: before, each became root's,
// mode 0600 or 0400, and the account serve runs as could no longer read
// it. Found by probe-ops (the token file).
func TestWriteFileKeepsTheOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a process run as root writes files of another account")
	}
	const nobody = 65534
	dir := t.TempDir()
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	owner := func(p string) (uint32, uint32) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		return st.Uid, st.Gid
	}
	p := filepath.Join(dir, "sync-x.json")
	if err := WriteFile(p, []byte("new\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if u, g := owner(p); u != nobody || g != nobody {
		t.Errorf("a new file in a directory of %d: owner %d:%d", nobody, u, g)
	}
	if err := os.Chown(p, 0, nobody); err != nil { // root:custos, as installed
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("again\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if u, g := owner(p); u != 0 || g != nobody {
		t.Errorf("a replaced file of 0:%d: owner %d:%d", nobody, u, g)
	}
}
