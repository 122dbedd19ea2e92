package checkpoint

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/custos-mcp/custos/internal/tmpfstest"
)

// TestAnchorAppendDiskFullLeavesNoTornLine fills a real file system while
// a checkpoint line is appended: the line's first bytes still fit in the
// file's last page, the rest do not, so the write is short (ENOSPC). The
// failed Append must leave the file as it was, ending in a complete line,
// so that once space is freed the next Append works and a restart reads
// the anchor; a torn line left behind stopped every later checkpoint and
// made serve refuse to start until an operator cut the file by hand.
func TestAnchorAppendDiskFullLeavesNoTornLine(t *testing.T) {
	dir := tmpfstest.Mount(t, 1<<20)
	s, _, _ := testSigner(t)
	tr := newTree("rec", 100)
	a := &Anchor{Dir: dir}
	ctx := context.Background()
	const page = 4096

	// Append until the next line would cross into a new page.
	var size int64
	next := int64(1)
	for ; ; next++ {
		e := signedEntry(t, s, tr, next)
		line, err := FormatLine(e)
		if err != nil {
			t.Fatal(err)
		}
		if size%page != 0 && size%page+int64(len(line)) > page {
			break
		}
		if err := a.Append(ctx, e.Note, Checkpoint{Origin: testOrigin, Size: e.Size, Root: e.Root}, t0); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(a.Path())
		if err != nil {
			t.Fatal(err)
		}
		size = fi.Size()
	}
	filler := tmpfstest.Fill(t, dir, 0)

	e := signedEntry(t, s, tr, next)
	ck := Checkpoint{Origin: testOrigin, Size: e.Size, Root: e.Root}
	err := a.Append(ctx, e.Note, ck, t0)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append on a full disk = %v, want ENOSPC", err)
	}
	fi, err := os.Stat(a.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != size {
		t.Errorf("after the failed Append the anchor holds %d bytes, want the %d it held before (no partial line)", fi.Size(), size)
	}
	if got, ok, err := a.Latest(); err != nil || !ok || got.Size != next-1 {
		t.Errorf("Latest after the failed Append = size %d, %v, %v; want size %d, no error", got.Size, ok, err, next-1)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, e.Note, ck, t0); err != nil {
		t.Fatalf("Append once space is free again: %v", err)
	}
	es, err := a.All()
	if err != nil {
		t.Fatalf("All: %v", err)
	}
	if len(es) != int(next) || es[len(es)-1].Size != next {
		t.Fatalf("All: %d entries, last size %d; want %d, last %d", len(es), es[len(es)-1].Size, next, next)
	}
}

// TestAnchorFirstAppendDiskFullLeavesNoFile: the first checkpoint of an
// anchor that a full disk refuses leaves no file behind: an empty file
// would be appended to later without the directory fsync that makes a new
// file durable.
func TestAnchorFirstAppendDiskFullLeavesNoFile(t *testing.T) {
	dir := tmpfstest.Mount(t, 256<<10)
	s, _, _ := testSigner(t)
	tr := newTree("rec", 1)
	a := &Anchor{Dir: dir}
	e := signedEntry(t, s, tr, 1)
	ck := Checkpoint{Origin: testOrigin, Size: e.Size, Root: e.Root}
	filler := tmpfstest.Fill(t, dir, 0)
	if err := a.Append(context.Background(), e.Note, ck, t0); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append on a full disk = %v, want ENOSPC", err)
	}
	if _, err := os.Lstat(a.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the failed first Append left %s behind (%v)", a.Path(), err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(context.Background(), e.Note, ck, t0); err != nil {
		t.Fatalf("Append once space is free again: %v", err)
	}
	if got, ok, err := a.Latest(); err != nil || !ok || got.Size != 1 {
		t.Fatalf("Latest = size %d, %v, %v", got.Size, ok, err)
	}
}
