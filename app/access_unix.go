//go:build unix

package app

import "golang.org/x/sys/unix"

// What serve does with a path Check looks at.
const (
	reads    = unix.R_OK                         // a file it reads
	lists    = unix.R_OK | unix.X_OK             // a directory it reads
	writesIn = unix.R_OK | unix.W_OK | unix.X_OK // a directory it creates files in
)

// denied says why this process's account may not use path as want says
// (faccessat(2) with the effective ids, as serve's own opens), nil if it
// may: 'custos config check' run as the service account sees what serve
// will. Root passes these checks but for a read-only mount (EROFS).
func denied(path string, want uint32) error {
	return unix.Faccessat(unix.AT_FDCWD, path, want, unix.AT_EACCESS)
}
