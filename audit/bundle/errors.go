package bundle

import (
	"errors"
	"fmt"
)

// The bundle package's error vocabulary. Messages never contain record
// contents (the audit log is PHI): they name seqs, sizes and hashes only.
var (
	// ErrNoCheckpoint is returned by Write when no checkpoint in
	// WriteOptions.Checkpoints covers the end of the range (none has
	// size >= To), and by InclusionProof when the checkpoint does not cover
	// the seq. The records exist but are not yet committed to by a signed
	// checkpoint: wait for the next checkpoint (at most the configured
	// cadence, 1 s by default, or a clean shutdown) and export again.
	ErrNoCheckpoint = errors.New("bundle: no signed checkpoint covers the end of the range yet; wait for the next checkpoint and retry")

	// ErrCheckpointMismatch is returned by Write and InclusionProof when a
	// checkpoint's root differs from the local tree's root at that size,
	// or its note body disagrees with the anchor line: the local log and
	// the anchor have diverged (rollback or fork). Do not export; keep
	// both as evidence and run the startup consistency check.
	ErrCheckpointMismatch = errors.New("bundle: checkpoint does not match the local audit log")

	// ErrBadCheckpoint is returned when an anchor line or signed note cannot
	// be parsed (not JSON, bad base64, malformed checkpoint body).
	ErrBadCheckpoint = errors.New("bundle: malformed checkpoint")

	// ErrBadRange is returned by Write and ResolveTimeRange for an empty or
	// inverted range, or one beyond the log's head.
	ErrBadRange = errors.New("bundle: invalid record range")

	// ErrNotEmpty is returned by Write when the target directory exists
	// and is not empty: bundles are never overwritten or merged.
	ErrNotEmpty = errors.New("bundle: target directory exists and is not empty")

	// ErrRangeProof is returned by RangeProof and RangeRoot for an invalid
	// range or a proof or leaf list of the wrong length.
	ErrRangeProof = errors.New("bundle: invalid range-completeness proof")

	// ErrBadVerifierKey is returned by Verify and CheckInclusion when the
	// verifier keys cannot be parsed (each non-empty, non-# line must be a
	// note verifier key "name+hash+base64").
	ErrBadVerifierKey = errors.New("bundle: bad verifier key")

	// ErrInvalid is returned (wrapped) by Verify when the bundle failed at
	// least one check, and by CheckInclusion when the proof does not hold.
	// The Transcript lists every Problem.
	ErrInvalid = errors.New("bundle: verification failed")
)

// Problem is one failed check found by Verify, with its evidence.
type Problem struct {
	Seq      uint64 `json:"seq"`                // the record concerned; 0 for a bundle-level problem
	Check    string `json:"check"`              // one of the Check* names
	Expected string `json:"expected,omitempty"` // what the check requires (hashes, seqs, sizes)
	Got      string `json:"got,omitempty"`      // what the bundle holds
	Detail   string `json:"detail"`             // explanation; never record contents
}

func (p Problem) String() string {
	s := p.Check
	if p.Seq != 0 {
		s = fmt.Sprintf("seq %d: %s", p.Seq, p.Check)
	}
	if p.Detail != "" {
		s += ": " + p.Detail
	}
	if p.Expected != "" || p.Got != "" {
		s += fmt.Sprintf(" (expected %s, got %s)", p.Expected, p.Got)
	}
	return s
}

// Check names used in Problem.Check and Transcript.Checks.
const (
	CheckManifest     = "manifest"     // manifest.json parses; every listed file exists with its sha256; no unlisted files
	CheckCheckpoint   = "checkpoint"   // checkpoints.jsonl: signatures by the given keys, bodies, sizes bracket the range
	CheckConsistency  = "consistency"  // the upper checkpoint's tree extends the lower one's (tlog.CheckTree)
	CheckCanonical    = "canonical"    // every line decodes (audit.Decode) and re-encodes to the same bytes
	CheckSequence     = "sequence"     // seqs are exactly from..to, in order, no gap or duplicate
	CheckChain        = "chain"        // prev_hash of record k is the hash of record k-1 (ZeroHash for seq 1)
	CheckTime         = "time"         // record times never decrease
	CheckCompleteness = "completeness" // leaf hashes + range proof recompute the upper checkpoint's root
	CheckDerived      = "derived"      // every human-format file is byte for byte its regeneration from records.jsonl
)
