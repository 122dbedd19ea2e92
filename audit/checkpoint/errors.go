package checkpoint

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// The checkpoint package's error vocabulary. Callers branch on these with
// errors.Is; the typed errors below carry the evidence. No error of this
// package contains a secret: checkpoints, roots and signed notes are public
// by design (they are what auditors receive).
var (
	// ErrBadCheckpoint is returned when a checkpoint body, a signed note or
	// an anchor entry is malformed (Parse, Open, Validate, Sign, Append),
	// or when an anchor entry's size/root disagree with its own note. The
	// input must not be trusted; nothing was written.
	ErrBadCheckpoint = errors.New("checkpoint: malformed checkpoint")

	// ErrBadSignature is returned by Open and CheckAgainst when a signed
	// checkpoint carries no signature by a trusted key for its origin, or a
	// signature that does not verify, and by a Signer whose backend
	// returned a signature that does not verify under the key it claims.
	// Treat the checkpoint as forged: refuse to start / to anchor.
	ErrBadSignature = errors.New("checkpoint: checkpoint signature not verified")

	// ErrUnknownKey is returned (as *UnknownKeyError, which matches
	// ErrBadSignature too) by Open and CheckAgainst when a signed
	// checkpoint carries no signature by any key given: it is signed by
	// another key (verifier keys of another signing key version, written
	// before a rotation, or of another --deployment or --node), or by no
	// key at all. Nothing vouches for the log either way; a caller may
	// say that the keys are the likely cause, with the fix, instead of
	// a log that does not match its checkpoints, but must still refuse
	// (it may be a checkpoint forged with a key of the forger's own).
	// Branch on it with errors.Is, never on the text: the text holds
	// file names that are not custos's (anchor directories).
	ErrUnknownKey = errors.New("checkpoint: signed by no key given")

	// ErrRolledBack is returned (as *RolledBackError or
	// *RegressionError) when the local audit tree is smaller than a
	// checkpoint that was anchored for it, or when an anchor's sizes
	// decrease: audit.db was restored from an old copy, truncated or
	// replaced. custos must refuse to serve; an operator investigates and
	// recovers the real audit.db (see doc.go).
	ErrRolledBack = errors.New("checkpoint: audit log rolled back")

	// ErrFork is returned (as *ForkError) when two different roots exist
	// for one tree size: two signed checkpoints in the anchors, or an
	// anchored checkpoint and the local tree. The log's history was
	// rewritten. Refuse to serve; the error holds the evidence.
	ErrFork = errors.New("checkpoint: fork: two roots for one tree size")

	// ErrInconsistent is returned (as *InconsistentError) when the local
	// tree cannot prove that a larger tree extends a smaller one it
	// reported itself (stored hashes corrupt). Refuse to serve; run the
	// audit verifier.
	ErrInconsistent = errors.New("checkpoint: local tree is inconsistent")

	// ErrTorn is returned (as *TornError) when an anchor file's last line
	// is incomplete or unparsable, the trace of a crash in the middle of an
	// Append. Append refuses to write after a torn line. See TornError for
	// the operator's procedure.
	ErrTorn = errors.New("checkpoint: torn anchor file")

	// ErrCorruptAnchor is returned (as *CorruptLineError) when a line other
	// than the last one of an anchor file is not a valid entry. It was not
	// produced by a crash: the file was edited or damaged. Refuse to start
	// and investigate.
	ErrCorruptAnchor = errors.New("checkpoint: corrupt anchor file")

	// ErrKeyRotated is returned (as *KeyRotatedError) by Signer.Sign when
	// the backend signed with a newer key version than the one whose key
	// hash the note already carries. The Signer has switched to the new
	// version: signing the note again succeeds (the package-level Sign does
	// this once automatically). Publish the new verifier key.
	ErrKeyRotated = errors.New("checkpoint: signing key rotated")

	// ErrClosed is returned by Checkpointer.Run after Close.
	ErrClosed = errors.New("checkpoint: checkpointer closed")
)

// Side is one side of a fork: where the root came from and, when it came
// from an anchor, the signed checkpoint that states it.
type Side struct {
	Source   string    // "anchor FILE line N", or "local audit tree"
	Root     tlog.Hash // the root claimed for ForkError.Size
	Note     []byte    // the signed checkpoint; nil for the local tree (unsigned)
	Time     time.Time // anchoring time; zero for the local tree
	Verified bool      // Note's signature was verified (by CheckAgainst)
}

// ForkError is the evidence of a fork: two roots for tree size Size. A is
// always an anchored (signed) checkpoint; B is another anchored checkpoint
// or the local tree.
type ForkError struct {
	Size int64
	A, B Side
}

func (e *ForkError) Error() string {
	return fmt.Sprintf("checkpoint: fork at tree size %d: root %s (%s) vs root %s (%s)",
		e.Size, e.A.Root, e.A.Source, e.B.Root, e.B.Source)
}

// Is makes errors.Is(err, ErrFork) true.
func (e *ForkError) Is(target error) bool { return target == ErrFork }

// RolledBackError is the evidence that the local tree (LocalSize,
// LocalRoot) is shorter than a signed checkpoint anchored for it.
type RolledBackError struct {
	LocalSize int64
	LocalRoot tlog.Hash
	Anchored  Entry // the largest anchored checkpoint; Anchored.Note is the signed note
}

func (e *RolledBackError) Error() string {
	return fmt.Sprintf("checkpoint: audit log rolled back: local tree has size %d (root %s) but %s anchors size %d (root %s)",
		e.LocalSize, e.LocalRoot, e.Anchored.Location(), e.Anchored.Size, e.Anchored.Root)
}

// Is makes errors.Is(err, ErrRolledBack) true.
func (e *RolledBackError) Is(target error) bool { return target == ErrRolledBack }

// RegressionError is the evidence that an anchor's sizes decrease: Next
// follows Prev in the same file with Next.Size < Prev.Size.
type RegressionError struct {
	Prev, Next Entry
}

func (e *RegressionError) Error() string {
	return fmt.Sprintf("checkpoint: anchored tree size decreases from %d (%s) to %d (%s)",
		e.Prev.Size, e.Prev.Location(), e.Next.Size, e.Next.Location())
}

// Is makes errors.Is(err, ErrRolledBack) true.
func (e *RegressionError) Is(target error) bool { return target == ErrRolledBack }

// InconsistentError is the evidence that the local tree's consistency proof
// from (OldSize, OldRoot) to (NewSize, NewRoot) does not verify.
type InconsistentError struct {
	OldSize int64
	OldRoot tlog.Hash
	NewSize int64
	NewRoot tlog.Hash
	Err     error // from ProveTree or tlog.CheckTree
}

func (e *InconsistentError) Error() string {
	return fmt.Sprintf("checkpoint: local tree is inconsistent: cannot prove size %d (root %s) extends size %d (root %s): %v",
		e.NewSize, e.NewRoot, e.OldSize, e.OldRoot, e.Err)
}

// Is makes errors.Is(err, ErrInconsistent) true.
func (e *InconsistentError) Is(target error) bool { return target == ErrInconsistent }

// Unwrap returns the underlying proof error.
func (e *InconsistentError) Unwrap() error { return e.Err }

// TornError reports an incomplete or unparsable last line in an anchor
// file, starting at byte Offset (line Line; 0 if unknown: Latest and
// Append read only the file's tail, and the message then names the
// offset alone). Entries before it are intact. It is the trace of a crash during Append: that Append
// never returned success, so the torn checkpoint was never relied upon.
//
// Operator procedure: keep a copy of the file for the incident record
// (cp checkpoints.jsonl checkpoints.jsonl.torn-DATE), then cut the file at
// Offset (truncate -s OFFSET checkpoints.jsonl) and restart custos. custos
// never repairs an anchor itself: the external anchor is evidence. (A
// write or fsync that fails while custos runs, e.g. on a full disk, is cut
// back by Append itself and leaves no torn line.)
type TornError struct {
	Path   string
	Offset int64
	Line   int
	Reason string // "no trailing newline" or the parse failure (no secrets)
}

func (e *TornError) Error() string {
	return fmt.Sprintf("checkpoint: torn anchor file %s: last line (%s) is incomplete: %s; keep a copy, truncate the file to %d bytes and restart",
		e.Path, linePos(e.Line, e.Offset), e.Reason, e.Offset)
}

// linePos names a line by its number and byte offset, or by its offset
// alone when the number is unknown (0): a reader of the file's tail
// (Latest, Append) does not count the lines before it.
func linePos(line int, offset int64) string {
	if line == 0 {
		return fmt.Sprintf("byte offset %d", offset)
	}
	return fmt.Sprintf("line %d, byte offset %d", line, offset)
}

// Is makes errors.Is(err, ErrTorn) true.
func (e *TornError) Is(target error) bool { return target == ErrTorn }

// CorruptLineError reports an invalid line that is not the last line of an
// anchor file.
type CorruptLineError struct {
	Path   string
	Line   int   // 1-based; 0 if unknown
	Offset int64 // byte offset of the line
	Reason string
}

func (e *CorruptLineError) Error() string {
	if e.Line == 0 { // found by Latest, which reads only the file's tail
		return fmt.Sprintf("checkpoint: corrupt anchor file %s: the line at byte offset %d: %s", e.Path, e.Offset, e.Reason)
	}
	return fmt.Sprintf("checkpoint: corrupt anchor file %s: line %d (byte offset %d): %s", e.Path, e.Line, e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrCorruptAnchor) true.
func (e *CorruptLineError) Is(target error) bool { return target == ErrCorruptAnchor }

// KeyRotatedError reports that the signing backend used key version New
// while the note was being signed for version Old.
type KeyRotatedError struct {
	Old, New int
}

func (e *KeyRotatedError) Error() string {
	return fmt.Sprintf("checkpoint: signing key rotated from version %d to %d during signing; sign again", e.Old, e.New)
}

// Is makes errors.Is(err, ErrKeyRotated) true.
func (e *KeyRotatedError) Is(target error) bool { return target == ErrKeyRotated }

// UnknownKeyError is the evidence of ErrUnknownKey: the checkpoint's
// Origin (its first line, from an unverified note) and the keys that
// signed it, named as a verifier file names them ("name+hash", hash as 8
// hex digits), none of them a key given. Err is note's
// *UnverifiedNoteError. Its text is that of Open before the type existed.
type UnknownKeyError struct {
	Origin  string
	Signers []string
	Err     error
}

func (e *UnknownKeyError) Error() string {
	return fmt.Sprintf("%v: %v: %s, none of them a verifier key given "+
		"(verifier keys are named by the origin <deployment>/<node>/audit, one for each version of the signing key: "+
		"was the log written under another --deployment or --node, or the verifier file before the signing key was rotated? "+
		"'custos audit pubkey' writes the keys of every version)", ErrBadSignature, e.Err, e.SignedBy())
}

// SignedBy says whose the checkpoint is, for a message: `the checkpoint
// of origin "O" is signed by "O+hash", …` (or "signed by no key"). Both
// are quoted: they come from an unverified file. Verifier keys are named
// by the origin (<deployment>/<node>/audit), so a log written under
// another --deployment or --node, or checked with another verifier file
// (one written before the signing key was rotated), lands here; note's own
// error names neither.
func (e *UnknownKeyError) SignedBy() string {
	keys := make([]string, 0, len(e.Signers))
	for _, s := range e.Signers {
		keys = append(keys, fmt.Sprintf("%q", s))
	}
	signed := "signed by no key"
	if len(keys) > 0 {
		signed = "signed by " + strings.Join(keys, ", ")
	}
	return fmt.Sprintf("the checkpoint of origin %q is %s", e.Origin, signed)
}

// Is makes errors.Is(err, ErrUnknownKey) and errors.Is(err,
// ErrBadSignature) true.
func (e *UnknownKeyError) Is(target error) bool {
	return target == ErrUnknownKey || target == ErrBadSignature
}

// Unwrap returns note's error.
func (e *UnknownKeyError) Unwrap() error { return e.Err }
