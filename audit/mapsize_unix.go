//go:build linux || darwin || freebsd || dragonfly

package audit

import (
	"os"

	"golang.org/x/sys/unix"
)

// fsSize is the size in bytes of the file system holding dir. Only where
// x/sys/unix's Statfs_t has Blocks and Bsize: OpenBSD's names them
// F_blocks and F_bsize, NetBSD and illumos have statvfs instead
// (mapsize_other.go).
func fsSize(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return statfsBytes(int64(st.Blocks), int64(st.Bsize), fragmentSize(&st)), nil
}

// fsFree is the space in bytes that an unprivileged writer may still use
// on the file system holding f.
func fsFree(f *os.File) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	return statfsBytes(int64(st.Bavail), int64(st.Bsize), fragmentSize(&st)), nil
}
