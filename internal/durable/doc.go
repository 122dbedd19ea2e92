// Package durable writes files so that they survive a crash once a call
// returns, and are never seen half written.
//
// Invariants:
//   - WriteFile replaces path whole or not at all: the bytes go to a
//     temporary file in the same directory, which is fsynced, given its
//     mode, renamed over path, and the directory is fsynced. On any error
//     the temporary file is removed and path is left as it was.
//   - SyncDir makes the creation, rename or removal of an entry of dir
//     durable (POSIX: an fsync of the directory itself).
//
// Every package that persists state (the audit log's seals, checkpoints and
// bundles, backups, sync state, dev keys) uses these two instead of its own
// copy.
package durable
