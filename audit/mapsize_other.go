//go:build !(linux || darwin || freebsd || dragonfly)

package audit

import (
	"errors"
	"os"
)

// fsSize is unknown here: bbolt on Windows extends the file to its
// mapping, so the live segment keeps bbolt's default mapping; on the other
// unix systems (OpenBSD, NetBSD, illumos, ...) it is not read either, and
// the live segment keeps bbolt's default mapping, as before 4d4e80e.
func fsSize(string) (int64, error) {
	return 0, errors.New("audit: file system size unknown on this platform")
}

// fsFree is unknown here: the live segment keeps no zero-filled tail
// (tail.go).
func fsFree(*os.File) (int64, error) {
	return 0, errors.New("audit: free space unknown on this platform")
}
