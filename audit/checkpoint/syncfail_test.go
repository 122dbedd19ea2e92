package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/custos-mcp/custos/internal/durable"
)

// failSync makes the next n fsyncs of an anchor line fail like a full
// network file system (NFS, SMB: the usual "separate storage" of
// --anchor-dir), where write() only fills the client's cache and ENOSPC
// comes back from fsync: the server kept the line's first keep bytes
// (keep < 0: the whole line). No local file system returns ENOSPC from
// fsync on demand, so this is injected.
func failSync(t *testing.T, n int, keep int64) {
	t.Helper()
	syncLine = func(f *os.File, before int64) error {
		if n == 0 {
			return f.Sync()
		}
		n--
		if keep >= 0 {
			if err := f.Truncate(before + keep); err != nil {
				t.Fatal(err)
			}
		}
		return &os.PathError{Op: "sync", Path: f.Name(), Err: syscall.ENOSPC}
	}
	t.Cleanup(func() { syncLine = nil })
}

// TestAnchorAppendFsyncFailureLeavesNoTornLine: an Append whose fsync
// fails was not reported written, and must leave the file as it was, as a
// failed write does: a partial line left by a full network volume stopped
// every later checkpoint ('torn anchor file') and every start until cut
// by hand; a whole line left behind was an unreported one.
func TestAnchorAppendFsyncFailureLeavesNoTornLine(t *testing.T) {
	for _, keep := range []int64{40, -1} {
		dir := t.TempDir()
		s, _, _ := testSigner(t)
		tr := newTree("rec", 3)
		a := &Anchor{Dir: dir}
		ctx := context.Background()
		for size := int64(1); size <= 2; size++ {
			e := signedEntry(t, s, tr, size)
			if err := a.Append(ctx, e.Note, Checkpoint{Origin: testOrigin, Size: e.Size, Root: e.Root}, t0); err != nil {
				t.Fatal(err)
			}
		}
		before, err := os.ReadFile(a.Path())
		if err != nil {
			t.Fatal(err)
		}
		e := signedEntry(t, s, tr, 3)
		ck := Checkpoint{Origin: testOrigin, Size: e.Size, Root: e.Root}
		failSync(t, 1, keep)
		if err := a.Append(ctx, e.Note, ck, t0); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("keep %d: Append whose fsync fails = %v, want ENOSPC", keep, err)
		}
		if after, _ := os.ReadFile(a.Path()); string(after) != string(before) {
			t.Errorf("keep %d: after the failed Append the anchor holds %d bytes, want the %d it held before", keep, len(after), len(before))
		}
		if err := a.Append(ctx, e.Note, ck, t0); err != nil {
			t.Fatalf("keep %d: Append after the failed one: %v", keep, err)
		}
		if es, err := a.All(); err != nil || len(es) != 3 || es[2].Size != 3 {
			t.Fatalf("keep %d: All = %d entries, %v; want 3, the last of size 3", keep, len(es), err)
		}
	}
}

// TestAnchorFirstAppendFsyncFailureLeavesNoFile: the first Append, whose
// fsync fails, removes the file it created, as a failed write does: the
// next Append then creates it again and fsyncs the directory, which
// nothing did for a file left behind.
func TestAnchorFirstAppendFsyncFailureLeavesNoFile(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := testSigner(t)
	tr := newTree("rec", 1)
	a := &Anchor{Dir: dir}
	e := signedEntry(t, s, tr, 1)
	ck := Checkpoint{Origin: testOrigin, Size: e.Size, Root: e.Root}
	failSync(t, 1, -1)
	if err := a.Append(context.Background(), e.Note, ck, t0); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append whose fsync fails = %v, want ENOSPC", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, FileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the failed first Append left %s behind (%v)", FileName, err)
	}
	if err := a.Append(context.Background(), e.Note, ck, t0); err != nil {
		t.Fatalf("Append after the failed one: %v", err)
	}
}

// TestAnchorUndoLeavesWhatItDidNotWrite: the cut back after a failed
// fsync touches only what this Append may have written: if the file
// meanwhile grew past its line or shrank below its size before (another
// writer, an operator), it is left as it is and the error says so.
func TestAnchorUndoLeavesWhatItDidNotWrite(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(f *os.File, before int64) error
	}{
		{"grown", func(f *os.File, before int64) error {
			_, err := f.WriteString("{\"another writer's line\"}\n")
			return err
		}},
		{"shrunk", func(f *os.File, before int64) error { return f.Truncate(before - 1) }},
	} {
		dir := t.TempDir()
		s, _, _ := testSigner(t)
		tr := newTree("rec", 2)
		a := &Anchor{Dir: dir}
		ctx := context.Background()
		e := signedEntry(t, s, tr, 1)
		if err := a.Append(ctx, e.Note, Checkpoint{Origin: testOrigin, Size: e.Size, Root: e.Root}, t0); err != nil {
			t.Fatal(err)
		}
		var want []byte // the file as the failed fsync leaves it
		syncLine = func(f *os.File, before int64) error {
			if err := tc.change(f, before); err != nil {
				t.Fatal(err)
			}
			var err error
			if want, err = os.ReadFile(f.Name()); err != nil {
				t.Fatal(err)
			}
			return syscall.EIO
		}
		t.Cleanup(func() { syncLine = nil })
		e = signedEntry(t, s, tr, 2)
		err := a.Append(ctx, e.Note, Checkpoint{Origin: testOrigin, Size: e.Size, Root: e.Root}, t0)
		syncLine = nil
		if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "left as it is") {
			t.Errorf("%s: Append = %v; want EIO and that the file was left as it is", tc.name, err)
		}
		if got, _ := os.ReadFile(a.Path()); string(got) != string(want) || len(got) == 0 {
			t.Errorf("%s: the file changed after the failed Append", tc.name)
		}
	}
}

// TestAnchorFirstAppendDirSyncFailureLeavesNoFile: the first Append, whose
// fsync of the directory fails, was not reported written and removes the
// file it created: the next Append then creates it again and fsyncs the
// directory. Left behind, the file was appended to without that fsync
// ever succeeding, and a crash could lose the anchor's only file.
func TestAnchorFirstAppendDirSyncFailureLeavesNoFile(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := testSigner(t)
	tr := newTree("rec", 2)
	a := &Anchor{Dir: dir}
	synced, fail := 0, true
	syncDir = func(d string) error {
		if fail {
			fail = false
			return &os.PathError{Op: "sync", Path: d, Err: syscall.EIO}
		}
		synced++
		return durable.SyncDir(d)
	}
	t.Cleanup(func() { syncDir = durable.SyncDir })
	ctx := context.Background()
	e := signedEntry(t, s, tr, 1)
	if err := a.Append(ctx, e.Note, Checkpoint{Origin: testOrigin, Size: e.Size, Root: e.Root}, t0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Append whose directory fsync fails = %v, want EIO", err)
	}
	if _, err := os.Lstat(a.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the failed first Append left %s behind (%v)", FileName, err)
	}
	for size := int64(1); size <= 2; size++ {
		e := signedEntry(t, s, tr, size)
		if err := a.Append(ctx, e.Note, Checkpoint{Origin: testOrigin, Size: e.Size, Root: e.Root}, t0); err != nil {
			t.Fatalf("Append of size %d after the failed one: %v", size, err)
		}
	}
	if synced != 1 {
		t.Errorf("the directory was fsynced %d times after the failed Append, want once (its file created again)", synced)
	}
}
