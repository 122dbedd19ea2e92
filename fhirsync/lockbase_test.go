package fhirsync

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSyncLockIsNotASymlink: the sync lock file sits in the data
// directory, its owner's. Opened with O_CREATE, a symbolic link there had
// a sync run as root create the link's target. It is no longer followed,
// and the error says what is wrong. Found by review (h-review16), beside
// the audit lock file's.
func TestSyncLockIsNotASymlink(t *testing.T) {
	dir := t.TempDir()
	const base = "https://ehr.example/fhir"
	target := filepath.Join(t.TempDir(), "nologin")
	p := statePath(dir, base)
	if err := os.Symlink(target, strings.TrimSuffix(p, ".json")+".lock"); err != nil {
		t.Fatal(err)
	}
	unlock, err := lockBase(dir, base)
	if err == nil {
		unlock()
		t.Errorf("lockBase took a lock file that is a symbolic link")
	} else if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Errorf("lockBase: %v, want ErrBadConfig saying the lock file is a symbolic link", err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lockBase created the symbolic link's target (%v)", err)
	}
}
