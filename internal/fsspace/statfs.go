//go:build linux || darwin || freebsd || dragonfly

package fsspace

import (
	"os"

	"golang.org/x/sys/unix"
)

// Size is the size in bytes of the file system holding dir. Only where
// x/sys/unix's Statfs_t has Blocks and Bsize: OpenBSD's names them
// F_blocks and F_bsize, NetBSD and illumos have statvfs instead
// (other.go).
func Size(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return Bytes(int64(st.Blocks), int64(st.Bsize), fragmentSize(&st)), nil
}

// Free is the space in bytes an unprivileged writer may still use on the
// file system holding dir.
func Free(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return Bytes(int64(st.Bavail), int64(st.Bsize), fragmentSize(&st)), nil
}

// FreeOf is Free for the file system holding the open file f.
func FreeOf(f *os.File) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	return Bytes(int64(st.Bavail), int64(st.Bsize), fragmentSize(&st)), nil
}
