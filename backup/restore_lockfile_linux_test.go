//go:build linux

package backup_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/backup"
)

// TestRestoreHoldsALogWithoutItsLockFile: a data directory whose log has
// no lock file yet (written by a custos that predates it) is held by the
// read-only log only through bbolt's lock on audit.db. A serve started
// during the restore created the lock file, took it at once, and waited
// for bbolt's lock on the audit.db it had opened by name before the swap;
// released by the swap, it then opened the restored log by name, and
// served it holding the lock file of the directory moved aside: the
// restored log's own lock file stayed free for a second writer.
func TestRestoreHoldsALogWithoutItsLockFile(t *testing.T) {
	ctx := context.Background()
	d := newDataDir(t, 5, 5)
	from := d.saved(t)
	to := t.TempDir()
	path := filepath.Join(to, backup.FileAudit)
	l, err := audit.Open(path, audit.Options{Node: "old"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(audit.LockFile(path)); err != nil {
		t.Fatal(err)
	}
	o := d.restoreOptions(from, to)
	o.Force = true
	var opened chan *audit.Log
	o.Progress = func(p backup.Progress) {
		if opened != nil || p.Step != backup.StepCopy {
			return
		}
		// A serve starting now; it waits across the swap.
		opened = make(chan *audit.Log, 1)
		go func() {
			w, err := audit.Open(path, audit.Options{Node: "serve", Timeout: 10 * time.Second})
			if err != nil {
				t.Log(err)
			}
			opened <- w
		}()
		// Until it waits on the lock file or on audit.db itself.
		for deadline := time.Now().Add(5 * time.Second); openCount(t, audit.LockFile(path))+openCount(t, path) < 3; {
			if time.Now().After(deadline) {
				t.Error("the writer did not open the log")
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	if _, err := backup.Restore(ctx, o); err != nil {
		t.Fatal(err)
	}
	audittest.VerifyOnCleanup(t, path)
	if opened == nil {
		t.Fatal("no copy progress was reported: the test tried nothing")
	}
	w := <-opened
	if w == nil {
		return // refused: it served nothing
	}
	defer w.Close()
	f, err := os.OpenFile(audit.LockFile(path), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("a writer opened the restored log while its lock file is free (flock: %v): it holds the lock of the directory moved aside", err)
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
