package fsspace

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStatfsBytesCountsFragments: statfs's block counts (f_blocks,
// f_bavail) are in units of the fragment size f_frsize (POSIX statvfs;
// Linux reports it in statfs too, with f_bsize the preferred I/O size,
// which may be larger), and in f_bsize where no fragment size is given.
// Before, the audit log (fsSize, fsFree), the
// server's disk watermark and the tests' tmpfs filler multiplied by f_bsize: a file system of 4 KiB
// fragments reporting a 1 MiB f_bsize was counted 256 times its size and
// free space (and the zero tail's reserve check with it).
func TestStatfsBytesCountsFragments(t *testing.T) {
	for _, c := range []struct {
		n, bsize, frsize int64
		want             int64
	}{
		{10, 4096, 4096, 40960},
		{10, 1 << 20, 4096, 40960},
		{3, 4096, 1024, 3072},
		{10, 4096, 0, 40960}, // no fragment size: the block size
		{0, 4096, 4096, 0},
	} {
		if got := Bytes(c.n, c.bsize, c.frsize); got != c.want {
			t.Errorf("%d blocks, f_bsize %d, f_frsize %d: %d bytes, want %d", c.n, c.bsize, c.frsize, got, c.want)
		}
	}
}

// TestFreeAndSizeOfARealFileSystem: on the file system holding a test
// directory, Size is positive, Free is at most Size, and Free of the
// directory and FreeOf a file in it agree within what the test itself
// writes (a 1 MiB file between the readings, and the rest of the machine).
func TestFreeAndSizeOfARealFileSystem(t *testing.T) {
	dir := t.TempDir()
	size, err := Size(dir)
	if err != nil || size <= 0 {
		t.Fatalf("Size(%s) = %d, %v", dir, size, err)
	}
	free, err := Free(dir)
	if err != nil || free < 0 || free > size {
		t.Fatalf("Free(%s) = %d, %v (size %d)", dir, free, err, size)
	}
	f, err := os.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	of, err := FreeOf(f)
	if err != nil {
		t.Fatal(err)
	}
	if d := free - of; d < -64<<20 || d > 64<<20 {
		t.Errorf("Free %d and FreeOf %d differ by %d bytes, for a 1 MiB file", free, of, d)
	}
}
