package fsspace

import "errors"

// Bytes is n blocks of a file system's statfs counts (f_blocks,
// f_bavail) in bytes: n fragments of frsize bytes, or n blocks of bsize
// bytes where frsize is 0 (none reported).
func Bytes(n, bsize, frsize int64) int64 {
	if frsize > 0 {
		return n * frsize
	}
	return n * bsize
}

// ErrUnsupported is returned where this platform's statfs is not read
// (OpenBSD, NetBSD, illumos, Windows, ...).
var ErrUnsupported = errors.New("fsspace: file system space unknown on this platform")
