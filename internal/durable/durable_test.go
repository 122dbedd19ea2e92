package durable

import (
	"os"
	"path/filepath"
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
