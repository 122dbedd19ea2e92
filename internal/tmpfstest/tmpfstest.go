// Package tmpfstest gives a test a small file system that really fills up:
// a tmpfs of a chosen size mounted for the test alone, and a filler that
// takes all of its free space but what the test leaves. With it a test sees
// what a full disk does to custos's files (ENOSPC, short writes) through
// the real kernel, without a fake file system.
//
// Mounting needs root (CAP_SYS_ADMIN) on Linux. Without it the test fails
// under CI=true (a missing dependency must not pass as a skip) and is
// skipped otherwise, as the e2e tests do for their dependencies.
package tmpfstest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/custos-mcp/custos/internal/fsspace"
)

// Mount mounts a tmpfs of size bytes on a new directory under
// t.TempDir() and returns that directory; a cleanup unmounts it (lazily if
// a file on it is still open).
func Mount(t testing.TB, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		hint := fmt.Sprintf("cannot mount a tmpfs (%v): this test fills a small file system and needs root", err)
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (CI=true: a missing dependency fails)", hint)
		}
		t.Skip(hint)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		}
	})
	return dir
}

// Free returns the bytes free on dir's file system for an unprivileged
// writer (fsspace.Free: statfs f_bavail in fragments).
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	n, err := fsspace.Free(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Fill allocates a file in dir that takes all the free space of dir's
// file system but leave bytes (rounded down to its blocks), and returns
// its path: remove it to give the space back.
func Fill(t testing.TB, dir string, leave int64) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := Free(t, dir) - leave; n > 0 {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, n); err != nil {
			t.Fatalf("fill %s with %d bytes: %v", dir, n, err)
		}
	}
	if free := Free(t, dir); free > leave {
		t.Fatalf("fill %s: %d bytes still free, want at most %d", dir, free, leave)
	}
	return path
}
