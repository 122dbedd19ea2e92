//go:build unix

package audit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSegmentSymlinkIsNotFollowed: the data directory is the service
// account's, and root runs the auditor commands in it. A writer Open
// followed a symbolic link at D/audit.db: a dangling one had the link's
// target created (anywhere, by root) as a bbolt file, an empty file at the
// target was initialized as one. Every open of a segment now refuses a
// link, names it, and creates or writes nothing through it.
func TestSegmentSymlinkIsNotFollowed(t *testing.T) {
	victims := t.TempDir()
	empty := filepath.Join(victims, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	realLog := writeSegmented(t, 3)
	for name, target := range map[string]string{
		"dangling link":         filepath.Join(victims, "cron-job"),
		"link to an empty file": empty,
		"link to a real log":    realLog,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.db")
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
			before := fileState(t, target)
			if l, err := Open(path, Options{Node: "root-auditor"}); err == nil {
				l.Close()
				t.Errorf("Open of a live segment that is a symbolic link succeeded")
			} else if !strings.Contains(err.Error(), "not a regular file (it is a symbolic link)") {
				t.Errorf("Open: %v, want it to name the symbolic link", err)
			}
			if l, err := Open(path, Options{Node: "reader", ReadOnly: true}); err == nil {
				l.Close()
				t.Errorf("read-only Open of a symbolic link succeeded")
			}
			if _, err := VerifyFile(context.Background(), path, func(Problem) {}); err == nil {
				t.Errorf("VerifyFile of a symbolic link succeeded")
			}
			if after := fileState(t, target); after != before {
				t.Errorf("the link's target changed: %s before, %s after", before, after)
			}
		})
	}
}

// TestSealedSegmentSymlinkIsRefused: a sealed segment replaced by a link
// (to an identical copy, so that only the link is wrong) is not read: the
// log is refused as missing that segment, by the writer and by
// verification, and a root writer, which makes sealed files read-only,
// changes nothing through the link.
func TestSealedSegmentSymlinkIsRefused(t *testing.T) {
	path := writeSegmented(t, 2, 2)
	sealed, err := filepath.Glob(filepath.Join(SealedDir(path), "*.db"))
	if err != nil || len(sealed) != 1 {
		t.Fatalf("sealed segments %v (%v), want one", sealed, err)
	}
	data, err := os.ReadFile(sealed[0])
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(copyPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(sealed[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(copyPath, sealed[0]); err != nil {
		t.Fatal(err)
	}
	before := fileState(t, copyPath)
	if l, err := Open(path, Options{Node: "n"}); err == nil {
		l.Close()
		t.Errorf("Open with a sealed segment that is a symbolic link succeeded")
	} else if !strings.Contains(err.Error(), "segment_missing") {
		t.Errorf("Open: %v, want the segment reported missing", err)
	}
	ps, _ := collect(t, path)
	if len(ps) == 0 {
		t.Errorf("VerifyFile found nothing wrong with a sealed segment that is a symbolic link")
	}
	if after := fileState(t, copyPath); after != before {
		t.Errorf("the link's target changed: %s before, %s after", before, after)
	}
}

// TestMakeReadOnlyDoesNotFollowALink: sealing and Open make sealed files
// read-only; a link in a sealed file's place is refused, its target
// unchanged (it was chmodded through the link).
func TestMakeReadOnlyDoesNotFollowALink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "passwd")
	if err := os.WriteFile(target, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "000001.db")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := makeReadOnly(link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("makeReadOnly of a symbolic link: %v, want it refused", err)
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the link's target: %v, %v; want mode 0644 unchanged", fi.Mode(), err)
	}
}

// TestSegmentFIFODoesNotHang: a FIFO at D/audit.db held a read-only Open
// (an auditor command) in open(2) forever, waiting for a writer.
func TestSegmentFIFODoesNotHang(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 3)
	go func() {
		l, err := Open(path, Options{Node: "reader", ReadOnly: true})
		if err == nil {
			l.Close()
		}
		errs <- err
		_, err = VerifyFile(context.Background(), path, func(Problem) {})
		errs <- err
		l, err = Open(path, Options{Node: "writer"})
		if err == nil {
			l.Close()
		}
		errs <- err
	}()
	for i, what := range []string{"read-only Open", "VerifyFile", "Open"} {
		select {
		case err := <-errs:
			if err == nil || !strings.Contains(err.Error(), "not a regular file (it is a FIFO)") {
				t.Errorf("%s of a FIFO: %v, want it named as a FIFO", what, err)
			}
		case <-time.After(10 * time.Second):
			// Unblock the open(2) so that the goroutine ends.
			if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
			t.Fatalf("%s (call %d) of a FIFO still waiting after 10s", what, i+1)
		}
	}
}

// fileState is what a test compares before and after: whether the file
// exists, and its mode, size and modification time.
func fileState(t *testing.T, p string) string {
	t.Helper()
	fi, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return "absent"
	}
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s %d bytes, modified %s", fi.Mode(), fi.Size(), fi.ModTime())
}
