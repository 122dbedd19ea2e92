// Package checkpoint signs, anchors and checks checkpoints of the audit
// log's Merkle tree, so that a rolled-back, truncated or rewritten audit.db
// is detected, and proven to an auditor, without trusting the server.
//
// A checkpoint commits to the whole audit log: the tree of its records
// (leaf i = canonical bytes of record seq i+1, RFC 6962 hashing as in
// golang.org/x/mod/sumdb/tlog), its size (= head seq) and its root hash.
//
// # Formats
//
// Checkpoint body, C2SP tlog-checkpoint (https://c2sp.org/tlog-checkpoint):
//
//	<origin>\n
//	<size in decimal, no leading zeros>\n
//	<root hash, standard base64 with padding>\n
//
// The origin names deployment and node, e.g.
// "custos.example-hospital/node-1/audit". Parse is strict and accepts only
// what Marshal produces (the encoding is not malleable); the optional C2SP
// extension lines are rejected, as custos writes none.
//
// Signed note, C2SP signed-note (https://c2sp.org/signed-note,
// golang.org/x/mod/sumdb/note): the body, a blank line, and one line
// "— <origin> base64(keyhash[4] || ed25519 signature[64])". The key name is
// the origin; the key hash is SHA-256(origin || "\n" || 0x01 || pubkey)[:4];
// the verifier key is "<origin>+<hash hex>+base64(0x01 || pubkey)". The key
// is an ed25519 key held by a KeySigner (Vault Transit, or an ephemeral dev
// key); each key version has its own verifier key, and a verifier file
// (FormatVerifierFile) lists them, one per line, for auditors.
//
// Anchor file, DIR/checkpoints.jsonl, one JSON object per line:
//
//	{"size":N,"root":"<base64>","note":"<signed note>","time":"<RFC 3339 nano UTC>"}
//
// The same format is used for the local copy in the data directory and for
// the external anchor, and by export bundles. A line may carry a fifth
// field, "rollback": a signed rollback acknowledgement written by `custos
// restore --accept-rollback` (see Rollback): it supersedes the earlier
// lines of its file above the restored size, and counts only once
// CheckAgainst has verified its signature.
//
// # Invariants
//
//   - Append-only anchor: Anchor only ever appends a complete line with
//     O_APPEND and returns after fsync (file, and directory when created).
//     It never rewrites, truncates or repairs what a file held before the
//     call, refuses to append after a torn line, and never creates the
//     anchor directory. A write that stops part way (a full disk: ENOSPC
//     after the line's first bytes), or whose fsync fails (a full network
//     volume, NFS or SMB, where write only fills a cache and the server
//     may keep any part of the line), is cut back to the size the file
//     had, and a file the call created is removed, also when the fsync
//     of its directory fails (the next Append creates it again and
//     fsyncs the directory), so that a full disk leaves no torn line;
//     only a crash mid-write does. The cut is skipped, and the error says
//     so, when the file is shorter than before or longer than before plus
//     the line, or when the file system refuses it (an append-only
//     mount). Tested on a full tmpfs:
//     TestAnchorAppendDiskFullLeavesNoTornLine and
//     TestAnchorFirstAppendDiskFullLeavesNoFile; the failed fsync, which
//     no local file system gives on demand, with an injected one:
//     TestAnchorAppendFsyncFailureLeavesNoTornLine,
//     TestAnchorFirstAppendFsyncFailureLeavesNoFile,
//     TestAnchorFirstAppendDirSyncFailureLeavesNoFile and
//     TestAnchorUndoLeavesWhatItDidNotWrite.
//   - One root per size: the Checkpointer never signs a head that is
//     smaller than, equal in size but different from, or not provably
//     consistent with the last checkpoint it knows; it reports the
//     integrity error and stops instead.
//   - Fail closed at startup: the server calls Load and CheckAgainst before
//     serving; any error (torn or corrupt anchor, bad signature, rollback,
//     fork, inconsistency, unreadable external anchor) means do not serve.
//   - Fork evidence: two roots for one size are reported as a *ForkError
//     holding both sides — both signed notes when both come from anchors,
//     the anchored note and the local root when the local tree disagrees.
//   - No secrets: the private key never enters this package (KeySigner
//     signs); checkpoints, roots, notes and verifier keys are public, and
//     that is all errors and log lines contain.
//
// # Caveats
//
// Only the largest anchored checkpoint's signature is verified at startup
// (older entries are compared by root; their signatures are checked only
// when they are reported as fork evidence). An attacker who can write both
// the data directory and the external anchor can roll both back; the
// external anchor should be writable by custos only in append mode (for
// example a WORM or append-only mount) and copied off-host.
package checkpoint
