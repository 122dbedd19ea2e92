package audit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

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

// TestCloseOnAFullDiskAfterACopy: the first commit after a backup's copy,
// or the log's Close if none came, writes back the freelist the commits
// during the copy left out (writeFreelist). On a volume that must allocate
// blocks to rewrite a free page (copy-on-write: btrfs, ZFS; simulated
// here on a tmpfs by punching the free pages out of the file) and is full,
// Close's commit fails with ENOSPC. bbolt rolls it back: the last commit
// stands and the file stays valid. Close says so (the log is intact, up
// to which record, the next open rebuilds the freelist) and keeps ENOSPC
// for errors.Is; before, it said only "audit: close: write D/audit.db: no
// space left on device", and serve exited 1 with that, leaving the
// operator to guess whether the log was damaged. The file then verifies
// read-only, a read-write open fails on the still-full volume (it writes
// the freelist), and once space is freed opens and verifies.
func TestCloseOnAFullDiskAfterACopy(t *testing.T) {
	dir := tmpfstest.Mount(t, 96<<20)
	path := filepath.Join(dir, "audit.db")
	l := openAfterACopy(t, path, 1500)
	punchFreePages(t, l, path)
	filler := tmpfstest.Fill(t, dir, 0)
	err := l.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Close on a full copy-on-write volume after a copy = %v, want ENOSPC (the freelist's commit)", err)
	}
	t.Logf("Close: %v", err)
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "the log is intact") || !strings.Contains(msg, "up to record 1503") {
		t.Errorf("Close = %q; want it to name %s and say that the log is intact up to record 1503", msg, path)
	}
	if _, err := VerifyFile(context.Background(), path, func(p Problem) { t.Errorf("after the failed Close: %v", p) }); err != nil {
		t.Fatalf("the file after the failed Close does not verify read-only: %v", err)
	}
	if l, err := Open(path, Options{Node: "n"}); !errors.Is(err, syscall.ENOSPC) {
		if err == nil {
			l.Close()
		}
		t.Fatalf("read-write open on the still-full volume = %v, want ENOSPC (it writes the freelist)", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	l = mustOpenPath(t, path, Options{Node: "n"}) // verified on cleanup
	if seq, _ := l.Head(); seq != 1503 {
		t.Fatalf("head %d after reopening, want 1503", seq)
	}
	appendN(t, l, 1)
}

// punchFreePages punches the pages free in l's live segment (path) out
// of the file, so that writing one again needs a new block, as it does on
// a copy-on-write file system.
func punchFreePages(t *testing.T, l *Log, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	err = l.live().view(func(tx *bolt.Tx) error {
		for id := 2; ; id++ {
			p, err := tx.Page(id)
			if p == nil || err != nil {
				return err
			}
			if p.Type != "free" {
				continue
			}
			n++
			ps := int64(tx.DB().Info().PageSize)
			if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(id)*ps, ps); err != nil {
				return err
			}
		}
	})
	if err != nil || n < 100 {
		t.Fatalf("punched %d free pages: %v; want the thousands the copy left", n, err)
	}
}
