// Package scrub re-verifies the audit log while the server appends to it:
// a background scrubber that, on a schedule, checks every record 1..N (N
// the tree size when the pass begins) with audit's VerifyRange — canonical
// encoding, stored hash, hash chain, seq/time/version order, the stored
// Merkle tree hashes — and the roots recomputed from the records against
// the tree's stored root at N and against every anchored checkpoint.
//
// Scrubbing catches what the startup checks cannot: a record edited or
// removed in the middle of the log behind the last anchored checkpoint
// (serve verifies at startup only the records after it, and the anchored
// checkpoints are compared with the stored tree, which an edit of a record
// leaves untouched), and storage that rots while the server runs.
//
// # Invariants
//
//   - Read only, next to the writer: a pass reads in chunks of short read
//     transactions (long ones block bbolt's remapping of a growing file)
//     and never writes; the caller decides what a broken log means
//     (OnPass). Records appended during a pass are checked by the next.
//   - Bounded cost: a pass checks at most Rate records per second
//     (cumulative, so a pass of R records lasts at least R/Rate seconds),
//     and passes start Interval apart (a pass longer than Interval is
//     followed by the next at once, and logged).
//   - A verdict names records, never their contents: a Pass carries
//     audit.Problems (seq, kind, hashes); the log lines say seq and kind.
//   - A Pass is Broken only for integrity findings (problems in the log
//     or anchored checkpoints that disagree with it); a pass that could
//     not finish (I/O, unreadable anchors, a closed log) has Err set and
//     is not a finding.
//
// # Segments
//
// The unit of work is a record range (Pass checks 1..N of one log through
// the Log interface). When the log is split into sealed segments, a pass
// becomes one range per segment, each started from the previous
// segment's tree (audit.RangeOptions.From); the scheduling, pacing and
// verdicts here do not change.
package scrub
