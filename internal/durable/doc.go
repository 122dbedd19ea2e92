// Package durable writes files so that they survive a crash once a call
// returns, and are never seen half written.
//
// Invariants:
//   - WriteFile replaces only a regular file (or creates path): a path that
//     is, or links to, a device, FIFO, socket or directory is refused
//     (Replaceable) before anything is written.
//   - WriteFile replaces path whole or not at all: the bytes go to a
//     temporary file in the same directory, which is fsynced, given its
//     mode, renamed over path, and the directory is fsynced. On any error
//     before the rename the temporary file is removed and path is left as
//     it was; when only the directory's fsync failed, path holds the new
//     file, whole, and the error is an *UnsyncedError saying so. Run as
//     root, the new file has the owner and group of the one it replaces
//     (of the directory for a new file; internal/owner).
//   - SyncDir makes the creation, rename or removal of an entry of dir
//     durable (POSIX: an fsync of the directory itself).
//   - PublishDir makes a directory built next to its destination appear
//     there whole or not at all: its entries are fsynced (the directory
//     itself; the caller has synced each file), an existing destination
//     must pass the caller's check and be a directory (then empty: it is
//     removed, never a file), and the rename is fsynced in the parent.
//
// Every package that persists state (the audit log's seals, checkpoints and
// bundles, backups, sync state, dev keys, audit access bundles, compliance
// packages) uses these instead of its own copy.
package durable
