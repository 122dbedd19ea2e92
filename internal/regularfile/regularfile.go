// Package regularfile opens a path that must name a regular file, checking
// the file opened rather than the name (a name can be renamed over between
// a check and an open), without waiting in open(2) on a FIFO put in its
// place and, with NoFollow, without following a symbolic link there. It
// is for files in directories another account controls (the data
// directory, which root enters to run an auditor command) or that a
// rollout renames over (a policy bundle).
//
// Invariants: Open returns a file only if it is a regular file, and for
// anything else a *NotRegularError naming what the path holds. With
// NoFollow it creates, opens and writes nothing through a symbolic link.
// O_NONBLOCK, with which it opens, changes nothing for a regular file.
package regularfile

import (
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"os"
)

// Follow says whether Open follows a symbolic link at the path's last
// element (links in the directories above are always followed).
type Follow bool

const (
	FollowLinks Follow = true
	NoFollow    Follow = false
)

// NotRegularError is Open's error for a path that holds something other
// than a regular file.
type NotRegularError struct {
	Path string
	Kind string // "a symbolic link", "a FIFO", "a directory", "a socket", "a device", "a special file"
}

func (e *NotRegularError) Error() string {
	return e.Path + " is " + e.Kind + ", not a regular file"
}

// Open opens path with flag and perm (as os.OpenFile) if it is a regular
// file, as checked on the file opened.
func Open(path string, flag int, perm os.FileMode, follow Follow) (*os.File, error) {
	f, err := os.OpenFile(path, flag|extraFlags(follow), perm)
	if err != nil {
		if !follow {
			if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
				// O_NOFOLLOW's error for a link is ELOOP on Linux and
				// macOS, EMLINK on FreeBSD, EFTYPE on NetBSD.
				return nil, &NotRegularError{Path: path, Kind: "a symbolic link"}
			}
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &NotRegularError{Path: path, Kind: Kind(fi.Mode())}
	}
	return f, nil
}

// OpenCreate opens path as Open does, creating it (with perm) if it does
// not exist, and reports whether this call created it: it first opens
// without O_CREATE, then creates with O_EXCL. flag's O_CREATE and O_EXCL
// are ignored. Only a file this call created may be given to another
// account (owner.Match): a file that already existed in a directory
// another account controls may be any file's second name, and a hard
// link's count, read after the open, is the other account's to change
// (link a root file there, unlink it once root has opened it).
func OpenCreate(path string, flag int, perm os.FileMode, follow Follow) (f *os.File, created bool, err error) {
	flag &^= os.O_CREATE | os.O_EXCL
	f, err = Open(path, flag, perm, follow)
	if !errors.Is(err, fs.ErrNotExist) {
		return f, false, err
	}
	f, err = Open(path, flag|os.O_CREATE|os.O_EXCL, perm, follow)
	if errors.Is(err, fs.ErrExist) { // another process made it meanwhile
		f, err = Open(path, flag, perm, follow)
		return f, false, err
	}
	return f, err == nil, err
}

// Kind names the kind of file m describes, with its article, for an error
// message: "a regular file", "a directory", "a FIFO", ...
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}

// IsNotRegular reports whether err is, or wraps, a *NotRegularError.
func IsNotRegular(err error) bool {
	var nr *NotRegularError
	return errors.As(err, &nr)
}

// Sum256 is SHA-256 of the bytes of the regular file at path, opened with
// Open (following links): a FIFO or a device put at path is an error, not
// a hang in open(2) or an endless read.
func Sum256(path string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	f, err := Open(path, os.O_RDONLY, 0, FollowLinks)
	if err != nil {
		return sum, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return sum, err
	}
	h.Sum(sum[:0])
	return sum, nil
}
