package audit

import (
	"errors"
	"fmt"
	"os"

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
func openSegmentFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := regularfile.Open(name, flag, perm, regularfile.NoFollow)
	var nr *regularfile.NotRegularError
	if errors.As(err, &nr) {
		return nil, fmt.Errorf("audit segment %s is not a regular file (it is %s): custos writes its segments as regular files and opens nothing else in their place; keep segments on another disk in the archive directory (audit.archive_dir), not behind a link", name, nr.Kind)
	}
	return f, err
}
