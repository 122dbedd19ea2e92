package audit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/custos-mcp/custos/internal/owner"
	"github.com/custos-mcp/custos/internal/regularfile"
)

// openSegmentFile is bbolt's Options.OpenFile for every segment file, live
// or sealed, written or read: it opens without following a symbolic link
// and without waiting on a FIFO, and refuses anything but a regular file.
// The data directory is the service account's, and root runs the auditor
// commands in it (docs/operations.md): a root writer followed a link at
// D/audit.db and created or initialized its target, wherever it pointed, as
// a bbolt file owned by root; a reader hung in open(2) on a FIFO there.
// The lock file beside it is opened the same way (lockLog).
//
// A segment file it creates (a writer's first, or the next one a seal
// makes) is given, run as root, to the owner of its directory
// (owner.Match): made root's with mode 0600 by a root 'custos sync' or
// auditor command on a new data directory, it kept 'custos serve', running
// as the directory's owner, out of its own audit log. A file that already
// exists keeps its owner.
func openSegmentFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	f, created, err := openSegment(name, flag, perm)
	var nr *regularfile.NotRegularError
	if errors.As(err, &nr) {
		return nil, fmt.Errorf("audit segment %s is not a regular file (it is %s): custos writes its segments as regular files and opens nothing else in their place; keep segments on another disk in the archive directory (audit.archive_dir), not behind a link", name, nr.Kind)
	}
	if err != nil || created {
		return f, err
	}
	// An existing file must be a bbolt database bbolt can open safely
	// (boltfile.go); bbolt returns this error from Open as it is.
	fi, err := f.Stat()
	if err == nil {
		err = checkBoltFile(f, fi.Size(), name)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// openSegment opens or creates segment file name; created reports whether
// it made the file.
func openSegment(name string, flag int, perm os.FileMode) (f *os.File, created bool, err error) {
	if flag&os.O_CREATE == 0 {
		f, err = regularfile.Open(name, flag, perm, regularfile.NoFollow)
		return f, false, err
	}
	f, created, err = regularfile.OpenCreate(name, flag, perm, regularfile.NoFollow)
	if created {
		owner.Match(f, filepath.Dir(name))
	}
	return f, created, err
}
