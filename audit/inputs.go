package audit

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"

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

// bucketInputs holds decision inputs: key seq (8-byte big-endian), value the
// input bytes (JSON). Created by the first Append that stores an input.
var bucketInputs = []byte("inputs")

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
	if !json.Valid(in) {
		return fmt.Errorf("%w: Input is not valid JSON", ErrBadEntry)
	}
	return nil
}

// putInput stores in under key in tx (the record's transaction). Like the
// record, it never overwrites: an input already stored under key means the
// buckets disagree with the meta head.
func putInput(tx *bolt.Tx, key, in []byte) error {
	b, err := tx.CreateBucketIfNotExists(bucketInputs)
	if err != nil {
		return err
	}
	if b.Get(key) != nil {
		return &CorruptError{Seq: binary.BigEndian.Uint64(key), Kind: KindHeadMismatch, Detail: "a decision input already exists past the meta head"}
	}
	b.FillPercent = 1.0 // sequential keys only ever append
	return b.Put(key, in)
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
	next := from
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		done := true
		err := l.view(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketInputs)
			if b == nil {
				return nil
			}
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
				if err := fn(seq, append([]byte(nil), v...)); err != nil {
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
