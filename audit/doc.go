// Package audit is custos's compliance audit log: an append-only,
// hash-chained sequence of records, one per audited event (resources/list,
// resources/read, ...), kept in bbolt files of its own: the live segment
// (conventionally DATA_DIR/audit.db) and the sealed segments before it
// (see "Segments"). It implements HIPAA 164.312(b) (audit controls) and
// 164.312(c) (integrity). The format is specified in docs/audit-format.md.
//
// # Invariants
//
//   - Records are never rewritten or deleted. Append only ever adds the key
//     head+1 and refuses to write if that key is already taken; nothing in
//     this package deletes or updates a record.
//   - A record is durably committed (bbolt commit, which fsyncs; NoSync is
//     never set) before Append returns. The server releases no payload until
//     Append has returned successfully for the request; if Append fails the
//     caller gets an error and must release nothing (fail closed).
//   - Sequence numbers are 1-based and gapless; each record's time is UTC and
//     never earlier than the previous record's; each record carries the hash
//     of the previous one (ZeroHash for seq 1).
//   - Append accepts an Entry.Input only if encoding/json.Valid accepts it.
//     validJSON (inputs.go) is a fast path of that check for inputs of up to
//     fastValidMax bytes; TestValidJSONAgreesWithEncodingJSON and
//     FuzzValidJSON check it against encoding/json.Valid.
//   - Records hold identifiers (URIs, opaque patient ids, digests), never
//     payloads. The log is itself PHI; this package's errors and operational
//     log lines never include record contents.
//
// # Canonical encoding and hashes
//
// A record is stored as its canonical encoding (Encode): a JSON object with a
// fixed key order, no insignificant whitespace, minimal string escaping, no
// floats, time as RFC 3339 UTC with nine fractional digits, the format
// version "v" first. Decode accepts exactly those bytes and nothing else, so
// the encoding is not malleable. The record hash is
//
//	hash = hex(SHA-256("custos/audit/v1\n" || canonical))
//
// for every format version, and record n's prev_hash is record n-1's hash
// (64 zeros for n = 1).
//
// # Format versions and migration
//
// Version 1 records have no "keys" field. Version 2 (FormatVersion, the only
// one Append writes) adds "keys" after "dev": the sorted identifiers of the
// secret key versions in force (Entry.Keys). Decode, Open, VerifyFile and
// ExportFile accept both. A v1 log is migrated in place by simply appending
// to it: its records stay as written, the first v2 record's prev_hash is the
// last v1 record's hash, and the storage layout (meta "format") is unchanged.
// Within a log versions never decrease (VerifyFile: version_regression).
//
// # Merkle tree
//
// The records also form an RFC 6962 Merkle tree, stored the way
// golang.org/x/mod/sumdb/tlog stores it, so that a signed checkpoint
// (size, root) commits to the whole log and inclusion and consistency
// proofs can be served. Leaf i (0-based) is record seq i+1; its data are the
// record's canonical bytes exactly as stored, and
//
//	LeafHash = SHA-256(0x00 || canonical)          (tlog.RecordHash)
//	node     = SHA-256(0x01 || left || right)      (tlog.NodeHash)
//
// The tree of size N covers records 1..N; N is the head seq. Appending leaf n
// stores tlog.StoredHashes(n, canonical, ...) (the leaf hash and the hash of
// every subtree it completes) at consecutive stored-hash indexes from
// tlog.StoredHashIndex(0, n), in the same transaction as the record. TreeHead
// (capped at Head: only records whose commit has returned, fsync included),
// TreeHash, ProveRecord, ProveTree, ReadHashes and Records serve checkpoints
// and proofs; they work on a log opened read-only too.
//
// # Storage layout
//
// One bbolt file, mode 0600, four buckets (five or six once a decision input
// is stored), all written in the same transaction for each record:
//
//	records  key: seq as 8-byte big-endian   value: canonical bytes
//	hashes   key: seq as 8-byte big-endian   value: 32-byte SHA-256 (raw)
//	tlog     key: stored-hash index as 8-byte big-endian   value: 32-byte tree hash (raw)
//	inputs   key: seq as 8-byte big-endian   value: the record's decision input
//	         (JSON, or 0x00 + SHA-256 of its principal + the JSON after the
//	         principal; only for records given an Entry.Input; NOT hashed,
//	         chained or in the tree: context for policy replay, not evidence;
//	         see inputs.go)
//	input-docs key: SHA-256 (32 bytes)   value: a principal's JSON that inputs
//	         refer to, stored once
//	meta     "format"    = "custos-audit-v1"
//	         "node"      = Options.Node of the process that created the file
//	         "head_seq"  = 8-byte big-endian seq of the last record (0: empty)
//	         "head_hash" = 32-byte hash of the last record (zeros: empty)
//	         "head_time" = TimeLayout text of the last record's time ("": empty)
//	         "tree_size" = 8-byte big-endian number of leaves in tlog (= head_seq)
//
// # Segments
//
// The log rolls over to a new file by size or by time (Options.RollSize,
// RollPeriod, RollMonthly; segment.go, roll.go). Seq, chain hash and
// Merkle leaf index are global: a new segment records its predecessor's
// head (meta base_seq, base_hash, base_time, base_root) and starts its
// tlog bucket with copies of the stored hashes of the complete subtrees of
// the tree at that head, so appends within it are those of one file. The
// sealed segment gets a seal (its records, its predecessor's head and its
// own: chain hash and tree root), signed like a checkpoint when a
// SealSigner is set, and is made immutable (mode 0400, fsync, moved to
// SealedDir, never opened read-write again) after it verified. Invariants:
//
//   - Only the live segment is ever written; a segment with a seal takes
//     no append.
//   - Sealing has one commit point (the seal in the segment's meta); Open
//     rolls an interrupted seal back before it and completes it after,
//     leaving the sealed file as a seal run to its end does (trimmed to
//     its pages, read-only).
//   - The live path always names a file, during a seal too: the sealed
//     file is linked under its sealed name and the next segment renamed
//     over the live path (TestLivePathNeverMissingDuringSeal). A sealed
//     name that holds another file is never replaced. Only a file system
//     without hard links falls back to a rename (logged).
//   - Segments k and k+1 link: k+1's base is k's seal head. A read-write
//     Open refuses segments that do not follow each other; every reader
//     (Verify, VerifyFile, VerifyRange, Records, proofs, Export, Inputs,
//     WriteSealed) spans them, reading each sealed file without the
//     writer's lock.
//   - Readers never stop the writer: they read the live segment in short
//     read transactions (chunks), and the one long transaction (a backup's
//     WriteSnapshot) cannot delay an append, because the live segment is
//     mapped from its open with the size of its file system (mapsize.go):
//     bbolt never remaps it, and a remap is what waits for readers
//     (TestSnapshotWhileTheFileGrowsDoesNotBlockAppends). Only where the
//     address space is limited does it fall back, with a warning, to
//     bbolt's default mapping; on the systems where internal/fsspace does
//     not read the file system's size it keeps that mapping.
//   - While a backup copies the live segment, bbolt reuses none of the
//     pages the commits free; the commits leave out bbolt's freelist
//     (copyLive), so that the file grows by the pages they write, not
//     about exponentially (TestSnapshotGrowthIsLinear). A sealed segment
//     always names its freelist.
//   - The live segment keeps a zero-filled tail past its high-water mark
//     (tail.go, where its invariants are): written under bbolt's writer
//     lock, never below the mark, never counted, trimmed at the seal, and
//     only while the file system keeps a reserve free beyond it.
//
// A log written before segments existed is segment 1 as it is.
//
// # Tree migration
//
// Logs written before the Merkle tree existed have neither the tlog bucket
// nor meta tree_size. They are upgraded in place by a documented migration
// (docs/audit-format.md, "Merkle tree"): a read-write Open computes the
// missing stored hashes from the stored records, in write transactions of
// 10,000 records each of which also advances tree_size (so an interrupted
// migration resumes at the next Open), and logs its progress through
// Options.Logger. Records are never touched; a conflicting stored hash stops
// the migration with ErrCorrupt. Opened with Options.ReadOnly, such a log
// still verifies its chain (Summary.TreeSize < HeadSeq) and TreeHead returns
// ErrNoTree.
//
// # Group commit
//
// Appends go through a leader/follower batcher with bbolt's DB.Batch rules
// (groupcommit.go): one commit (two fdatasyncs) runs at a time; an Append
// on an idle log commits at once, and the Appends that arrive during a
// commit share the next one, which starts when the running commit ends or
// when its window is over, whichever is later. The window is
// Options.MinBatchDelay (default 0) while the process's goroutines get a
// CPU promptly and grows to Options.MaxBatchDelay as they queue for one
// (the Go scheduler's latency). Fast-path invariant: a caller hears of its
// record only after the transaction holding it committed, and the record it
// is given is the one stored (TestGroupCommitMatchesTheLog). The batcher may run an
// append function more than once (after another function in the batch
// failed, or alone), so the function reads the head and the tree inside the
// transaction and computes seq, time, prev_hash, hash and the stored tree
// hashes there; its only side effect outside the transaction is the result
// the caller reads after Batch returned nil. The event id is generated once,
// before the transaction.
//
// # Verification and export
//
// VerifyFile and ExportFile open a log (every segment) read-only under
// shared file locks (a running server holds the exclusive lock of the live
// segment: they fail with ErrLocked; Log.Verify
// and Log.Export work on an open log, and Open with Options.ReadOnly gives a
// *Log for reading next to other readers). Both walk the log in chunks of read
// transactions. A sealed name that is the live file itself (a seal
// stopped after it linked the sealed file) is the live segment, walked
// once. VerifyFile reports every problem it finds, each naming the
// record concerned; it checks the Merkle tree's stored hashes against the
// records and the stored root against the root recomputed from the records.
// Log.VerifyRange runs the same record and tree checks over a range From..To
// of an open log, next to the writer, starting from the stored tree at
// From-1 and comparing the recomputed roots with roots the caller trusts
// (anchored checkpoints); serve runs it on the suffix after the last
// anchored checkpoint at startup, and its scrubber over the whole log on a
// schedule (package audit/scrub).
//
// # Caveats
//
// The hash chain detects any change to, insertion into, removal from or
// reordering of stored records, unless the attacker also rewrites every later
// record and the meta head. It does not defend against truncation of the
// tail together with the meta head, or against an insider with write access
// recomputing the whole chain and the tree. The Merkle tree is what signed
// checkpoints published outside the file commit to; only they (package
// checkpoint) catch those.
package audit
