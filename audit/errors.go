package audit

import (
	"errors"
	"fmt"
)

// The audit package's error vocabulary. Callers branch on these with
// errors.Is; the wrapped message never contains entry contents (the audit
// log is itself PHI).
var (
	// ErrBadEntry is returned by Append when the Entry is not acceptable:
	// an empty Action, an unknown Outcome, a string that is not valid
	// UTF-8, or Keys holding an empty or duplicate identifier. Nothing was
	// written. The caller has a bug; it must release nothing for the request
	// it tried to audit.
	ErrBadEntry = errors.New("audit: bad entry")

	// ErrCorrupt is returned when the stored log is inconsistent with itself:
	// by Open when the head record does not decode or does not hash to the
	// stored head, and by Append if the storage invariants are found broken
	// inside the write transaction. It is usually wrapped in a *CorruptError
	// carrying the evidence. The log must not be written to until an operator
	// has run VerifyFile and investigated; Open refuses it.
	ErrCorrupt = errors.New("audit: audit log is corrupt")

	// ErrNonCanonical is returned by Decode when the bytes are not the exact
	// canonical encoding of a record (unknown or missing fields, wrong types,
	// different key order, whitespace, escaping or number form, or any other
	// byte sequence that would not re-encode to the same bytes). VerifyFile
	// reports it as a Problem of kind "non_canonical".
	ErrNonCanonical = errors.New("audit: non-canonical record encoding")

	// ErrLocked is returned by Open, VerifyFile and ExportFile when the
	// file lock could not be obtained within the timeout: another process
	// (typically a running custos server) has the log open for writing. Stop
	// it or work on a copy.
	ErrLocked = errors.New("audit: audit log is locked by another process")

	// ErrClosed is returned by Append, Verify, Export and the Merkle tree
	// methods after Close. The record was not written; the caller must
	// release nothing.
	ErrClosed = errors.New("audit: log is closed")

	// ErrReadOnly is returned by Append on a log opened with
	// Options.ReadOnly. Nothing was written; the caller must release
	// nothing.
	ErrReadOnly = errors.New("audit: log is open read-only")

	// ErrNoTree is returned by TreeHead, TreeHash, ReadHashes, ProveRecord
	// and ProveTree when the Merkle tree does not (yet) cover the records
	// asked about: the log was written before the tree existed and was
	// opened with Options.ReadOnly. Open it read-write once (as the server
	// does) to run the migration; the hash chain can be verified meanwhile.
	ErrNoTree = errors.New("audit: Merkle tree not built for this log")

	// ErrOutOfRange is returned by TreeHash, ReadHashes, ProveRecord,
	// ProveTree and Records for a seq, tree size or stored hash index
	// outside the log (for example a size larger than TreeHead's). The
	// caller asked for something that does not exist; nothing is wrong
	// with the log.
	ErrOutOfRange = errors.New("audit: seq or tree size out of range")

	// ErrIntegrity is returned by the guard a server puts in front of
	// Append (app's audit log wrapper), not by Log itself, once a
	// verification of the open log (VerifyRange, run by the scrubber) has
	// found a record, the tree or an anchored checkpoint broken: the log's
	// past can no longer be proven, so every append is refused and the
	// caller must release nothing. It stays so until an operator has
	// investigated and restarted the server (docs/operations.md,
	// "Continuous integrity").
	ErrIntegrity = errors.New("audit: audit log failed its integrity check")

	// ErrExportDamaged is returned (as an *ExportDamagedError) by Export
	// and ExportFile when the export was written whole, every record
	// asked for as stored, but some of them do not check against the log
	// (changed in place, or relinked). The output is complete and is the
	// evidence; the log is not intact: run VerifyFile for every problem.
	ErrExportDamaged = errors.New("audit: exported records do not verify")
)

// ExportDamagedError says that an export was written whole but that
// Problems of its records failed the export's checks, First the first of
// them. It matches ErrExportDamaged and ErrCorrupt with errors.Is.
type ExportDamagedError struct {
	Records  int // records written, every one asked for
	Problems int // problems found in them
	First    Problem
}

func (e *ExportDamagedError) Error() string {
	return fmt.Sprintf("audit: audit log is corrupt: the export holds every one of the %d records asked for, as stored, but %d problem(s) were found in them; the first: %s", e.Records, e.Problems, e.First)
}

// Is reports whether target is ErrExportDamaged or ErrCorrupt.
func (e *ExportDamagedError) Is(target error) bool {
	return target == ErrExportDamaged || target == ErrCorrupt
}

// CorruptError is the evidence for an integrity failure found at one record:
// which sequence number, what was expected and what was found. It matches
// ErrCorrupt with errors.Is (or ErrNonCanonical when Kind is
// "non_canonical").
type CorruptError struct {
	Seq      uint64 // the record concerned (0 when the log-level metadata is at fault)
	Kind     string // one of the Problem kinds, e.g. "hash_mismatch", "head_mismatch"
	Expected string // what the log's invariants require (hashes in hex)
	Got      string // what was found
	Detail   string // free text without record contents

	cause error // the cause, when a library's sentinel names it (Unwrap)

	// firstStart: a segment_damaged file as a kill during a new log's
	// first start leaves it, with the advice for that in Detail
	// (damagedDetail).
	firstStart bool
}

func (e *CorruptError) Error() string {
	msg := fmt.Sprintf("audit: audit log is corrupt: %s at seq %d", e.Kind, e.Seq)
	if e.Expected != "" || e.Got != "" {
		msg += fmt.Sprintf(": expected %q, got %q", e.Expected, e.Got)
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns the cause, if any: for a segment_damaged file, bbolt's
// sentinel (ErrInvalid, ErrVersionMismatch, ErrChecksum) for a meta page
// at fault, so that a caller can tell which with errors.Is.
func (e *CorruptError) Unwrap() error { return e.cause }

// Is reports whether target is ErrCorrupt (or ErrNonCanonical for a
// "non_canonical" corruption).
func (e *CorruptError) Is(target error) bool {
	if target == ErrCorrupt {
		return true
	}
	return target == ErrNonCanonical && e.Kind == KindNonCanonical
}
