//go:build unix

package app

import "golang.org/x/sys/unix"

// openFileLimit is the process's open-file limit in force (the soft
// RLIMIT_NOFILE).
func openFileLimit() (uint64, error) {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		return 0, err
	}
	return uint64(r.Cur), nil
}
