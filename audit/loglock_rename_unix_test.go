//go:build linux

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

// TestOpenWaitingWhileTheDirectoryIsReplaced: a writer Open that waits
// for the lock while the data directory is swapped for another (custos
// restore --force renames D aside and the restored directory to D) must
// end up holding the lock of the log it opens, D's new one. It locked the
// file it had opened before the swap, in the directory moved aside, and
// then opened D/audit.db by name: probe-chaos found a `custos serve`
// started during a restore serving with its lock in D.replaced-TIME and its
// log in the restored D, where a second writer could take the lock.
func TestOpenWaitingWhileTheDirectoryIsReplaced(t *testing.T) {
	root := t.TempDir()
	d, restored := filepath.Join(root, "data"), filepath.Join(root, "restored")
	for _, dir := range []string{d, restored} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		l, err := Open(filepath.Join(dir, "audit.db"), Options{Node: "test"})
		if err != nil {
			t.Fatal(err)
		}
		appendN(t, l, 2)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(d, "audit.db")
	// The restore: it holds D's log read-only (its lock shared).
	r, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan *Log, 1)
	go func() {
		w, err := Open(path, Options{Node: "test", Timeout: 10 * time.Second})
		if err != nil {
			t.Error(err)
		}
		opened <- w
	}()
	// Until the writer has the lock file open (and waits for the lock).
	lp := LockFile(path)
	for deadline := time.Now().Add(10 * time.Second); openCount(t, lp) < 2; {
		if time.Now().After(deadline) {
			t.Fatal("the writer did not open the lock file")
		}
		time.Sleep(time.Millisecond)
	}
	if err := os.Rename(d, d+".replaced"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(restored, d); err != nil {
		t.Fatal(err)
	}
	r.Close()
	w := <-opened
	if w == nil {
		t.FailNow()
	}
	defer w.Close()
	// The writer must hold D's (new) lock file: another writer is refused.
	f, err := os.OpenFile(lp, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("the lock file of the log the writer opened is free (flock: %v): the writer holds the lock of the directory moved aside", err)
	}
	if h, _ := w.Head(); h != 2 {
		t.Fatalf("head %d", h)
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

// TestLockedNamesTheWholeWait: ErrLocked says how long Open waited as the
// timeout it was given ("waited 100ms"), not what was left of it on the
// last attempt (the first version of the retry above said "waited
// 1.99998934s", seen by probe-chaos).
func TestLockedNamesTheWholeWait(t *testing.T) {
	l, path := mustOpen(t, Options{})
	defer l.Close()
	_, err := Open(path, Options{Node: "test", Timeout: 100 * time.Millisecond})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "(waited 100ms for ") {
		t.Fatalf("Open beside a writer: %v, want ErrLocked saying it waited 100ms", err)
	}
}
