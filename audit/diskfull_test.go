package audit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/custos-mcp/custos/internal/tmpfstest"
)

// TestAppendOnAFullDisk appends to a log on a real file system that fills
// up, after a seal (the live segment's bbolt handle was created as
// audit.db.next and renamed): the appends that do not fit fail with
// ENOSPC, naming the live segment as it is called now (they named
// audit.db.next, a file no operator can find), leave no record behind,
// and once space is freed appends go on; the log verifies (mustOpenPath's
// cleanup).
func TestAppendOnAFullDisk(t *testing.T) {
	dir := tmpfstest.Mount(t, 1<<20)
	path := filepath.Join(dir, "audit.db")
	l := mustOpenPath(t, path, Options{})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if _, err := l.Append(ctx, sampleEntry(i)); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := l.Roll(ctx); err != nil || !ok {
		t.Fatalf("Roll = %v, %v", ok, err)
	}
	filler, err := fillUntilENOSPC(t, l, dir)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append on a full disk = %v, want ENOSPC", err)
	}
	if msg := err.Error(); strings.Contains(msg, "audit.db.next") || !strings.Contains(msg, path) {
		t.Errorf("Append on a full disk: %q; want it to name the live segment %s", msg, path)
	}
	seq, _ := l.Head()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	r, err := l.Append(ctx, sampleEntry(0))
	if err != nil {
		t.Fatalf("Append once space is free again: %v", err)
	}
	if r.Seq != seq+1 {
		t.Fatalf("Append once space is free again: seq %d, want %d (the head after the failed appends, plus one)", r.Seq, seq+1)
	}
}

// TestAppendOnAFullDiskDuringACopy: a commit that fails while a backup
// copies the live segment (its commits leave out the freelist: copyLive)
// is rolled back by bbolt rebuilding the freelist from a scan of the
// file (tx.rollback: NoSyncReload of freepages(), as no freelist page is
// on disk). The failed appends leave no record behind, later appends go
// on once space is free again, and the log verifies (mustOpenPath's
// cleanup).
func TestAppendOnAFullDiskDuringACopy(t *testing.T) {
	dir := tmpfstest.Mount(t, 4<<20)
	path := filepath.Join(dir, "audit.db")
	l := mustOpenPath(t, path, Options{})
	appendN(t, l, 3)
	release := holdSnapshot(t, l)
	appendN(t, l, 3)
	if boltFreelistPage(t, path) != noFreelist {
		t.Fatal("the commits during the copy wrote the freelist")
	}
	filler, err := fillUntilENOSPC(t, l, dir)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append on a full disk during a copy = %v, want ENOSPC", err)
	}
	seq, _ := l.Head()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	recs := appendN(t, l, 3)
	if recs[0].Seq != seq+1 {
		t.Fatalf("Append once space is free again: seq %d, want %d", recs[0].Seq, seq+1)
	}
	release()
	appendN(t, l, 1)
	if boltFreelistPage(t, path) == noFreelist {
		t.Error("after the copy the meta page names no freelist")
	}
}

// fillUntilENOSPC fills the file system of dir (tmpfstest.Fill, whose
// file it returns) and appends to l until an append fails (at most
// 1,000: bbolt reuses the pages earlier commits freed, so a few appends
// may still fit), returning that append's error.
func fillUntilENOSPC(t *testing.T, l *Log, dir string) (filler string, err error) {
	t.Helper()
	filler = tmpfstest.Fill(t, dir, 0)
	for i := 0; i < 1000 && err == nil; i++ {
		_, err = l.Append(context.Background(), sampleEntry(i))
	}
	return filler, err
}
