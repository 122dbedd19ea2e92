package audit

import "time"

// Hold takes the exclusive lock of the log at path (its lock file,
// LockFile(path), created if missing) without opening the log, waiting at
// most timeout (0: DefaultTimeout), then failing with ErrLocked. While it
// is held, no Open of that log, writer or reader, succeeds. It is for a
// process that replaces a log's directory (custos restore --force) and
// must keep a server from starting on it even where there is no log to
// open read-only yet (no audit.db, or a seal only a writer completes).
// release unlocks it.
func Hold(path string, timeout time.Duration) (release func(), err error) {
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	return lockLog(path, true, timeout)
}
