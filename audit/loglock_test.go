package audit

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"
)

// TestOpenBesideARollingWriter: a second Open of a log that a writer has
// open (a second `custos serve`, an auditor command that found no admin
// socket) fails with ErrLocked, also when the writer seals its segment
// while the second Open waits. bbolt's lock is on the live segment's
// inode, which sealing renames away: the waiting Open got that lock when
// the writer closed the sealed file, took the writer's files for an
// interrupted seal and renamed a new segment over the live one, so the
// writer's next records went to an unlinked file (found by running a
// second serve next to one rolling 64 KiB segments: "segment 674's seal is
// not its last record", records missing between segments).
//
// With an archive directory the writer's last handle on the sealed file
// goes when the segment is archived; without one, for the moment
// finishSealed reopens it read-only. Both are tried.
func TestOpenBesideARollingWriter(t *testing.T) {
	for _, archive := range []bool{true, false} {
		t.Run(fmt.Sprintf("archive=%v", archive), func(t *testing.T) {
			opts := Options{}
			if archive {
				opts.ArchiveDir = t.TempDir()
			}
			openBesideARollingWriter(t, opts)
		})
	}
}

func openBesideARollingWriter(t *testing.T, opts Options) {
	l, path := mustOpen(t, opts)
	appendN(t, l, 5)
	second := make(chan error, 1)
	go func() {
		l2, err := Open(path, Options{Node: "second", Timeout: 3 * time.Second, ArchiveDir: opts.ArchiveDir})
		if err == nil {
			l2.Close()
		}
		second <- err
	}()
	time.Sleep(500 * time.Millisecond) // the second Open has opened audit.db and waits
	rollOrFail(t, l)
	appendN(t, l, 5)
	if err := <-second; !errors.Is(err, ErrLocked) {
		t.Errorf("second Open beside a rolling writer: err = %v, want ErrLocked", err)
	}
	appendN(t, l, 5)
	if seq, _ := l.Head(); seq != 15 {
		t.Errorf("head = %d, want 15", seq)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if sum := mustVerify(t, path); sum.Records != 15 {
		t.Errorf("verified %d records, want 15", sum.Records)
	}
	if _, err := os.Stat(path + nextSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left behind: %v", path+nextSuffix, err)
	}
}

// TestReadOnlyOpenBesideARollingWriter: a read-only Open waiting while the
// writer seals fails with ErrLocked, rather than opening the sealed file
// as the live segment ("the live segment is sealed").
func TestReadOnlyOpenBesideARollingWriter(t *testing.T) {
	l, path := mustOpen(t, Options{})
	appendN(t, l, 5)
	second := make(chan error, 1)
	go func() {
		l2, err := Open(path, Options{ReadOnly: true, Timeout: 3 * time.Second})
		if err == nil {
			l2.Close()
		}
		second <- err
	}()
	time.Sleep(500 * time.Millisecond)
	rollOrFail(t, l)
	appendN(t, l, 5)
	if err := <-second; !errors.Is(err, ErrLocked) {
		t.Errorf("read-only Open beside a rolling writer: err = %v, want ErrLocked", err)
	}
}
