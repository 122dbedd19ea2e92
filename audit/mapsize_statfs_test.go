package audit

import "testing"

// TestStatfsBytesCountsFragments: statfs's block counts (f_blocks,
// f_bavail) are in units of the fragment size f_frsize (POSIX statvfs;
// Linux reports it in statfs too, with f_bsize the preferred I/O size,
// which may be larger), and in f_bsize where no fragment size is given.
// Before, fsSize and fsFree multiplied by f_bsize: a file system of 4 KiB
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
		if got := statfsBytes(c.n, c.bsize, c.frsize); got != c.want {
			t.Errorf("%d blocks, f_bsize %d, f_frsize %d: %d bytes, want %d", c.n, c.bsize, c.frsize, got, c.want)
		}
	}
}
