//go:build unix

package audit

import "golang.org/x/sys/unix"

// fsSize is the size in bytes of the file system holding dir.
func fsSize(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Blocks) * int64(st.Bsize), nil
}
