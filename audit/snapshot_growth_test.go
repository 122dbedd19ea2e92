package audit

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSnapshotGrowthIsLinear: while a backup's copy (WriteSnapshot) holds
// its read transaction, bbolt reuses no freed page. Every commit used to
// rewrite the freelist, which lists those pending pages and whose old
// pages become pending in turn: the file grew about 27 MiB ×
// (e^(C/512) − 1) after C commits on a large log (1,000: +165 MiB,
// measured), about 16 MiB × (e^(C/512) − 1) on this small one (1,500:
// about +280 MiB). While a copy is open the live segment now commits
// without its freelist: the growth is the pages the commits write, about
// 8 pages a commit here (1,500: about +47 MiB).
func TestSnapshotGrowthIsLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("1,500 commits")
	}
	l, path := mustOpen(t, Options{Node: "n"})
	appendN(t, l, 200)
	before := inUse(t, l)
	release := holdSnapshot(t, l)
	start := time.Now()
	for i := range 1500 {
		if _, err := l.Append(context.Background(), sampleEntry(i)); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	during := inUse(t, l) - before
	if f := boltFreelistPage(t, path); f != noFreelist {
		t.Errorf("during the copy the meta page names freelist page %d, want none (%#x)", f, uint64(noFreelist))
	}
	release()
	// The first commit after the copy writes the freelist again.
	appendN(t, l, 1)
	if f := boltFreelistPage(t, path); f == noFreelist {
		t.Error("after the copy the meta page names no freelist")
	}
	t.Logf("1,500 commits during a held copy: +%.1f MiB in %s", float64(during)/(1<<20), took.Round(time.Millisecond))
	if during > 120<<20 {
		t.Errorf("1,500 commits during a held copy grew audit.db by %.1f MiB: the freelist is rewritten at every commit", float64(during)/(1<<20))
	}
}

// inUse is the live segment's pages in use (tx.Size()).
func inUse(t *testing.T, l *Log) int64 {
	t.Helper()
	n, err := l.LiveBytes()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// noFreelist is bbolt's freelist page number in a meta page written
// without the freelist (common.PgidNoFreelist).
const noFreelist = ^uint64(0)

// boltFreelistPage is the freelist page named by the newest valid meta
// page of the bbolt file path (boltfile.go: the freelist field follows
// root and sequence).
func boltFreelistPage(t *testing.T, path string) uint64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, boltMetaOffset+boltMetaSize)
	var best boltMeta
	var freelist uint64
	found := false
	for _, off := range []int64{0, int64(os.Getpagesize())} {
		if _, err := f.ReadAt(page, off); err != nil {
			t.Fatal(err)
		}
		m, err := parseBoltMeta(page)
		if err != nil {
			continue
		}
		if !found || m.txid > best.txid {
			best, found = m, true
			freelist = binary.NativeEndian.Uint64(page[boltMetaOffset+32:])
		}
	}
	if !found {
		t.Fatalf("%s: no valid meta page", path)
	}
	return freelist
}

// TestCopiesAreCounted: the commits leave out the freelist while any copy
// is open, and write it again from the first commit after the last one
// ended, whether it ended well or failed.
func TestCopiesAreCounted(t *testing.T) {
	l, path := mustOpen(t, Options{Node: "n"})
	appendN(t, l, 3)
	freelistAfterAppend := func(want bool, when string) {
		t.Helper()
		appendN(t, l, 1)
		if got := boltFreelistPage(t, path) != noFreelist; got != want {
			t.Errorf("%s: freelist written %t, want %t", when, got, want)
		}
	}
	freelistAfterAppend(true, "no copy")
	first := holdSnapshot(t, l)
	freelistAfterAppend(false, "one copy")
	second := holdSnapshot(t, l)
	first()
	freelistAfterAppend(false, "the first copy ended, the second goes on")
	second()
	freelistAfterAppend(true, "both copies ended")

	// A copy whose writer cannot be opened, and one that fails writing.
	failed := errors.New("no room for the copy")
	if _, err := l.WriteSnapshot(func(Snapshot) (io.Writer, error) { return nil, failed }); !errors.Is(err, failed) {
		t.Fatalf("WriteSnapshot: %v, want %v", err, failed)
	}
	freelistAfterAppend(true, "after a copy that could not start")
	if _, err := l.WriteSnapshot(func(Snapshot) (io.Writer, error) { return &failingWriter{ok: 1}, nil }); err == nil || !strings.Contains(err.Error(), errWriter.Error()) {
		t.Fatalf("WriteSnapshot: %v, want %q", err, errWriter)
	}
	freelistAfterAppend(true, "after a copy that failed")
	if n := l.live().copies.Load(); n != 0 {
		t.Errorf("%d copies counted after every copy ended", n)
	}
}

// TestCloseWritesTheFreelist: a log closed after commits made during a
// copy leaves a file whose meta page names its freelist, as every bbolt
// file does, not one that the next open must rebuild by scanning.
func TestCloseWritesTheFreelist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	l := openAfterACopy(t, path, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if boltFreelistPage(t, path) == noFreelist {
		t.Error("the closed log's file names no freelist")
	}
	mustVerify(t, path)
}

// openAfterACopy opens a log at path (not closed on cleanup), appends 3
// records, then during commits more while a copy is open, and ends the
// copy: the freelist is not written yet.
func openAfterACopy(t *testing.T, path string, during int) *Log {
	t.Helper()
	l, err := Open(path, Options{Node: "n"})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 3)
	release := holdSnapshot(t, l)
	appendN(t, l, during)
	if boltFreelistPage(t, path) != noFreelist {
		t.Fatal("the commits during the copy wrote the freelist")
	}
	release()
	return l
}

// TestSealDuringACopyWritesTheFreelist: a roll while a backup copies the
// live segment seals a file that names its freelist (the seal's commit
// writes it), and the next segment, which no copy reads, commits with
// its freelist.
func TestSealDuringACopyWritesTheFreelist(t *testing.T) {
	l, path := mustOpen(t, Options{Node: "n"})
	appendN(t, l, 4)
	release := holdSnapshot(t, l)
	appendN(t, l, 4)
	if boltFreelistPage(t, path) != noFreelist {
		t.Fatal("the commits during the copy wrote the freelist")
	}
	rolled := make(chan error, 1)
	go func() { _, err := l.Roll(context.Background()); rolled <- err }()
	// The roll commits its seal, moves the file and waits for the copy
	// (finishSealed) before it trims the sealed file.
	sealed := filepath.Join(SealedDir(path), SegmentFile(1))
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(sealed); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	appendN(t, l, 2)
	if boltFreelistPage(t, path) == noFreelist {
		t.Error("the next segment, which no copy reads, commits without its freelist")
	}
	release()
	if err := <-rolled; err != nil {
		t.Fatal(err)
	}
	if boltFreelistPage(t, sealed) == noFreelist {
		t.Error("the segment sealed during a copy names no freelist")
	}
	checkSealedTrimmed(t, sealed)
}
