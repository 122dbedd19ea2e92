package audit

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Problem kinds reported by VerifyFile.
const (
	KindHashMismatch   = "hash_mismatch"   // the record's bytes do not hash to its stored hash: this record was altered
	KindChainBreak     = "chain_break"     // prev_hash differs from the stored hash of the record before it
	KindNonCanonical   = "non_canonical"   // the stored bytes are not a canonical record encoding
	KindSeqGap         = "seq_gap"         // records are missing before this one (Seq = first missing)
	KindSeqMismatch    = "seq_mismatch"    // the record's seq field differs from its key
	KindTimeRegression = "time_regression" // the record's time is earlier than the previous record's
	KindMissingHash    = "missing_hash"    // a record has no entry in the hashes bucket
	KindMissingRecord  = "missing_record"  // the hashes bucket has an entry with no record
	KindHeadMismatch   = "head_mismatch"   // meta's head (seq, hash) is not the last record
	KindBadKey         = "bad_key"         // a records key is not 8 bytes
	// KindVersionRegression: the record's format version is lower than the
	// previous record's. An older custos cannot open a log whose head is of a
	// newer version, so no legitimate writer produces this.
	KindVersionRegression = "version_regression"
)

// Problem is one integrity failure found by VerifyFile, with its evidence.
// Hashes are lowercase hex; seqs are decimal.
type Problem struct {
	Seq      uint64 `json:"seq"`      // the record concerned
	Kind     string `json:"kind"`     // one of the Kind* constants
	Expected string `json:"expected"` // what the invariants require
	Got      string `json:"got"`      // what is stored
	Detail   string `json:"detail"`   // explanation; never record contents
}

func (p Problem) String() string {
	s := fmt.Sprintf("seq %d: %s", p.Seq, p.Kind)
	if p.Expected != "" || p.Got != "" {
		s += fmt.Sprintf(": expected %s, got %s", p.Expected, p.Got)
	}
	if p.Detail != "" {
		s += " (" + p.Detail + ")"
	}
	return s
}

// Summary is the outcome of a verification.
type Summary struct {
	Records  uint64 `json:"records"`   // records walked
	HeadSeq  uint64 `json:"head_seq"`  // key of the last record (0 if none)
	HeadHash string `json:"head_hash"` // stored hash of the last record (ZeroHash if none)
	Problems int    `json:"problems"`  // problems reported; 0 means the log verified
	// Records by format version, counting records that decode: a log
	// migrated in place has RecordsV1 older records followed by RecordsV2
	// newer ones.
	RecordsV1 uint64 `json:"records_v1"`
	RecordsV2 uint64 `json:"records_v2"`
}

// verifyChunk is the number of records examined per read transaction: long
// read transactions block bbolt's remapping of a growing file.
const verifyChunk = 1024

// VerifyFile checks the audit log at path, opened read-only under a shared
// file lock (ErrLocked if a writer holds it for DefaultTimeout). It walks
// every record, in chunks of read transactions, and calls report for EVERY
// problem found (report may be nil):
//
//   - non_canonical: the bytes do not Decode;
//   - hash_mismatch: HashRecord(bytes) differs from the hashes bucket entry;
//   - chain_break: prev_hash differs from the stored hash of the previous
//     record (ZeroHash for the first);
//   - seq_gap, seq_mismatch, bad_key: keys not 1, 2, 3, ... or not matching
//     the record's seq;
//   - time_regression: a record earlier than the one before it;
//   - version_regression: a record of a lower format version than the one
//     before it (v1 records may be followed by v2 records, not the reverse);
//   - missing_hash, missing_record: the two buckets disagree;
//   - head_mismatch: meta's head is not the last record.
//
// The error is non-nil only when the file cannot be read (I/O, lock, ctx,
// or a file that is not an audit log at all).
func VerifyFile(ctx context.Context, path string, report func(Problem)) (Summary, error) {
	db, err := openReadOnly(path)
	if err != nil {
		return Summary{}, err
	}
	defer db.Close()
	return verifyDB(ctx, db, report)
}

func openReadOnly(path string) (*bolt.DB, error) {
	// bbolt would create a missing file before noticing ReadOnly; refuse.
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: DefaultTimeout})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("%w (waited %s)", ErrLocked, DefaultTimeout)
		}
		return nil, fmt.Errorf("audit: open: %w", err)
	}
	return db, nil
}

// errNotAuditLog is returned (wrapped in a *CorruptError) when a bucket of the
// layout is missing altogether.
func notAuditLog(detail string) error {
	return &CorruptError{Kind: KindHeadMismatch, Detail: "not an audit log: " + detail}
}

type verifier struct {
	report   func(Problem)
	sum      Summary
	expect   uint64    // next expected seq
	prevHash string    // stored hash of the previous record
	prevTime time.Time // time of the previous decodable record
	prevV    int       // format version of the previous decodable record
	haveTime bool
}

func (v *verifier) problem(p Problem) {
	v.sum.Problems++
	if v.report != nil {
		v.report(p)
	}
}

func (v *verifier) record(k, val, stored []byte) {
	v.sum.Records++
	if len(k) != 8 {
		v.problem(Problem{Seq: v.expect, Kind: KindBadKey, Got: hex.EncodeToString(k), Detail: "record key is not 8 bytes"})
		return
	}
	seq := binary.BigEndian.Uint64(k)
	if seq != v.expect {
		d := fmt.Sprintf("expected seq %d next, found %d", v.expect, seq)
		if seq > v.expect {
			d = fmt.Sprintf("records %d..%d missing", v.expect, seq-1)
		}
		v.problem(Problem{Seq: v.expect, Kind: KindSeqGap, Expected: fmt.Sprint(v.expect), Got: fmt.Sprint(seq), Detail: d})
	}
	computed := HashRecord(val)
	chainHash := computed
	switch {
	case stored == nil:
		v.problem(Problem{Seq: seq, Kind: KindMissingHash, Got: computed, Detail: "no hashes entry for this record"})
	case len(stored) != 32:
		v.problem(Problem{Seq: seq, Kind: KindHashMismatch, Expected: hex.EncodeToString(stored), Got: computed, Detail: "stored hash is not 32 bytes"})
	default:
		chainHash = hex.EncodeToString(stored)
		if chainHash != computed {
			v.problem(Problem{Seq: seq, Kind: KindHashMismatch, Expected: chainHash, Got: computed, Detail: "record bytes do not hash to the stored hash"})
		}
	}
	rec, err := Decode(val)
	if err != nil {
		v.problem(Problem{Seq: seq, Kind: KindNonCanonical, Detail: err.Error()})
	} else {
		if rec.Seq != seq {
			v.problem(Problem{Seq: seq, Kind: KindSeqMismatch, Expected: fmt.Sprint(seq), Got: fmt.Sprint(rec.Seq), Detail: "record's seq field differs from its key"})
		}
		if rec.PrevHash != v.prevHash {
			v.problem(Problem{Seq: seq, Kind: KindChainBreak, Expected: v.prevHash, Got: rec.PrevHash, Detail: "prev_hash is not the previous record's stored hash"})
		}
		if v.haveTime && rec.Time.Before(v.prevTime) {
			v.problem(Problem{Seq: seq, Kind: KindTimeRegression, Expected: ">= " + v.prevTime.Format(TimeLayout), Got: rec.Time.Format(TimeLayout)})
		}
		if v.haveTime && rec.V < v.prevV {
			v.problem(Problem{Seq: seq, Kind: KindVersionRegression, Expected: fmt.Sprintf("v >= %d", v.prevV), Got: fmt.Sprintf("v %d", rec.V), Detail: "format version lower than the previous record's"})
		}
		switch rec.V {
		case FormatVersion1:
			v.sum.RecordsV1++
		case FormatVersion2:
			v.sum.RecordsV2++
		}
		v.prevTime, v.prevV, v.haveTime = rec.Time, rec.V, true
	}
	v.prevHash = chainHash
	v.expect = seq + 1
	v.sum.HeadSeq, v.sum.HeadHash = seq, chainHash
}

func (v *verifier) head(meta *bolt.Bucket) {
	s, h := meta.Get(metaHeadSeq), meta.Get(metaHeadHash)
	if len(s) != 8 || len(h) != 32 {
		v.problem(Problem{Seq: v.sum.HeadSeq, Kind: KindHeadMismatch, Detail: "meta head_seq or head_hash missing or malformed"})
		return
	}
	seq, hash := binary.BigEndian.Uint64(s), hex.EncodeToString(h)
	if seq != v.sum.HeadSeq || hash != v.sum.HeadHash {
		v.problem(Problem{
			Seq:      seq,
			Kind:     KindHeadMismatch,
			Expected: fmt.Sprintf("%d:%s", seq, hash),
			Got:      fmt.Sprintf("%d:%s", v.sum.HeadSeq, v.sum.HeadHash),
			Detail:   "meta head (seq:hash) is not the last stored record",
		})
	}
}

func verifyDB(ctx context.Context, db *bolt.DB, report func(Problem)) (Summary, error) {
	v := &verifier{report: report, expect: 1, prevHash: ZeroHash}
	v.sum.HeadHash = ZeroHash
	var after []byte
	for done := false; !done; {
		if err := ctx.Err(); err != nil {
			return v.sum, err
		}
		err := db.View(func(tx *bolt.Tx) error {
			meta, records, hashes := tx.Bucket(bucketMeta), tx.Bucket(bucketRecords), tx.Bucket(bucketHashes)
			if meta == nil || records == nil || hashes == nil {
				return notAuditLog("bucket missing")
			}
			if f := meta.Get(metaFormat); string(f) != formatMagic {
				return notAuditLog("unknown storage format")
			}
			c := records.Cursor()
			k, val := seekAfter(c, after)
			for n := 0; k != nil && n < verifyChunk; n++ {
				v.record(k, val, hashes.Get(k))
				after = append(after[:0], k...)
				k, val = c.Next()
			}
			if k == nil {
				// The end is checked in the same transaction as the last
				// records, so a concurrent Append cannot cause a false alarm.
				v.head(meta)
				done = true
			}
			return nil
		})
		if err != nil {
			return v.sum, err
		}
	}
	// Second pass: hashes without records.
	after = nil
	for done := false; !done; {
		if err := ctx.Err(); err != nil {
			return v.sum, err
		}
		err := db.View(func(tx *bolt.Tx) error {
			records, hashes := tx.Bucket(bucketRecords), tx.Bucket(bucketHashes)
			c := hashes.Cursor()
			k, _ := seekAfter(c, after)
			for n := 0; k != nil && n < verifyChunk; n++ {
				if records.Get(k) == nil {
					var seq uint64
					if len(k) == 8 {
						seq = binary.BigEndian.Uint64(k)
					}
					v.problem(Problem{Seq: seq, Kind: KindMissingRecord, Detail: "stored hash without a record"})
				}
				after = append(after[:0], k...)
				k, _ = c.Next()
			}
			done = k == nil
			return nil
		})
		if err != nil {
			return v.sum, err
		}
	}
	return v.sum, nil
}

// seekAfter positions c on the first key strictly after after (the first key
// when after is nil).
func seekAfter(c *bolt.Cursor, after []byte) ([]byte, []byte) {
	if after == nil {
		return c.First()
	}
	k, v := c.Seek(after)
	if k != nil && bytes.Equal(k, after) {
		k, v = c.Next()
	}
	return k, v
}
