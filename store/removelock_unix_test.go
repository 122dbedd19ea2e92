//go:build unix

package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRemoveImportLockLeavesAHeldLock: a failed first import removed the
// import lock file whatever held it; with another import holding it, a
// third import then created a new one and ran beside that import (found
// by review, h-review19). RemoveImportLock removes the file only when no
// import holds it.
func TestRemoveImportLockLeavesAHeldLock(t *testing.T) {
	catalog := filepath.Join(t.TempDir(), "catalog.db")
	lock := catalog + ".import.lock"
	unlock, err := lockFile(lock, catalog, time.Second) // an import running
	if err != nil {
		t.Fatal(err)
	}
	RemoveImportLock(catalog) // a failed import's cleanup
	if _, err := os.Lstat(lock); err != nil {
		t.Fatalf("the lock file an import holds was removed (%v)", err)
	}
	if u, err := lockFile(lock, catalog, 200*time.Millisecond); !errors.Is(err, ErrLocked) {
		if u != nil {
			u()
		}
		t.Fatalf("a third import while the first holds the lock: %v, want ErrLocked", err)
	}
	unlock()
	RemoveImportLock(catalog)
	if _, err := os.Lstat(lock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a lock file nobody holds was left (%v)", err)
	}
	RemoveImportLock(catalog) // missing: nothing to do
}
