//go:build unix

package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestImportLockIsNotASymlink: the import lock file sits in the data
// directory, its owner's. Opened with O_CREATE, a symbolic link there had
// an import run as root create the link's target (any path: an empty
// /etc/nologin keeps every other account out). It is no longer followed,
// and the error says what is wrong.
// Found by review (h-review16), beside the audit lock file's.
func TestImportLockIsNotASymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "nologin")
	lock := filepath.Join(dir, "catalog.db.import.lock")
	if err := os.Symlink(target, lock); err != nil {
		t.Fatal(err)
	}
	unlock, err := lockFile(lock, filepath.Join(dir, "catalog.db"), time.Second)
	if err == nil {
		unlock()
		t.Errorf("lockFile took a lock file that is a symbolic link")
	} else if !strings.Contains(err.Error(), "is a symbolic link") {
		t.Errorf("lockFile: %v, want it to say the lock file is a symbolic link", err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lockFile created the symbolic link's target (%v)", err)
	}
}
