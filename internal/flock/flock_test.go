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
