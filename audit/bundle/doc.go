// Package bundle exports a range of the audit log as a self-verifying
// bundle and verifies such bundles offline, with nothing but the bundle
// and the log's note verifier keys: no audit database, no Vault, no
// network. It also proves and checks the inclusion of single records
// (`custos audit prove --seq N`).
//
// # Bundle layout (format "custos-audit-bundle/v1")
//
//	records.jsonl      records From..To: each record's exact canonical bytes (audit.Encode) + "\n"
//	checkpoints.jsonl  the bracketing signed checkpoints as anchor lines
//	                   {"size":N,"root":"<b64>","note":"<signed note>","time":"<RFC 3339>"}:
//	                   lower (largest size <= From-1; omitted when that is the empty tree), then
//	                   upper (smallest size >= To)
//	proof.json         {"consistency":[b64...], "range":[b64...]}
//	manifest.json      format, origin, from, to, records, lower_size, upper_size,
//	                   files {name: "sha256:<hex>"}, vkeys, created
//	audit.csv, auditevent.ndjson, ocsf.ndjson   optional human formats, derived from records.jsonl
//
// Merkle leaf i is record seq i+1; its leaf hash is tlog.RecordHash of the
// canonical bytes; tree size = number of records (RFC 6962 hashing, as in
// golang.org/x/mod/sumdb/tlog). Checkpoints are C2SP tlog-checkpoint signed
// notes ("<origin>\n<size>\n<b64 root>\n", key name = origin, ed25519).
//
// # What a verified bundle proves
//
//   - The upper checkpoint was signed by a trusted key; its tree extends the
//     lower checkpoint's (consistency proof), so the log was not rewritten
//     between the two.
//   - Completeness: the leaf hashes of records.jsonl, combined with the
//     range proof — the hashes of the maximal subtrees of the upper tree
//     disjoint from leaves [From-1, To) — recompute the upper root. So the
//     lines are exactly the log's records From..To: none missing, added,
//     changed or reordered (RangeProof, RangeRoot).
//   - Each record is canonical, the seqs run From..To, the prev_hash chain
//     holds inside the range (the chain into the range is records[0]'s
//     prev_hash, which the tree commits to), and times never decrease.
//   - Each human-format file is exactly what Format.header and
//     Format.render make of those records (Verify regenerates it and
//     compares byte for byte), so it too is bound to the signed checkpoint,
//     although the manifest listing its digest is not signed.
//
// # Invariants
//
//   - Write never leaves a partial bundle: it builds the bundle in a
//     temporary directory beside the target and renames it into place, and
//     it refuses a non-empty target. It refuses to export a range no signed
//     checkpoint covers yet (ErrNoCheckpoint) and checkpoints whose roots
//     differ from the local tree (ErrCheckpointMismatch), and it checks that
//     the exported records recompute the upper root before publishing.
//   - Verify reports every failure with the seq concerned (0 for
//     bundle-level problems), not only the first, and trusts nothing in the
//     bundle that the signed checkpoints do not commit to (the manifest's
//     digests and vkeys are conveniences, not evidence).
//   - Range and proof arithmetic and the human formats are pure functions.
//   - No error or transcript line contains record contents (the audit log
//     is PHI): only seqs, sizes, hashes, file names and check names.
//
// # Caveats
//
// A bundle proves what the log holds, not that the log holds every event:
// that is the server's invariant (audit before release). A bundle for a
// smaller range is a valid bundle of that smaller range; the transcript
// states the range verified, which the auditor compares with the one asked
// for. The human formats are regenerated with the verifier's own renderer,
// and a record's lines that differ are compared with the renderings of
// every earlier version that wrote bundles, since a5f7443 (2026-11-21),
// too (earlierRenderers, each pinned by its own build's golden files): a
// line no version renders from its record fails the derived check (its
// records.jsonl still verifies).
package bundle
