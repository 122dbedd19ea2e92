// Package backup writes and checks online backups of a custos data
// directory (docs/operations.md, "Backup and restore"; docs/audit-access.md,
// decision 6).
//
// A backup is a directory (flat, except for the sealed audit segments):
//
//	audit.db           the audit log, copied with bbolt's tx.WriteTo in one read transaction
//	catalog.db         the catalog, likewise (read-only open: the server's lock is shared)
//	grants.db          the break-the-glass grants, likewise (absent if none was ever made)
//	dev-keys.json      the dev keys of a --dev data directory (absent with Vault)
//	audit.sealed/      the sealed audit segments NNNNNN.db and their seal notes NNNNNN.seal,
//	                   copied as they are (restored read-only)
//	checkpoints.jsonl  the data directory's anchored checkpoints of size <= the copy's head
//	manifest.json      names, sizes and SHA-256 of the files above; the audit head and tree
//	                   of the copy; the access record that audits the backup; the latest
//	                   anchored checkpoint the copy is consistent with
//
// Write produces it as a tar stream (so it can cross the admin socket, like
// an export bundle); Save unpacks such a stream into a new directory next
// to the destination, verifies it (Verify), fsyncs it and renames it into
// place.
//
// # Invariants
//
//   - Consistent copies: each bbolt file is copied inside one read
//     transaction of its own, so each copy is a state that existed. The
//     audit copy is taken after the backup's access record was durable, so
//     it holds that record: the copy's prefix 1..N is the view pinned at the
//     access record (N = its seq), and Verify checks record N's hash.
//   - Complete or absent: Save builds the backup in a temporary directory
//     beside the destination and renames it only after Verify passed and
//     every file and the directory were fsynced. A backup that does not
//     verify leaves no directory at the destination. A receiver killed
//     midway leaves its temporary directory unlocked (internal/partialdir); the
//     next backup to the same destination removes it.
//   - Verified: the audit copy verifies (audit.VerifyFile: chain, tree,
//     head), its tree matches the manifest and every checkpoint in the
//     backup's checkpoints.jsonl (and their signatures, given verifier
//     keys); each seal note states the seal stored in its segment; the catalog and grants copies pass bbolt's tx.Check; every
//     file's size and SHA-256 match the manifest, and nothing else is there.
//   - Progress is counts only: Staged.Progress and RestoreOptions.Progress
//     receive the bytes hashed or copied and the records verified of each
//     long step (Progress), never file or record contents; EstimateSize
//     gives a backup stream's approximate size for its sender's progress,
//     from the sizes of the files it copies (sealed segments in the
//     archive directory included).
//
// # Caveats
//
// Keys are not in a backup (except a dev directory's dev-keys.json): with
// Vault they live in Vault, which is backed up on its own. The external
// anchor directory is not copied either: it is the evidence a backup is
// checked against at restore, and must outlive the data directory.
package backup
