package audit

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/custos-mcp/custos/internal/tmpfstest"
	bolt "go.etcd.io/bbolt"
)

// firstHole is the offset of the first hole of the file at path at or
// past off (its size when there is none), as the file system reports it.
func firstHole(t *testing.T, path string, off int64) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hole, err := unix.Seek(int(f.Fd()), off, unix.SEEK_HOLE)
	if err != nil {
		t.Fatalf("SEEK_HOLE %s at %d: %v", filepath.Base(path), off, err)
	}
	return hole
}

// liveMark is the high-water mark of the log's live segment, once the
// batcher has refilled the tail after the last commit: the refill runs
// after the commit's callers have their results, and the next commit
// starts only after it, so one more append waits for it.
func liveMark(t *testing.T, l *Log) int64 {
	t.Helper()
	if _, err := l.Append(context.Background(), sampleEntry(0)); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := l.view(func(tx *bolt.Tx) error { n = tx.Size(); return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLiveSegmentHasZeroTail: after appends, at least tailLow bytes past
// the live segment's high-water mark are written (zeros), not a hole, so
// that the next commits write over allocated blocks; after a roll the new
// live segment has its own tail and the sealed one is trimmed to its
// pages. Before the tail, bbolt's ftruncate left a hole right at the mark.
func TestLiveSegmentHasZeroTail(t *testing.T) {
	l, path := mustOpen(t, Options{})
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		if _, err := l.Append(ctx, sampleEntry(i)); err != nil {
			t.Fatal(err)
		}
	}
	mark := liveMark(t, l)
	if hole := firstHole(t, path, mark); hole < mark+tailLow {
		t.Fatalf("first hole at %d, %d bytes past the high-water mark %d; want at least %d written", hole, hole-mark, mark, tailLow)
	}
	if ok, err := l.Roll(ctx); err != nil || !ok {
		t.Fatalf("Roll = %v, %v", ok, err)
	}
	if _, err := l.Append(ctx, sampleEntry(0)); err != nil {
		t.Fatal(err)
	}
	mark = liveMark(t, l)
	if hole := firstHole(t, path, mark); hole < mark+tailLow {
		t.Fatalf("after a roll: first hole %d bytes past the new live segment's mark %d; want at least %d", hole-mark, mark, tailLow)
	}
	files, err := sealedFiles(path, "")
	if err != nil || len(files) != 1 {
		t.Fatalf("sealed files %v, %v", files, err)
	}
	for _, f := range files {
		checkSealedTrimmed(t, f)
	}
}

// TestZeroTailUnderConcurrentAppends: many concurrent appends over
// several refills of the tail and a roll in the middle; every record is
// there and both segments verify (mustOpen's cleanup), so the zeros never
// landed on a page in use.
//
//custos:race
func TestZeroTailUnderConcurrentAppends(t *testing.T) {
	l, path := mustOpen(t, Options{})
	ctx := context.Background()
	const writers, each = 16, 150 // ~6 MB of records: the tail is refilled several times
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				e := sampleEntry(w*each + i)
				e.Input = []byte(`{"care_team":"` + fillerText + `"}`)
				if _, err := l.Append(ctx, e); err != nil {
					errs <- err
					return
				}
				if w == 0 && i == each/2 {
					if _, err := l.Roll(ctx); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if seq, _ := l.Head(); seq != writers*each {
		t.Fatalf("head %d, want %d", seq, writers*each)
	}
	if mark := liveMark(t, l); firstHole(t, path, mark) < mark+tailLow {
		t.Errorf("no zero tail past the live segment's mark after the run")
	}
}

// fillerText makes a record's decision input about 2 KB, as a real care
// team's is.
var fillerText = strings.Repeat("abcdefghijklmnopqrstuvwxyz", 77)

// TestZeroTailLeavesALittleDiskAlone: on a file system with less than
// tailReserve free, no tail is written (the hole stays at the mark), so
// the tail never takes the room a seal's next segment or a checkpoint
// needs; appends work as before.
func TestZeroTailLeavesALittleDiskAlone(t *testing.T) {
	dir := tmpfstest.Mount(t, 16<<20)
	path := filepath.Join(dir, "audit.db")
	l := mustOpenPath(t, path, Options{})
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		if _, err := l.Append(ctx, sampleEntry(i)); err != nil {
			t.Fatal(err)
		}
	}
	mark := liveMark(t, l)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() >= mark+tailLow {
		if hole := firstHole(t, path, mark); hole >= mark+tailLow {
			t.Fatalf("a %d-byte tail was written on a 16 MiB file system (reserve %d)", hole-mark, tailReserve)
		}
	}
	if ok, err := l.Roll(ctx); err != nil || !ok {
		t.Fatalf("Roll = %v, %v", ok, err)
	}
}

// TestZeroTailAfterTheLogCloses: a refill that finds the segment closed
// (a seal or Close got the writer's lock first) writes nothing and
// reports nothing.
func TestZeroTailAfterTheLogCloses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	db, tail, err := openLiveDB(path, bolt.Options{FreelistType: bolt.FreelistMapType, OpenFile: openSegmentFile}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	tail.extend(db, 0)
	if tail.zeroed != 0 {
		t.Fatalf("a closed segment's tail moved to %d", tail.zeroed)
	}
	if _, err := tail.file.WriteAt([]byte{0}, 1<<20); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("bbolt's handle after Close: %v, want os.ErrClosed", err)
	}
}
