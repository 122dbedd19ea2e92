package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"sync"

	segjson "github.com/segmentio/encoding/json"
	bolt "go.etcd.io/bbolt"
)

// Decision inputs.
//
// Next to a record the writer may store the policy input the audited
// decision evaluated (Entry.Input), so that a candidate policy can later be
// replayed against real traffic (package policy/impact). The input is
// context, not evidence: it is not part of the canonical record, not hashed,
// not chained and not in the Merkle tree, so it can be neither verified nor
// relied upon as proof of what happened; the record alone is the evidence.
// It is written in the same transaction as its record (so a record never
// lacks an input that was given to Append, and an input never exists without
// its record), under the record's seq, and never rewritten.
//
// The caller must have replaced every patient id in it by its keyed hash
// (Pseudonym), as in the record: the audit log is PHI, but it holds no raw
// patient id.

//
// A policy input repeats its principal in every record of that principal,
// and a clinician's principal carries her whole care team (pseudonymized):
// ~40 bytes a patient, tens of kilobytes for a large panel, on every read.
// An input whose JSON begins with a "principal" member of at least
// sharedPrincipalMin bytes is therefore stored in two parts: the principal's
// value once, under its SHA-256, in bucketInputDocs, and the record's input
// as a reference to it plus the rest of the JSON. Inputs reassembles the
// exact bytes given to Append.

// bucketInputs holds decision inputs: key seq (8-byte big-endian), value
// either the input bytes (JSON, which never begins with a zero byte) or
// inputSharedTag, the 32-byte SHA-256 of the input's principal value, and
// the input's bytes after that value. Created by the first Append that
// stores an input.
var bucketInputs = []byte("inputs")

// bucketInputDocs holds the principal values inputs refer to: key their
// SHA-256 (32 bytes), value the JSON bytes. Written once, never rewritten.
var bucketInputDocs = []byte("input-docs")

const (
	inputSharedTag     = 0x00
	sharedPrincipalMin = 256
)

// inputPrincipalPrefix is how every input the server records begins
// (policy.Input's first field).
var inputPrincipalPrefix = []byte(`{"principal":`)

// storedForm is how an input is stored: as given (shared false), or as a
// reference to its principal (shared true: principal is the value that goes
// into bucketInputDocs under sum, and value the bytes to store under the
// record's seq). It is computed by Append before the write transaction.
type storedForm struct {
	shared    bool
	sum       [sha256.Size]byte
	principal []byte
	value     []byte
}

// splitInput returns the stored form of in, which is valid JSON
// (validateInput): shared when in begins with a principal member of at
// least sharedPrincipalMin bytes, whose SHA-256 sum computes (sha256.Sum256,
// or principalSums.sum: the same value, memoized).
func splitInput(in []byte, sum func([]byte) [sha256.Size]byte) storedForm {
	if !bytes.HasPrefix(in, inputPrincipalPrefix) {
		return storedForm{value: in}
	}
	body := in[len(inputPrincipalPrefix):]
	n := valueEnd(body)
	if n < sharedPrincipalMin || n > len(body) {
		return storedForm{value: in}
	}
	f := storedForm{shared: true, sum: sum(body[:n]), principal: body[:n]}
	f.value = make([]byte, 0, 1+sha256.Size+len(body)-n)
	f.value = append(append(append(f.value, inputSharedTag), f.sum[:]...), body[n:]...)
	return f
}

// principalSum256 is the SHA-256 of a shared principal value (a variable
// only so that a test can count them: TestAppendHashesAPrincipalOnce).
var principalSum256 = sha256.Sum256

// principalSums memoizes the SHA-256 of the shared principal values of
// recent inputs. The server records a clinician's whole care team,
// pseudonymized (~70 bytes a patient), in the input of each of her
// decisions; hashing it again on every read was the largest SHA-256 of the
// read path (docs/benchmarks.md, "Issue 17, twenty-fourth step"). A value
// is looked up by a seeded non-crypto hash and compared whole, so a sum is
// only ever the SHA-256 of exactly the bytes given. At most
// maxPrincipalSumBytes of values are kept; a full memo starts afresh.
type principalSums struct {
	mu    sync.Mutex
	m     map[uint64]principalSum
	bytes int
}

type principalSum struct {
	value []byte
	sum   [sha256.Size]byte
}

const maxPrincipalSumBytes = 4 << 20

var principalSeed = maphash.MakeSeed()

// sum is principalSum256(value), memoized.
func (c *principalSums) sum(value []byte) [sha256.Size]byte {
	h := maphash.Bytes(principalSeed, value)
	c.mu.Lock()
	e, ok := c.m[h]
	c.mu.Unlock()
	if ok && bytes.Equal(e.value, value) {
		return e.sum
	}
	s := principalSum256(value)
	if len(value) > maxPrincipalSumBytes/16 {
		return s // too large to keep
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[h]; ok {
		c.bytes -= len(old.value) // a collision or a race: the newer stays
	}
	if c.m == nil || c.bytes+len(value) > maxPrincipalSumBytes {
		c.m, c.bytes = make(map[uint64]principalSum), 0
	}
	c.m[h] = principalSum{value: bytes.Clone(value), sum: s}
	c.bytes += len(value)
	return s
}

// valueEnd returns the length of the JSON value at the start of b,
// including the whitespace before it, or -1. b is the rest of a valid JSON
// text from the start of a value (the input passed validJSON), so only
// strings, nesting and the end of a scalar need tracking. Whatever it
// returns, storage stays exact: the input is stored as the bytes before and
// after the split point, and reassembled from them.
func valueEnd(b []byte) int {
	i := 0
	for i < len(b) && isJSONSpace(b[i]) {
		i++
	}
	if i == len(b) {
		return -1
	}
	depth := 0
	for ; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if i >= len(b) {
				return -1
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // the end of a scalar
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',':
			if depth == 0 {
				return i
			}
		default:
			if depth == 0 && isJSONSpace(c) {
				return i
			}
		}
	}
	if depth == 0 {
		return len(b)
	}
	return -1
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// MaxInputSize is the largest Entry.Input Append accepts, in bytes.
const MaxInputSize = 1 << 20

// validateInput checks Entry.Input: empty, or valid JSON of at most
// MaxInputSize bytes. Messages never quote the input.
func validateInput(in []byte) error {
	if len(in) == 0 {
		return nil
	}
	if len(in) > MaxInputSize {
		return fmt.Errorf("%w: Input is larger than %d bytes", ErrBadEntry, MaxInputSize)
	}
	if !validJSON(in) {
		return fmt.Errorf("%w: Input is not valid JSON", ErrBadEntry)
	}
	return nil
}

// fastValidMax is the largest input validJSON hands to segmentio's
// validator. An input it accepts is balanced, so its nesting depth is at
// most half its length: up to fastValidMax bytes, within the 10,000 levels
// encoding/json.Valid accepts.
const fastValidMax = 20000

// validJSON reports encoding/json.Valid(in), which it is checked against
// (TestValidJSONAgreesWithEncodingJSON, FuzzValidJSON). Inputs of up to
// fastValidMax bytes, the size of a decision input with a care team of a
// few hundred patients, go to github.com/segmentio/encoding/json.Valid
// (built in already through the MCP SDK), ~15 times faster on them: it
// agrees with encoding/json but for nesting deeper than 10,000 levels,
// which encoding/json rejects and no input of that size can reach. Larger
// inputs go to encoding/json.
func validJSON(in []byte) bool {
	if len(in) <= fastValidMax {
		return segjson.Valid(in)
	}
	return json.Valid(in)
}

// putInput stores in under key in tx (the record's transaction). Like the
// record, it never overwrites: an input already stored under key means the
// buckets disagree with the meta head.
func putInput(tx *bolt.Tx, key []byte, f storedForm) error {
	b, err := tx.CreateBucketIfNotExists(bucketInputs)
	if err != nil {
		return err
	}
	if b.Get(key) != nil {
		return &CorruptError{Seq: binary.BigEndian.Uint64(key), Kind: KindHeadMismatch, Detail: "a decision input already exists past the meta head"}
	}
	b.FillPercent = 1.0 // sequential keys only ever append
	if f.shared {
		docs, err := tx.CreateBucketIfNotExists(bucketInputDocs)
		if err != nil {
			return err
		}
		if docs.Get(f.sum[:]) == nil {
			if err := docs.Put(f.sum[:], f.principal); err != nil {
				return err
			}
		}
	}
	return b.Put(key, f.value)
}

// storedInput returns the input bytes Append was given for the stored
// value v of record seq, reassembling a shared principal from docs.
func storedInput(docs *bolt.Bucket, verified map[[sha256.Size]byte]bool, seq uint64, v []byte) ([]byte, error) {
	if len(v) == 0 || v[0] != inputSharedTag {
		return append([]byte(nil), v...), nil
	}
	if len(v) < 1+sha256.Size {
		return nil, &CorruptError{Seq: seq, Kind: KindInputDocMissing, Detail: "a shared-principal input is shorter than its reference"}
	}
	sum := v[1 : 1+sha256.Size]
	var p []byte
	if docs != nil {
		p = docs.Get(sum)
	}
	if p == nil {
		return nil, &CorruptError{Seq: seq, Kind: KindInputDocMissing, Expected: hex.EncodeToString(sum), Detail: "the input's principal is not in the input-docs bucket"}
	}
	key := [sha256.Size]byte(sum)
	if !verified[key] {
		if got := sha256.Sum256(p); got != key {
			return nil, &CorruptError{Seq: seq, Kind: KindInputDocMissing, Expected: hex.EncodeToString(sum), Got: hex.EncodeToString(got[:]), Detail: "the stored principal does not hash to its key"}
		}
		verified[key] = true // per call of Inputs: each principal is checked once
	}
	rest := v[1+sha256.Size:]
	out := make([]byte, 0, len(inputPrincipalPrefix)+len(p)+len(rest))
	return append(append(append(out, inputPrincipalPrefix...), p...), rest...), nil
}

// Inputs calls fn, in seq order, for every record with seq in [from, to]
// that has a stored decision input (records without one are skipped, so
// fn may see gaps). input is a copy that fn may keep. It works on a log
// opened read-only, reads in chunks of read transactions, and returns fn's
// first error. from must be >= 1 and to >= from (ErrOutOfRange); to may lie
// past the head.
func (l *Log) Inputs(ctx context.Context, from, to uint64, fn func(seq uint64, input []byte) error) error {
	if from < 1 || to < from {
		return fmt.Errorf("%w: inputs %d..%d", ErrOutOfRange, from, to)
	}
	for _, s := range l.segments() {
		if s.base >= to {
			break
		}
		if err := l.segmentInputs(ctx, s, max(from, s.base+1), to, fn); err != nil {
			return err
		}
	}
	return nil
}

// segmentInputs is Inputs over one segment.
func (l *Log) segmentInputs(ctx context.Context, s *segment, from, to uint64, fn func(seq uint64, input []byte) error) error {
	next := from
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		done := true
		err := l.viewIn(s, func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketInputs)
			if b == nil {
				return nil
			}
			docs := tx.Bucket(bucketInputDocs)
			verified := map[[sha256.Size]byte]bool{}
			c := b.Cursor()
			k, v := c.Seek(seqKey(next))
			for n := uint64(0); k != nil; n++ {
				if len(k) != 8 {
					return &CorruptError{Kind: KindHeadMismatch, Detail: "malformed key in the inputs bucket"}
				}
				seq := binary.BigEndian.Uint64(k)
				if seq > to {
					return nil
				}
				if n == recordsChunk {
					next, done = seq, false // continue in a fresh transaction
					return nil
				}
				input, err := storedInput(docs, verified, seq, v)
				if err != nil {
					return err
				}
				if err := fn(seq, input); err != nil {
					return err
				}
				if seq == to {
					return nil
				}
				k, v = c.Next()
			}
			return nil
		})
		if err != nil || done {
			return err
		}
	}
}
