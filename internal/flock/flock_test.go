//go:build unix

package flock

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestWait: a lock held through another open file makes Wait fail with
// ErrTimeout after its timeout (not before), an exclusive lock excludes a
// shared one, two shared locks coexist, and an unlocked file is taken at
// once.
func TestWait(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	open := func() *os.File {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	a, b := open(), open()
	unlock, err := Wait(a, syscall.LOCK_EX, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := Wait(b, syscall.LOCK_SH, 200*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("shared lock beside an exclusive one: %v, want ErrTimeout", err)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("gave up after %v, before its 200ms", took)
	}
	unlock()
	u1, err := Wait(a, syscall.LOCK_SH, 0)
	if err != nil {
		t.Fatal(err)
	}
	u2, err := Wait(b, syscall.LOCK_SH, 0)
	if err != nil {
		t.Fatalf("two shared locks: %v", err)
	}
	if _, err := Wait(open(), syscall.LOCK_EX, 0); !errors.Is(err, ErrTimeout) {
		t.Fatalf("exclusive lock beside two shared ones: %v, want ErrTimeout", err)
	}
	u1()
	u2()
	if _, err := Wait(open(), syscall.LOCK_EX, 0); err != nil {
		t.Fatalf("exclusive lock once released: %v", err)
	}
}

// TestWaitAt: a lock taken on a file no longer at the path it was opened
// by (renamed away while waiting, as a data directory swap does) is
// released and refused with ErrMoved; at its path it is kept.
func TestWaitAt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	unlock, err := WaitAt(f, path, syscall.LOCK_EX, time.Second)
	if err != nil {
		t.Fatalf("WaitAt on the file at its path: %v", err)
	}
	unlock()
	if err := os.Rename(path, filepath.Join(dir, "aside.lock")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil { // the new directory's file
		t.Fatal(err)
	}
	if u, err := WaitAt(f, path, syscall.LOCK_EX, time.Second); !errors.Is(err, ErrMoved) {
		if u != nil {
			u()
		}
		t.Fatalf("WaitAt on a file moved aside: %v, want ErrMoved", err)
	}
	// Released: another descriptor takes the moved file's lock at once.
	g, err := os.Open(filepath.Join(dir, "aside.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := syscall.Flock(int(g.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("the moved file's lock was kept after ErrMoved: %v", err)
	}
}
