//go:build linux

package store

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestImportLockWaitingWhileTheDirectoryIsReplaced: an import waiting for
// the import lock while the data directory is swapped for another (custos
// restore --force renames D aside and the restored directory to D) must
// end up holding the lock of D as it is now: it goes on to copy and replace
// D/catalog.db by name. It locked the file it had opened before the swap,
// in the directory moved aside, so a second import on the restored D could
// run at the same time and one of the two imports' catalogs was lost to
// the other's rename, both reporting success. (Found by probe-chaos beside
// the same fault of the audit log's lock file.)
func TestImportLockWaitingWhileTheDirectoryIsReplaced(t *testing.T) {
	root := t.TempDir()
	d, restored := filepath.Join(root, "data"), filepath.Join(root, "restored")
	for _, dir := range []string{d, restored} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "catalog.db.import.lock"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	lock := filepath.Join(d, "catalog.db.import.lock")
	first, err := lockFile(lock, filepath.Join(d, "catalog.db"), time.Second) // an import running on D
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan func(), 1)
	go func() {
		unlock, err := lockFile(lock, filepath.Join(d, "catalog.db"), 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- unlock
	}()
	for deadline := time.Now().Add(10 * time.Second); openCount(t, lock) < 2; {
		if time.Now().After(deadline) {
			t.Fatal("the second import did not open the lock file")
		}
		time.Sleep(time.Millisecond)
	}
	if err := os.Rename(d, d+".replaced"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(restored, d); err != nil {
		t.Fatal(err)
	}
	first()
	unlock := <-got
	if unlock == nil {
		t.FailNow()
	}
	defer unlock()
	f, err := os.OpenFile(lock, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("D's import lock is free (flock: %v) while an import holds the lock of the directory moved aside", err)
	}
}

// openCount is how many descriptors of this process are open on path.
func openCount(t *testing.T, path string) int {
	t.Helper()
	des, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, de := range des {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", de.Name())); err == nil && target == path {
			n++
		}
	}
	return n
}
