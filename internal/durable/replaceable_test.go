//go:build unix

package durable

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// WriteFile renamed its new file over whatever path named: run as root
// with -o /dev/null it replaced the system's /dev/null with a regular file
// (2026-12-06). A FIFO stands in for the device here: it must be refused,
// left as it was, and nothing left beside it; a regular file and a new
// path are written as before.
func TestWriteFileRefusesWhatIsNoRegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link-to-fifo")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, link, dir} {
		err := WriteFile(p, []byte("x"), 0o600)
		var nr *NotRegularError
		if !errors.As(err, &nr) {
			t.Errorf("WriteFile(%s) = %v, want a *NotRegularError", filepath.Base(p), err)
		}
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v, %v", fi.Mode(), err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v, %v", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("%d entries left in the directory, want the FIFO and the link", len(entries))
	}
	for _, p := range []string{filepath.Join(dir, "new"), filepath.Join(dir, "new")} {
		if err := WriteFile(p, []byte("y"), 0o600); err != nil {
			t.Fatalf("WriteFile of a new or regular file: %v", err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "new")); err != nil || string(b) != "y" {
		t.Errorf("regular file: %q, %v", b, err)
	}
}
